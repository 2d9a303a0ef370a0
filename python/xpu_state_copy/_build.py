"""How this copy was built, and whether the torch importing it is the one it was built for.

torch does not promise a stable C++ ABI across releases: a build made against one release may import under
another and work, fail to load on an undefined symbol, or misbehave quietly. setup.py records the torch it
compiled against in _build_info.py; this module compares it with the running torch before the compiled
modules are loaded, so a mismatch is named (with both versions and the fix) instead of guessed at.
"""
import copy
import warnings

import torch

try:
    from ._build_info import BUILD_INFO
except ImportError:  # a source tree that setup.py never built: nothing recorded
    BUILD_INFO = None

REBUILD = ("rebuild xpu_state_copy against the installed torch (pip install --no-build-isolation "
           "--force-reinstall --no-deps <this package's source or sdist>) or install its wheel built for torch {now}")


class TorchVersionMismatch(UserWarning):
    """xpu_state_copy was built for another torch release than the one importing it."""


def build_info():
    """How this installation was built: torch version and CXX11 ABI, XPU/CUDA torch, backends and targets.

    None when the package runs from a source tree that was never built (no _build_info.py).
    """
    return copy.deepcopy(BUILD_INFO)


def release(version):
    """'2.13.0+cpu' -> '2.13.0': the local tag names a variant of the same release."""
    return str(version).split("+", 1)[0]


def torch_mismatch(info=None, running=None):
    """A sentence naming both torch versions and the fix when they are different releases, else None."""
    info = BUILD_INFO if info is None else info
    running = torch.__version__ if running is None else running
    if not info or release(info["torch"]) == release(running):
        return None
    return (f"xpu_state_copy was built for torch {info['torch']} but is imported under torch {running}; "
            "torch's C++ ABI is not stable across releases, so its compiled modules may fail to load or "
            "misbehave: " + REBUILD.format(now=release(running)))


def warn_if_mismatch():
    message = torch_mismatch()
    if message is not None:
        warnings.warn(message, TorchVersionMismatch, stacklevel=2)


def explain_load_failure(error, module):
    """The ImportError to raise when a compiled module fails to load; None to let `error` through.

    A missing symbol is what a torch other than the one built against looks like to the loader.
    """
    text = str(error)
    if "undefined symbol" not in text:
        return None
    built = BUILD_INFO["torch"] if BUILD_INFO else "an unknown torch (no build record)"
    cause = (f"xpu_state_copy was built for torch {built} but is imported under torch {torch.__version__}"
             if torch_mismatch() else
             f"xpu_state_copy was built for torch {built} and torch {torch.__version__} is installed, but its "
             "build (C++ ABI or variant, e.g. XPU or CUDA) differs")
    return ImportError(f"{cause}, and {module} cannot be loaded under it: "
                       + REBUILD.format(now=release(torch.__version__)) + f" (the loader said: {text.strip()})")
