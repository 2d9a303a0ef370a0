"""The kernels of GPUs with 64-byte registers (8 aligned loads per work-item: pvc, Xe2, Xe3) on the OpenCL CPU
device, whose own policy gives it 4. A child process runs the copy tests of the SYCL CPU target whole with the
shipped 8-load image as a user's image (XPU_STATE_COPY_DEVICE_IMAGE=path, first for every device), so every
byte check the 4-load kernels pass, the 8-load ones pass too; it then reports how its kernels were built.
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from xpu_state_copy import _loader, device_image

if _loader._sycl_module is None and _loader._C.built_with_sycl_aot:
    pytest.skip("the kernels were compiled ahead of time by icpx: no device image", allow_module_level=True)
pytestmark = pytest.mark.skipif(
    _loader._sycl_module is None and os.environ.get("XPU_STATE_COPY_REQUIRE_SYCL") != "1",
    reason="no SYCL backend")

HERE = pathlib.Path(__file__).resolve().parent
COPY_TESTS = ["test_batch_memcpy.py", "test_copy_states.py", "test_spec_decode.py", "test_launch_grid.py",
              "test_edge_inputs.py"]
# pytest in-process, then the kernel builds of that process as one line of JSON.
CHILD = ("import json, sys, pytest; code = pytest.main(sys.argv[1:]); from xpu_state_copy import _loader; "
         "print('BUILDS ' + json.dumps(_loader._sycl_module.kernel_builds())); sys.exit(code)")


def test_the_copy_tests_pass_with_8_aligned_loads():
    image = device_image.HERE / device_image.IMAGE_NAMES[8]
    assert image.exists(), f"no {image.name} beside the package: setup.py did not make it"
    env = dict(os.environ, XPU_STATE_COPY_DEVICE_IMAGE=str(image), XPU_STATE_COPY_REQUIRE_SYCL="1")
    run = subprocess.run([sys.executable, "-c", CHILD, "-q", "-p", "no:cacheprovider", "-k", "sycl-cpu",
                          *COPY_TESTS], cwd=HERE, env=env, capture_output=True, text=True, timeout=1800)
    summary = run.stdout.strip().splitlines()
    print("\n".join(summary[-3:]))
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    builds = json.loads(next(line for line in summary if line.startswith("BUILDS "))[len("BUILDS "):])
    assert builds and all(b["input"] == "spirv-image" and b["aligned_loads"] == 0 for b in builds), builds
    assert " passed" in summary[-2] and "failed" not in summary[-2], summary[-2]
