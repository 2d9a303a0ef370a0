"""The SPIR-V device images the wheel ships, and when the sycl-jit kernels are built from them.

The wheel's build compiles the embedded SYCL kernel source on the OpenCL CPU device once per count of
aligned loads (16-byte words in flight per work-item, a device policy: aligned_loads_for in
kernel_provider_jit.cpp) and keeps the SPIR-V modules it yields: kernels.spv (4, for dg2, mtl and CPUs) and
kernels-8loads.spv (8, for GPUs with 64-byte registers: pvc, Xe2, Xe3), described by kernels.spv.json.
Those modules are what CI compiles with Intel's GPU compiler (tests/test_device_compile.py), so a device
that builds from one builds bytes IGC has already accepted. Building from an image skips the SYCL front
end, but SYCL's persistent cache keeps nothing built from SPIR-V, while it keeps the source path's binary:
with the cache on (our default) a later process gets its kernels from the cache in under a second from
source, and would pay the device compiler again in every process from the image. So
XPU_STATE_COPY_DEVICE_IMAGE decides:

  auto (default)  the images only where they pay: for every device when SYCL_CACHE_PERSISTENT=0, and
                  otherwise for a device that cannot compile SYCL source (no libsycl-jit);
  on              the images first for every device; off: never;
  a path          that SPIR-V file instead of the shipped ones, first for every device whatever the policy
                  gives it (how the tests run the 8-load kernels on the OpenCL CPU device).

A failed build from an image falls back to the source with one line on stderr. The images are used only
with the kernel source they were made from (its digest is checked). write_device_image.py writes them.
"""
import hashlib
import json
import os
import pathlib
import warnings

HERE = pathlib.Path(__file__).resolve().parent
IMAGE_NAMES = {4: "kernels.spv", 8: "kernels-8loads.spv"}  # by aligned loads
INFO_NAME = "kernels.spv.json"
SPIRV_MAGIC = b"\x03\x02\x23\x07"  # 0x07230203, little-endian
_status = {"mode": "not configured", "image": None, "preferred": False, "reason": "the SYCL module is not loaded"}


def mode():
    value = os.environ.get("XPU_STATE_COPY_DEVICE_IMAGE", "auto").strip()
    return value.lower() if value.lower() in ("auto", "on", "off", "") else value


def shipped_info():
    """kernels.spv.json: source_digest, made_on, sycl_runtime and, by aligned loads, each image's file,
    sha256 and bytes; None when this installation has none."""
    path = HERE / INFO_NAME
    return json.loads(path.read_text()) if path.exists() else None


def shipped_image(loads=4):
    """The shipped SPIR-V with that many aligned loads, or None (a build without the OpenCL CPU device ships
    none)."""
    path = HERE / IMAGE_NAMES[loads]
    return path.read_bytes() if path.exists() else None


def _usable_shipped_images(sycl_module):
    """({loads: bytes}, None) or (None, why not)."""
    info = shipped_info()
    images = {loads: shipped_image(loads) for loads in IMAGE_NAMES}
    if info is None and all(image is None for image in images.values()):
        return None, "this installation ships no device image (it was built without the OpenCL CPU device)"
    missing = [IMAGE_NAMES[loads] for loads, image in images.items() if image is None] + [INFO_NAME] * (info is None)
    if missing:
        return None, f"this installation lacks {', '.join(missing)} of its device images: reinstall xpu_state_copy"
    digest = sycl_module.kernel_source_digest()
    if info.get("source_digest") != digest:
        return None, (f"the shipped device image was made from other kernel sources ({info.get('source_digest')}, "
                      f"this build embeds {digest}): reinstall xpu_state_copy")
    for loads, image in images.items():
        if hashlib.sha256(image).hexdigest() != info.get("images", {}).get(str(loads), {}).get("sha256"):
            return None, (f"the shipped device image {IMAGE_NAMES[loads]} does not match its recorded sha256: "
                          "reinstall xpu_state_copy")
    return images, None


def configure(sycl_module):
    """Hands the images to the kernel provider according to XPU_STATE_COPY_DEVICE_IMAGE; call once, early."""
    global _status
    chosen = mode()
    cache_off = os.environ.get("SYCL_CACHE_PERSISTENT", "1").strip() in ("0", "false", "")
    images, reason, preferred = None, None, chosen == "on" or (chosen == "auto" and cache_off)
    if chosen == "off":
        reason = "XPU_STATE_COPY_DEVICE_IMAGE=off"
    elif chosen in ("auto", "on"):
        images, reason = _usable_shipped_images(sycl_module)
        if images is None and chosen == "on":
            warnings.warn(f"XPU_STATE_COPY_DEVICE_IMAGE=on, but {reason}; the kernels are built from source",
                          RuntimeWarning, stacklevel=2)
    else:  # a path: one image for every device (key 0: how it was built is unknown)
        path, preferred = pathlib.Path(chosen), True
        try:
            images = {0: path.read_bytes()}
        except OSError as error:
            reason = f"XPU_STATE_COPY_DEVICE_IMAGE={chosen!r} cannot be read ({error.strerror})"
            warnings.warn(f"{reason}; the kernels are built from source", RuntimeWarning, stacklevel=2)
    if images is not None:
        sycl_module.set_device_images(images, preferred)
        reason = ("built from the image first, for every device" if preferred else
                  "built from the image only for a device that cannot compile SYCL source (the persistent "
                  "cache keeps the source build)")
    _status = {"mode": chosen or "auto", "image": None if images is None else {k: len(v) for k, v in images.items()},
               "preferred": preferred and images is not None, "reason": reason}


def status():
    """What configure() decided: mode, image ({aligned loads: bytes}, 0 for a user's file; or None),
    preferred, reason."""
    return dict(_status)
