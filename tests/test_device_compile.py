"""The kernels compiled by Intel's GPU compiler (IGC) for Intel GPUs, on a machine with none.

ocloc, Intel's offline compiler (scripts/get_ocloc.sh fetches it from Debian's packages), compiles the
SPIR-V module of the sycl-jit kernels for named GPUs: the same module the wheel ships as its device image,
and the one a Level Zero driver hands IGC when it compiles the kernels on a real GPU. This checks, for every
kernel and every Intel GPU family vLLM serves on XPU, what the kernels were written for: SIMD16, no spill and
no scratch (the driver allocates scratch for every hardware thread of the device), at most 16 KiB of local
memory per work-group, a small module (SPIR-V <= 64 KB, each native binary <= 256 KB) that IGC compiles in
at most 3 s per target; and, with a sub-group size IGC refuses built in, that the check fails.
Compiled is not run: nothing here executes on an Intel GPU.

XPU_STATE_COPY_OCLOC names the ocloc to use (default: what scripts/get_ocloc.sh left in .cache/ocloc);
XPU_STATE_COPY_REQUIRE_OCLOC=1 (scripts/test.sh sets it) turns a missing ocloc into a failure.
"""
import os
import pathlib
import subprocess
import time

import pytest

import ze_info
from xpu_state_copy import _loader, device_image

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_OCLOC = ROOT / ".cache" / "ocloc" / "bin" / "ocloc"
REQUIRE = os.environ.get("XPU_STATE_COPY_REQUIRE_OCLOC") == "1"

# One target per GPU family vLLM serves on XPU: Xe-HPC (Data Center GPU Max), Xe-HPG (Arc A, Flex), Xe-LPG
# (Meteor Lake: 64 KiB of local memory per work-group, as dg2), Xe2 (Arc B, Lunar Lake), Xe3 (Panther Lake).
TARGETS = {"pvc": "Xe-HPC", "dg2": "Xe-HPG", "mtl": "Xe-LPG", "bmg": "Xe2-HPG", "lnl-m": "Xe2-LPG",
           "ptl": "Xe3-LPG"}
KERNELS = ["xsc_batch_memcpy", "xsc_copy_states", "xsc_spec_decode"]
MAX_SLM = 16 * 1024
MAX_SPIRV = 64 * 1000
MAX_BINARY = 256 * 1000
MAX_SECONDS = 3.0
REFUSED_SUB_GROUP = 64  # the OpenCL CPU device builds it; no Intel GPU has it


if _loader._sycl_module is None and _loader._C.built_with_sycl_aot:
    pytest.skip("the kernels were compiled ahead of time by icpx: no SPIR-V image to compile",
                allow_module_level=True)


def ocloc_path():
    path = pathlib.Path(os.environ.get("XPU_STATE_COPY_OCLOC") or DEFAULT_OCLOC)
    if path.exists():
        return path
    message = f"no ocloc at {path}: run scripts/get_ocloc.sh (Intel's offline compiler from Debian's packages)"
    if REQUIRE:
        pytest.fail(f"XPU_STATE_COPY_REQUIRE_OCLOC=1 but {message}")
    pytest.skip(message)


def compile_for(ocloc, spirv_path, target, out_dir):
    """(return code, ocloc's output, {kernel: KernelInfo} or None, seconds, binary bytes)."""
    output = out_dir / target
    start = time.monotonic()
    run = subprocess.run([str(ocloc), "compile", "-file", str(spirv_path), "-spirv_input", "-device", target,
                          "-output", str(output), "-output_no_suffix"],
                         capture_output=True, text=True, timeout=1500)
    seconds = time.monotonic() - start
    binary = out_dir / f"{target}.bin"
    report = ze_info.kernels(binary.read_bytes()) if run.returncode == 0 and binary.exists() else None
    return run.returncode, run.stdout + run.stderr, report, seconds, binary.stat().st_size if report else 0


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Every target compiled from the shipped image, one at a time (so each one's seconds are its own), and
    pvc from a build IGC must refuse."""
    ocloc = ocloc_path()
    if _loader._sycl_module is None:
        pytest.fail(f"the SYCL module is needed to check the device image: {_loader.sycl_status()[1]}")
    work = tmp_path_factory.mktemp("ocloc")
    image = device_image.shipped_image()
    assert image is not None, f"this installation ships no device image: {device_image.status()['reason']}"
    (work / "kernels.spv").write_bytes(image)
    results = {target: compile_for(ocloc, work / "kernels.spv", target, work) for target in TARGETS}
    spirv = _loader._sycl_module.spirv_from_source([f"-DXSC_SUB_GROUP_SIZE={REFUSED_SUB_GROUP}"])
    (work / "refused").mkdir()
    (work / "refused" / "kernels.spv").write_bytes(spirv)
    results["refused"] = compile_for(ocloc, work / "refused" / "kernels.spv", "pvc", work / "refused")
    results["spirv_bytes"] = len(image)
    for name, result in results.items():
        if name in TARGETS or name == "refused":
            rc, _, report, seconds, size = result
            print(f"ocloc {name}: rc {rc}, {seconds:.2f} s, {size} bytes")
            if report:
                print(ze_info.table({name: report}))
    return results


@pytest.mark.parametrize("target", list(TARGETS))
def test_igc_compiles_every_kernel_without_spill(compiled, target):
    rc, log, report, _, _ = compiled[target]
    assert rc == 0, f"ocloc failed for {target} ({TARGETS[target]}):\n{log[-4000:]}"
    names = {ze_info.short(name) for name in report}
    assert set(KERNELS) <= names, f"{target}: kernels missing from the binary: {set(KERNELS) - names}"
    for name in KERNELS:
        info = report["__sycl_kernel_" + name]
        # The launcher sizes its work-groups, and the schedules their sub-group passes, for 16 lanes.
        assert info.simd == 16, f"{target} {name}: IGC chose SIMD{info.simd}"
        assert info.spill == 0, f"{target} {name}: {info.spill} bytes of spill per thread"
        assert info.scratch == 0, f"{target} {name}: {info.scratch} bytes of scratch per thread"
        slm = info.env.get("slm_size", 0)
        assert slm <= MAX_SLM, f"{target} {name}: {slm} bytes of local memory per work-group"


@pytest.mark.parametrize("target", list(TARGETS))
def test_the_module_stays_small_and_quick_to_compile(compiled, target):
    rc, log, _, seconds, size = compiled[target]
    assert rc == 0, f"ocloc failed for {target}:\n{log[-4000:]}"
    assert compiled["spirv_bytes"] <= MAX_SPIRV, f"the SPIR-V image is {compiled['spirv_bytes']} bytes"
    assert size <= MAX_BINARY, f"{target}: the native binary is {size} bytes"
    assert seconds <= MAX_SECONDS, f"{target}: ocloc took {seconds:.1f} s"


def test_a_sub_group_size_igc_refuses_fails_the_check(compiled):
    rc, log, report, _, _ = compiled["refused"]
    assert rc != 0 and report is None, f"ocloc accepted sub-group size {REFUSED_SUB_GROUP} for pvc:\n{log[-2000:]}"
    assert "unsupported required sub group size" in log.lower(), f"ocloc failed, but not for the sub-group size:\n{log}"
