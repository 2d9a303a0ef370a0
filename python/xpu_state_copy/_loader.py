"""Loads the compiled modules and answers which backend serves a device.

The SYCL runtime reads its environment once, at its first call, so the defaults below are put in place
before the SYCL module is loaded: the Intel OpenCL CPU device (found only through OCL_ICD_FILENAMES) and
SYCL's persistent kernel cache (so the run-time compiled kernel is built once per machine, not per process).
"""
import importlib
import os
import pathlib
import sys

import torch

from . import _build, device_image


def _sycl_library_dirs():
    """lib/ folders that may hold intel-opencl-rt's libintelocl.so: this environment's, then SYCL_ROOT's."""
    roots = [sys.prefix, os.environ.get("SYCL_ROOT"), os.environ.get("CMPLR_ROOT")]
    return [pathlib.Path(r) / "lib" for r in roots if r]


def _set_sycl_environment():
    if "OCL_ICD_FILENAMES" not in os.environ:
        for lib in _sycl_library_dirs():
            if (lib / "libintelocl.so").exists():
                os.environ["OCL_ICD_FILENAMES"] = str(lib / "libintelocl.so")
                break
    os.environ.setdefault("SYCL_CACHE_PERSISTENT", "1")
    # SYCL silently caches nothing when SYCL_CACHE_DIR names a folder that does not exist (seen).
    cache_dir = os.environ.get("SYCL_CACHE_DIR")
    if cache_dir:
        try:
            os.makedirs(cache_dir, exist_ok=True)
        except OSError:
            pass  # unwritable: SYCL then builds in every process, as it would have


_set_sycl_environment()
_build.warn_if_mismatch()
try:
    from . import _C  # noqa: E402  registers the schemas and the native implementations
except ImportError as error:
    explained = _build.explain_load_failure(error, "xpu_state_copy._C")
    if explained is None:
        raise
    raise explained from error

_sycl_module = None
_sycl_error = None
try:
    _sycl_module = importlib.import_module("xpu_state_copy._sycl_jit")
except ModuleNotFoundError as error:
    if error.name != "xpu_state_copy._sycl_jit":  # the module is there, something it needs is not
        _sycl_error = error
except ImportError as error:  # built, but its SYCL runtime (libsycl) is missing now, or another torch is here
    _sycl_error = _build.explain_load_failure(error, "xpu_state_copy._sycl_jit") or error
if _sycl_module is not None:
    device_image.configure(_sycl_module)  # before any copy: a device's kernels are built once


class BackendUnavailable(RuntimeError):
    """A backend was asked for that this installation or machine cannot run."""


def sycl_status():
    """(origin or None, reason): 'sycl-aot'/'sycl-jit' when a SYCL kernel is available, else why not."""
    if _C.built_with_sycl_aot:
        return "sycl-aot", "compiled ahead of time by icpx"
    if _sycl_module is not None:
        return _sycl_module.kernel_origin(), "kernel compiled at run time by SYCL's kernel compiler"
    if _sycl_error is not None and str(_sycl_error).startswith("xpu_state_copy was built for torch"):
        return None, str(_sycl_error)  # built for another torch: the message names the fix
    if _sycl_error is not None:
        return None, (f"the SYCL module failed to load ({_sycl_error}); install the SYCL runtime it was "
                      "built against: pip install intel-sycl-rt intel-opencl-rt")
    return None, ("xpu_state_copy was built without SYCL: pip install intel-sycl-rt intel-opencl-rt, then "
                  "rebuild (pip install --no-build-isolation --force-reinstall .)")


def _require_sycl(what):
    origin, reason = sycl_status()
    if origin is None:
        raise BackendUnavailable(f"{what} needs the SYCL backend, which is unavailable: {reason}")
    return origin


def backend(device=None) -> str:
    """Which implementation a batch_memcpy on `device` runs: 'cpu', 'sycl-jit', 'sycl-aot' or 'cuda'.

    Raises BackendUnavailable (saying what is missing) when that device's backend cannot run here.
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    if device.type == "cpu":
        if _C.cpu_backend() == "cpu":
            return "cpu"
        return _require_sycl("XPU_STATE_COPY_BACKEND=sycl")
    if device.type == "xpu":
        if not torch._C._dispatch_has_kernel_for_dispatch_key("xpu_state_copy::batch_memcpy", "XPU"):
            _require_sycl("an XPU tensor")
            raise BackendUnavailable("this torch has no XPU support, so no XPU kernel is registered; "
                                     "install an XPU build of torch and rebuild xpu_state_copy")
        return _require_sycl("an XPU tensor")
    if device.type == "cuda":
        if not _C.built_with_cuda:
            raise BackendUnavailable("xpu_state_copy was built without CUDA (torch had no CUDA or nvcc was "
                                     "not found at build time); rebuild on a CUDA machine")
        return "cuda"
    raise BackendUnavailable(f"no xpu_state_copy backend for device type {device.type!r}")


def sycl_kernels_module(device):
    """The extension module that launches SYCL kernels on `device` (_C in icpx builds, else _sycl_jit), or
    None where another backend serves it (native CPU, CUDA). Raises BackendUnavailable as backend() does."""
    origin = backend(device)
    if origin not in ("sycl-jit", "sycl-aot"):
        return None
    return _C if origin == "sycl-aot" else _sycl_module


def kernel_launches(device):
    """The grid each SYCL kernel is launched with on `device`, building the kernels first if need be: a list
    of {kernel, groups, local, resident_groups, sub_group, local_bytes, hw_threads, compute_units}
    (resident_groups: the runtime's count, None where the device's backend does not answer it), or None
    where no SYCL kernel serves the device."""
    module = sycl_kernels_module(device)
    return None if module is None else module.kernel_launches(str(torch.device(device)))
