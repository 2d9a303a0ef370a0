"""Writes the SPIR-V device images of this build (kernels.spv, kernels-8loads.spv and kernels.spv.json, see
device_image.py).

    python -m xpu_state_copy.write_device_image DIR    (what setup.py runs on a freshly built package)

A module of its own, not part of device_image: it needs the loaded SYCL module (_loader), and _loader needs
device_image to configure that module, so the writer sits above both.
"""
import hashlib
import json
import pathlib
import sys

from . import _build, _loader
from .device_image import IMAGE_NAMES, INFO_NAME


def write(directory):
    """Builds the embedded source on the OpenCL CPU device once per count of aligned loads and writes the
    images and kernels.spv.json."""
    if _loader._sycl_module is None:
        raise SystemExit(f"no device image: {_loader.sycl_status()[1]}")
    module = _loader._sycl_module
    directory = pathlib.Path(directory)
    images = {}
    for loads, name in IMAGE_NAMES.items():
        spirv = module.spirv_from_source([f"-DXSC_ALIGNED_LOADS={loads}"])  # checked to be one SPIR-V module
        (directory / name).write_bytes(spirv)
        images[str(loads)] = {"file": name, "sha256": hashlib.sha256(spirv).hexdigest(), "bytes": len(spirv)}
    info = {"source_digest": module.kernel_source_digest(), "images": images, "made_on": module.cpu_device_name(),
            "sycl_runtime": (_build.build_info() or {}).get("sycl_runtime")}
    (directory / INFO_NAME).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return info


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m xpu_state_copy.write_device_image DIR")
    print(json.dumps(write(sys.argv[1])))
