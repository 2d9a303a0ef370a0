"""The SPIR-V device image the wheel ships (device_image.py): present, made from this build's kernel source,
used when XPU_STATE_COPY_DEVICE_IMAGE asks for it, and left for the source, with one log line, when it
fails to build. The copies run on the SYCL CPU device in child processes, each with its own SYCL runtime
(a process builds a device's kernels once).
"""
import hashlib
import importlib.util
import os
import pathlib
import struct
import warnings

import pytest

from xpu_state_copy import _loader, device_image

if _loader._sycl_module is None and _loader._C.built_with_sycl_aot:
    pytest.skip("the kernels were compiled ahead of time by icpx: no device image", allow_module_level=True)
pytestmark = pytest.mark.skipif(
    _loader._sycl_module is None and os.environ.get("XPU_STATE_COPY_REQUIRE_SYCL") != "1",
    reason="no SYCL backend")

# The child process that benchmarks/first_copy.py times: from its start to its first verified copy, with
# how its kernels were built.
_spec = importlib.util.spec_from_file_location(
    "first_copy", pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "first_copy.py")
first_copy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(first_copy)
run_child = first_copy.run_child


@pytest.mark.parametrize("loads", list(device_image.IMAGE_NAMES))
def test_the_wheel_ships_the_images_of_its_own_kernel_source(loads):
    image, info = device_image.shipped_image(loads), device_image.shipped_info()
    name = device_image.IMAGE_NAMES[loads]
    assert image is not None and info is not None, f"no {name} beside the package: setup.py did not make it"
    assert image[:4] == device_image.SPIRV_MAGIC
    assert info["source_digest"] == _loader._sycl_module.kernel_source_digest()
    recorded = info["images"][str(loads)]
    assert recorded == {"file": name, "sha256": hashlib.sha256(image).hexdigest(), "bytes": len(image)}
    others = [device_image.shipped_image(n) for n in device_image.IMAGE_NAMES if n != loads]
    assert others and image not in others, "two images hold the same kernels"


def test_with_the_cache_off_the_kernels_come_from_the_image():
    result, _ = run_child(XPU_STATE_COPY_DEVICE_IMAGE="auto", SYCL_CACHE_PERSISTENT="0")
    print(f"process start to first copy, from the image, cache off: {result['seconds']:.1f} s")
    assert result["correct"]
    assert [(b["input"], b["aligned_loads"]) for b in result["builds"]] == [("spirv-image", 4)], result["builds"]
    assert result["status"]["preferred"]


def test_one_process_fills_the_persistent_cache(tmp_path):
    """The second process on a cache the first one filled loads the first one's device binary: the cache
    then holds one binary. (Its SPIR-V differed once, so the second process stored a binary of its own:
    docs/device-compile.md.)"""
    env = dict(XPU_STATE_COPY_DEVICE_IMAGE="off", SYCL_CACHE_PERSISTENT="1", SYCL_CACHE_DIR=str(tmp_path))
    results = [run_child(**env)[0] for _ in range(2)]
    assert all(r["correct"] and [b["input"] for b in r["builds"]] == ["sycl-source"] for r in results), results
    binaries = [p for p in tmp_path.rglob("*.bin") if "ext_kernel_compiler" not in p.parts]
    assert len(binaries) == 1, [str(p.relative_to(tmp_path)) for p in binaries]


# A valid SPIR-V module with no kernels (capabilities Addresses and Kernel, memory model Physical64
# OpenCL): the device accepts it and the kernel lookup fails, which the provider must survive. A malformed
# module is no test of that: the OpenCL CPU device's SPIR-V reader exits the process (seen: exit code 10),
# which is why the shipped image is checked against its sha256 and source digest before it is used.
EMPTY_MODULE = struct.pack("<12I", 0x07230203, 0x00010000, 0, 1, 0, (2 << 16) | 17, 4, (2 << 16) | 17, 6,
                           (3 << 16) | 14, 2, 2)


def test_an_image_without_the_kernels_falls_back_to_the_source_with_one_line(tmp_path):
    path = tmp_path / "foreign.spv"
    path.write_bytes(EMPTY_MODULE)
    result, stderr = run_child(XPU_STATE_COPY_DEVICE_IMAGE=str(path))
    assert result["correct"]
    assert [b["input"] for b in result["builds"]] == ["sycl-source"], result["builds"]
    assert "device image failed to build" in result["builds"][0]["note"]
    lines = [line for line in stderr.splitlines() if "device image failed to build" in line]
    assert len(lines) == 1, stderr[-3000:]


class FakeModule:
    def __init__(self, digest):
        self.digest, self.image = digest, None

    def kernel_source_digest(self):
        return self.digest

    def set_device_images(self, images, preferred):
        self.image = ({loads: len(spirv) for loads, spirv in images.items()}, preferred)


@pytest.mark.parametrize("mode, cache, preferred", [("auto", "1", False), ("auto", "0", True), ("on", "1", True)])
def test_the_policy_hands_over_the_image(monkeypatch, mode, cache, preferred):
    monkeypatch.setenv("XPU_STATE_COPY_DEVICE_IMAGE", mode)
    monkeypatch.setenv("SYCL_CACHE_PERSISTENT", cache)
    module = FakeModule(device_image.shipped_info()["source_digest"])
    device_image.configure(module)
    sizes = {int(loads): image["bytes"] for loads, image in device_image.shipped_info()["images"].items()}
    assert sizes.keys() == {4, 8} and module.image == (sizes, preferred)


def test_off_and_a_foreign_image_hand_over_nothing(monkeypatch):
    monkeypatch.setenv("XPU_STATE_COPY_DEVICE_IMAGE", "off")
    module = FakeModule(device_image.shipped_info()["source_digest"])
    device_image.configure(module)
    assert module.image is None and "off" in device_image.status()["reason"]
    monkeypatch.setenv("XPU_STATE_COPY_DEVICE_IMAGE", "on")
    module = FakeModule("0123456789abcdef")
    with pytest.warns(RuntimeWarning, match="other kernel sources"):
        device_image.configure(module)
    assert module.image is None
    monkeypatch.setenv("XPU_STATE_COPY_DEVICE_IMAGE", "/nonexistent/kernels.spv")
    with pytest.warns(RuntimeWarning, match="cannot be read"):
        device_image.configure(module)
    assert module.image is None


@pytest.mark.parametrize("change, words", [(lambda image: image + b"\0\0\0\0", "does not match its recorded sha256"),
                                           (lambda image: None, "lacks kernels-8loads.spv")])
def test_a_changed_or_missing_image_hands_over_nothing(monkeypatch, change, words):
    shipped = device_image.shipped_image
    monkeypatch.setattr(device_image, "shipped_image",
                        lambda loads=4: change(shipped(loads)) if loads == 8 else shipped(loads))
    monkeypatch.setenv("XPU_STATE_COPY_DEVICE_IMAGE", "on")
    module = FakeModule(device_image.shipped_info()["source_digest"])
    with pytest.warns(RuntimeWarning, match=words):
        device_image.configure(module)
    assert module.image is None


def teardown_module():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        device_image.configure(_loader._sycl_module)  # as this process's environment says
