"""Device parametrization shared by the suite.

Every copy test runs on each place a copy can run: native CPU, the SYCL kernel on the Intel OpenCL CPU
device, and CUDA / XPU tensors where this machine has them. Set XPU_STATE_COPY_REQUIRE_SYCL=1 (CI does) to
turn a missing SYCL CPU backend into a failure instead of a skip, and XPU_STATE_COPY_REQUIRE_XPU=1 (the Intel
GPU runner's workflow does) to turn every "no XPU device" skip into a failure: a runner that lost its GPU, or
an environment whose torch is not an XPU build, then fails instead of passing on the CPU cases alone.
"""
import importlib.util
import os
import sys

import pytest
import torch

import xpu_state_copy

SYCL_ORIGIN, SYCL_REASON = xpu_state_copy.sycl_status()
HAS_CUDA = torch.cuda.is_available() and xpu_state_copy._loader._C.built_with_cuda
HAS_XPU = hasattr(torch, "xpu") and torch.xpu.is_available()
NO_XPU = "no XPU device"  # the skip reason XPU_STATE_COPY_REQUIRE_XPU=1 turns into a failure
REQUIRE_XPU = os.environ.get("XPU_STATE_COPY_REQUIRE_XPU") == "1"


def _import_triton_compiling():
    """Triton decides whether its own library (tl.sum, tl.cdiv, ...) is interpreted or compiled when
    triton.language is first imported, from TRITON_INTERPRET. The bench tests interpret their Triton peers
    on CPU tensors with TRITON_INTERPRET=1; had they imported Triton first, every torch.compile test after
    them on a GPU would compile kernels calling interpreted library functions, and fail. Importing it
    here, with the variable unset, keeps the library compiled; the peers call only builtins, which
    interpret either way."""
    if importlib.util.find_spec("triton") is None:
        return
    interpret = os.environ.pop("TRITON_INTERPRET", None)
    try:
        import triton.language  # noqa: F401
    except Exception:  # noqa: BLE001 - a Triton that cannot load is "no Triton" to the tests that use it
        pass
    finally:
        if interpret is not None:
            os.environ["TRITON_INTERPRET"] = interpret


def pytest_sessionstart(session):
    if REQUIRE_XPU and not HAS_XPU:
        why = ("torch is not an XPU build" if not (hasattr(torch, "xpu") and torch.xpu._is_compiled())
               else "torch.xpu.is_available() is False: check the GPU driver and ZE_AFFINITY_MASK")
        pytest.exit(f"XPU_STATE_COPY_REQUIRE_XPU=1 but torch {torch.__version__} sees {NO_XPU} ({why})", returncode=1)
    _import_triton_compiling()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_XPU and report.skipped and isinstance(report.longrepr, tuple) and NO_XPU in str(report.longrepr[2]):
        reason = str(report.longrepr[2]).replace("Skipped: ", "", 1)
        report.outcome = "failed"
        report.longrepr = f"XPU_STATE_COPY_REQUIRE_XPU=1 turns this skip into a failure: {reason}"



@pytest.fixture
def meta_path_without_hooks(monkeypatch):
    """sys.meta_path for one test, without the import hooks installed before it (ops.py's, for
    torch._dynamo, until something imports it): the test sees only the hooks it makes."""
    from xpu_state_copy import import_hook
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, import_hook.AfterImport)])

def _sycl_cpu_skip():
    if SYCL_ORIGIN is not None or os.environ.get("XPU_STATE_COPY_REQUIRE_SYCL") == "1":
        return []
    return [pytest.mark.skip(reason=f"no SYCL backend: {SYCL_REASON}")]


TARGETS = [
    pytest.param("cpu", id="cpu-native"),
    pytest.param("sycl-cpu", id="sycl-cpu", marks=_sycl_cpu_skip()),
    pytest.param("cuda", id="cuda", marks=pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device/build")),
    pytest.param("xpu", id="xpu", marks=pytest.mark.skipif(not HAS_XPU, reason=NO_XPU)),
]


class Target:
    """Where a test's tensors live and which backend must serve them."""

    def __init__(self, name):
        self.name = name
        self.device = torch.device("cpu" if name in ("cpu", "sycl-cpu") else name)
        self.expected_backend = {"cpu": "cpu", "sycl-cpu": SYCL_ORIGIN, "cuda": "cuda", "xpu": SYCL_ORIGIN}[name]

    def __repr__(self):
        return self.name


@pytest.fixture(params=TARGETS)
def target(request, monkeypatch):
    if request.param == "sycl-cpu":
        monkeypatch.setenv("XPU_STATE_COPY_BACKEND", "sycl")
    else:
        monkeypatch.delenv("XPU_STATE_COPY_BACKEND", raising=False)
    t = Target(request.param)
    assert xpu_state_copy.backend(t.device) == t.expected_backend
    return t


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "xpu":
        torch.xpu.synchronize(device)
