"""A pytest plugin (``-p upstream_plugin_loader``) for running vLLM's own tests with our plugin in place.

It stands in for vLLM's conftest.py (which imports most of vLLM's serving stack): before any test module
is collected it loads the plugins the way vLLM's workers do, ``vllm.plugins.load_general_plugins()``, so
xpu_state_copy patches ``vllm.v1.worker.mamba_utils`` when the tests import it (XPU_STATE_COPY_VLLM
decides). With the plugin on it also counts the calls that reach our ops, so a run can tell which of the
plugin's paths vLLM's tests exercise. At the end it writes, to $XPU_STATE_COPY_UPSTREAM_REPORT, every test's
outcome, what the plugin patched, and those counts.
"""
import functools
import importlib
import json
import os
import sys

MARK = "__xpu_state_copy_patch__"
# Where the plugin hands work to our ops: (module, function). Counted with the plugin on.
SERVING = (("xpu_state_copy.ops", "batch_memcpy"),
           ("xpu_state_copy.ops", "mamba_spec_decode_postprocess_"),
           ("xpu_state_copy.ops", "mamba_spec_decode_precopy_"),
           ("xpu_state_copy.vllm.aligned_indices", "gather_aligned_indices"))

_outcomes = {}
_served = {}


def _counting(name, function):
    @functools.wraps(function)
    def counted(*args, **kwargs):
        _served[name] = _served.get(name, 0) + 1
        return function(*args, **kwargs)

    return counted


class CpuUvaBuffer:
    """Stands in for vLLM's UvaBuffer (the V2 runner's host buffers that the device reads in place), which
    allocates pinned host memory. On the CPU the device's view of host memory is that memory itself, so one
    plain tensor serves as both."""

    def __init__(self, size, dtype):
        import torch

        self.cpu = torch.zeros(size, dtype=dtype)
        self.np = self.cpu.numpy()

    def uva(self, n=None):
        return self.cpu if n is None else self.cpu[:n]


def _no_pinned_memory():
    """The CPU stand-ins, used where torch has no accelerator: such a torch cannot pin host memory, while
    vLLM's fallback platform (no GPU, no CPU build of vLLM) says it can. PIN_MEMORY is set to the truth before
    vllm.v1.utils reads it (at import, as its buffers' default), and UvaBuffer is replaced as above. Neither
    is Mamba copy code: they let vLLM's V2 block tables be built on the CPU."""
    import torch

    if torch.accelerator.is_available():
        return
    from vllm.utils import torch_utils

    torch_utils.PIN_MEMORY = False
    try:
        from vllm.v1.worker.gpu import buffer_utils
    except ImportError:
        return  # no V2 runner buffers in this release
    if hasattr(buffer_utils, "UvaBuffer"):
        buffer_utils.UvaBuffer = CpuUvaBuffer


def pytest_configure(config):
    _no_pinned_memory()
    if os.environ.get("XPU_STATE_COPY_VLLM") == "1":
        for module_name, attribute in SERVING:
            module = importlib.import_module(module_name)
            name = f"{module_name.rsplit('.', 1)[-1]}.{attribute}"
            _served[name] = 0
            setattr(module, attribute, _counting(name, getattr(module, attribute)))
    from vllm.plugins import load_general_plugins

    load_general_plugins()


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":  # a failed setup or teardown is an error
        outcome = report.outcome if report.when == "call" or report.skipped else "error"
        if _outcomes.get(report.nodeid) not in ("failed", "error"):
            _outcomes[report.nodeid] = outcome


def _patched():
    module = sys.modules.get("vllm.v1.worker.mamba_utils")
    if module is None:
        return []
    names = [name for name, value in vars(module).items() if getattr(value, MARK, False)]
    for class_name in ("MambaSpecDecodeGPUContext", "MambaCopyBuffers"):
        cls = getattr(module, class_name, None)
        names += [f"{class_name}.{name}" for name, value in vars(cls or object).items()
                  if getattr(getattr(value, "__func__", value), MARK, False)]
    return sorted(names)


def pytest_sessionfinish(session):
    path = os.environ.get("XPU_STATE_COPY_UPSTREAM_REPORT")
    if path:
        with open(path, "w") as out:
            json.dump({"outcomes": _outcomes, "patched": _patched(), "served": _served}, out)
