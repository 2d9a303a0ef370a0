"""The grid the launcher chooses for each SYCL kernel, as kernel_launches() and doctor report it.

On the OpenCL CPU device SYCL answers the resident-group query with 1 (the backend does not support it), so
the launcher must not ask it there: the device rule gives two work-groups of 256 per compute unit. The C++
tests (cpp_tests/test_launch_grids.cpp, test_spec_decode_grids.cpp) run every schedule over that grid and
over one to seven groups; these check what the Python layer reports, and that a copy over that grid is
right.
"""
import os

import pytest
import torch

from conftest import SYCL_ORIGIN
from xpu_state_copy import _loader, batch_memcpy, pointer_table
from xpu_state_copy.tools import doctor

KERNELS = {"xsc_batch_memcpy", "xsc_copy_states", "xsc_spec_decode"}

pytestmark = pytest.mark.skipif(
    SYCL_ORIGIN is None and os.environ.get("XPU_STATE_COPY_REQUIRE_SYCL") != "1",
    reason="no SYCL backend here, so no SYCL kernel is launched")


@pytest.fixture
def sycl_cpu(monkeypatch):
    monkeypatch.setenv("XPU_STATE_COPY_BACKEND", "sycl")
    return torch.device("cpu")


def test_cpu_device_gets_two_groups_per_compute_unit(sycl_cpu):
    launches = _loader.kernel_launches(sycl_cpu)
    assert {launch["kernel"] for launch in launches} == KERNELS
    for launch in launches:
        assert launch["resident_groups"] is None, f"{launch}: OpenCL does not answer the resident-group query"
        assert launch["hw_threads"] == 0 and launch["compute_units"] >= 1, launch
        assert launch["groups"] == 2 * launch["compute_units"] and launch["groups"] >= 2, launch
        assert launch["local"] == 256 and launch["sub_group"] == 16, launch
    assert [launch["local_bytes"] for launch in launches if launch["kernel"] == "xsc_batch_memcpy"] == [8192]


def test_native_cpu_backend_launches_no_sycl_kernel(monkeypatch):
    monkeypatch.delenv("XPU_STATE_COPY_BACKEND", raising=False)
    assert _loader.kernel_launches("cpu") is None


def test_a_copy_spread_over_every_group_of_the_grid(sycl_cpu):
    """Three times more entries than the grid has sub-groups, each one or two 8 KiB units, at mismatched
    alignments: every sub-group of every group copies; every byte is checked, and the poison around each."""
    groups = _loader.kernel_launches(sycl_cpu)[0]["groups"]
    entries = groups * (256 // 16) * 3 + 1
    source = torch.randint(0, 256, (entries, 16 * 1024 + 16), dtype=torch.uint8)
    destination = torch.full_like(source, 0xA5)
    sizes = torch.randint(8 * 1024, 16 * 1024, (entries,), dtype=torch.int64)
    src = pointer_table([source[i, i % 16:] for i in range(entries)])
    dst = pointer_table([destination[i, (7 * i) % 16:] for i in range(entries)])
    batch_memcpy(src, dst, sizes)
    for i, size in enumerate(sizes.tolist()):
        at = (7 * i) % 16
        assert torch.equal(destination[i, at:at + size], source[i, i % 16:i % 16 + size]), f"entry {i}"
        assert (destination[i, :at] == 0xA5).all() and (destination[i, at + size:] == 0xA5).all(), f"entry {i}"


def test_doctor_reports_the_grid(sycl_cpu):
    probe = doctor.probe(sycl_cpu)
    assert probe["selftest_ok"] and {launch["kernel"] for launch in probe["launches"]} == KERNELS
    groups = probe["launches"][0]["groups"]
    report = {"vllm_target_device": None, "torch": {}, "runtimes": {}, "backends": {}, "vllm": {}, "probe": probe, "problems": []}
    text = doctor._text(report)
    assert f"xsc_batch_memcpy: {groups} work-groups of 256 (from the device: no hardware threads" in text
