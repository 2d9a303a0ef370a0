"""The kernels compiled by Intel's GPU compiler (IGC) for Intel GPUs, on a machine with none.

ocloc, Intel's offline compiler (scripts/get_ocloc.sh fetches it from Debian's packages), compiles the
SPIR-V modules of the sycl-jit kernels for named GPUs: the modules the wheel ships as its device images,
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
# The sub-group sizes each family supports by Intel's documentation (SYCL's info::device::sub_group_sizes on
# a real device; not measured here): the device policy picks the kernels' aligned loads from them, 8 where
# there is no size 8 (a register holds a 16-lane sub-group's 32-bit value). Every target compiles the
# 4-load image (the default, and the policy's pick for dg2 and mtl); those the policy gives 8, that one.
SUB_GROUP_SIZES = {"pvc": [16, 32], "dg2": [8, 16, 32], "mtl": [8, 16, 32], "bmg": [16, 32], "lnl-m": [16, 32],
                   "ptl": [16, 32]}
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


def policy_loads(target):
    return _loader._sycl_module.aligned_loads_for(True, SUB_GROUP_SIZES[target])


# (target, aligned loads of the image): every target with 4, and those the policy gives 8 with 8 too.
BUILDS = [(target, 4) for target in TARGETS] + [(target, 8) for target in TARGETS if target not in ("dg2", "mtl")]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """Every (target, image) of BUILDS compiled from the shipped images, one at a time (so each one's seconds
    are its own), and pvc from a build IGC must refuse."""
    ocloc = ocloc_path()
    if _loader._sycl_module is None:
        pytest.fail(f"the SYCL module is needed to check the device image: {_loader.sycl_status()[1]}")
    work = tmp_path_factory.mktemp("ocloc")
    results = {"spirv_bytes": {}}
    for loads in device_image.IMAGE_NAMES:
        image = device_image.shipped_image(loads)
        assert image is not None, f"this installation ships no device image: {device_image.status()['reason']}"
        (work / str(loads)).mkdir()
        (work / str(loads) / "kernels.spv").write_bytes(image)
        results["spirv_bytes"][loads] = len(image)
    for target, loads in BUILDS:
        results[target, loads] = compile_for(ocloc, work / str(loads) / "kernels.spv", target, work / str(loads))
    spirv = _loader._sycl_module.spirv_from_source([f"-DXSC_SUB_GROUP_SIZE={REFUSED_SUB_GROUP}"])
    (work / "refused").mkdir()
    (work / "refused" / "kernels.spv").write_bytes(spirv)
    results["refused"] = compile_for(ocloc, work / "refused" / "kernels.spv", "pvc", work / "refused")
    print(f"SPIR-V bytes by aligned loads: {results['spirv_bytes']}")
    for name, result in results.items():
        if name != "spirv_bytes":
            rc, _, report, seconds, size = result
            print(f"ocloc {name}: rc {rc}, {seconds:.2f} s, {size} bytes")
            if report:
                print(ze_info.table({str(name): report}))
    return results


def test_the_policy_gives_8_loads_only_to_the_families_with_64_byte_registers():
    assert {target: policy_loads(target) for target in TARGETS} == {
        "pvc": 8, "dg2": 4, "mtl": 4, "bmg": 8, "lnl-m": 8, "ptl": 8}
    assert _loader._sycl_module.aligned_loads_for(False, [4, 8, 16, 32, 64]) == 4  # the OpenCL CPU device
    assert _loader._sycl_module.aligned_loads_for(False, [16]) == 4  # any CPU
    assert {policy_loads(target) for target in TARGETS} <= set(device_image.IMAGE_NAMES)
    assert {(target, policy_loads(target)) for target in TARGETS} <= set(BUILDS)


@pytest.mark.parametrize("target, loads", BUILDS)
def test_igc_compiles_every_kernel_without_spill(compiled, target, loads):
    rc, log, report, _, _ = compiled[target, loads]
    assert rc == 0, f"ocloc failed for {target} ({TARGETS[target]}) with {loads} loads:\n{log[-4000:]}"
    names = {ze_info.short(name) for name in report}
    assert set(KERNELS) <= names, f"{target}: kernels missing from the binary: {set(KERNELS) - names}"
    for name in KERNELS:
        info = report["__sycl_kernel_" + name]
        # The launcher sizes its work-groups, and the schedules their sub-group passes, for 16 lanes.
        what = f"{target} {name} ({loads} loads)"
        assert info.simd == 16, f"{what}: IGC chose SIMD{info.simd}"
        assert info.spill == 0, f"{what}: {info.spill} bytes of spill per thread"
        assert info.scratch == 0, f"{what}: {info.scratch} bytes of scratch per thread"
        slm = info.env.get("slm_size", 0)
        assert slm <= MAX_SLM, f"{what}: {slm} bytes of local memory per work-group"


@pytest.mark.parametrize("target, loads", BUILDS)
def test_the_module_stays_small_and_quick_to_compile(compiled, target, loads):
    rc, log, _, seconds, size = compiled[target, loads]
    assert rc == 0, f"ocloc failed for {target} with {loads} loads:\n{log[-4000:]}"
    spirv = compiled["spirv_bytes"][loads]
    assert spirv <= MAX_SPIRV, f"the SPIR-V image with {loads} aligned loads is {spirv} bytes"
    assert size <= MAX_BINARY, f"{target} ({loads} loads): the native binary is {size} bytes"
    assert seconds <= MAX_SECONDS, f"{target} ({loads} loads): ocloc took {seconds:.1f} s"


def test_a_sub_group_size_igc_refuses_fails_the_check(compiled):
    rc, log, report, _, _ = compiled["refused"]
    assert rc != 0 and report is None, f"ocloc accepted sub-group size {REFUSED_SUB_GROUP} for pvc:\n{log[-2000:]}"
    assert "unsupported required sub group size" in log.lower(), f"ocloc failed, but not for the sub-group size:\n{log}"
