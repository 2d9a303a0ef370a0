"""The SPIR-V device image the wheel ships, and when the sycl-jit kernels are built from it.

The wheel's build compiles the embedded SYCL kernel source once, on the OpenCL CPU device, and keeps the
SPIR-V module it yields (kernels.spv, described by kernels.spv.json). That module is what CI compiles with
Intel's GPU compiler for pvc, dg2 and bmg (tests/test_device_compile.py), so a device that builds from it
builds bytes IGC has already accepted. Building from it skips the SYCL front end, but SYCL's persistent
cache keeps nothing built from SPIR-V, while it keeps the source path's binary: with the cache on (our
default) a later process gets its kernels from the cache in under a second from source, and would pay the
device compiler again in every process from the image. So XPU_STATE_COPY_DEVICE_IMAGE decides:

  auto (default)  the image only where it pays: for every device when SYCL_CACHE_PERSISTENT=0, and
                  otherwise for a device that cannot compile SYCL source (no libsycl-jit);
  on              the image first for every device; off: never;
  a path          that SPIR-V file instead of the shipped one, first for every device.

A failed build from the image falls back to the source with one line on stderr. The image is used only
with the kernel source it was made from (its digest is checked). write_device_image.py writes the image.
"""
import hashlib
import json
import os
import pathlib
import warnings

HERE = pathlib.Path(__file__).resolve().parent
IMAGE_NAME = "kernels.spv"
INFO_NAME = "kernels.spv.json"
SPIRV_MAGIC = b"\x03\x02\x23\x07"  # 0x07230203, little-endian
_status = {"mode": "not configured", "image": None, "preferred": False, "reason": "the SYCL module is not loaded"}


def mode():
    value = os.environ.get("XPU_STATE_COPY_DEVICE_IMAGE", "auto").strip()
    return value.lower() if value.lower() in ("auto", "on", "off", "") else value


def shipped_info():
    path = HERE / INFO_NAME
    return json.loads(path.read_text()) if path.exists() else None


def shipped_image():
    """The shipped SPIR-V, or None when this installation has none (a build without the OpenCL CPU device)."""
    path = HERE / IMAGE_NAME
    return path.read_bytes() if path.exists() else None


def _usable_shipped_image(sycl_module):
    """(bytes, None) or (None, why not)."""
    image, info = shipped_image(), shipped_info()
    if image is None or info is None:
        return None, "this installation ships no device image (it was built without the OpenCL CPU device)"
    digest = sycl_module.kernel_source_digest()
    if info.get("source_digest") != digest:
        return None, (f"the shipped device image was made from other kernel sources ({info.get('source_digest')}, "
                      f"this build embeds {digest}): reinstall xpu_state_copy")
    if hashlib.sha256(image).hexdigest() != info.get("sha256"):
        return None, "the shipped device image does not match its recorded sha256: reinstall xpu_state_copy"
    return image, None


def configure(sycl_module):
    """Hands the image to the kernel provider according to XPU_STATE_COPY_DEVICE_IMAGE; call once, early."""
    global _status
    chosen = mode()
    cache_off = os.environ.get("SYCL_CACHE_PERSISTENT", "1").strip() in ("0", "false", "")
    image, reason, preferred = None, None, chosen == "on" or (chosen == "auto" and cache_off)
    if chosen == "off":
        reason = "XPU_STATE_COPY_DEVICE_IMAGE=off"
    elif chosen in ("auto", "on"):
        image, reason = _usable_shipped_image(sycl_module)
        if image is None and chosen == "on":
            warnings.warn(f"XPU_STATE_COPY_DEVICE_IMAGE=on, but {reason}; the kernels are built from source",
                          RuntimeWarning, stacklevel=2)
    else:  # a path
        path, preferred = pathlib.Path(chosen), True
        try:
            image = path.read_bytes()
        except OSError as error:
            reason = f"XPU_STATE_COPY_DEVICE_IMAGE={chosen!r} cannot be read ({error.strerror})"
            warnings.warn(f"{reason}; the kernels are built from source", RuntimeWarning, stacklevel=2)
    if image is not None:
        sycl_module.set_device_image(image, preferred)
        reason = ("built from the image first, for every device" if preferred else
                  "built from the image only for a device that cannot compile SYCL source (the persistent "
                  "cache keeps the source build)")
    _status = {"mode": chosen or "auto", "image": None if image is None else len(image), "preferred": preferred
               and image is not None, "reason": reason}


def status():
    """What configure() decided: mode, image (bytes or None), preferred, reason."""
    return dict(_status)
