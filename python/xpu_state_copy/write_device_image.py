"""Writes the SPIR-V device image of this build (kernels.spv and kernels.spv.json, see device_image.py).

    python -m xpu_state_copy.write_device_image DIR    (what setup.py runs on a freshly built package)

A module of its own, not part of device_image: it needs the loaded SYCL module (_loader), and _loader needs
device_image to configure that module, so the writer sits above both.
"""
import hashlib
import json
import pathlib
import sys

from . import _build, _loader
from .device_image import IMAGE_NAME, INFO_NAME


def write(directory):
    """Builds the embedded source on the OpenCL CPU device and writes kernels.spv and kernels.spv.json."""
    if _loader._sycl_module is None:
        raise SystemExit(f"no device image: {_loader.sycl_status()[1]}")
    module = _loader._sycl_module
    spirv = module.spirv_from_source()  # checked to be one SPIR-V module
    directory = pathlib.Path(directory)
    (directory / IMAGE_NAME).write_bytes(spirv)
    info = {"source_digest": module.kernel_source_digest(), "sha256": hashlib.sha256(spirv).hexdigest(),
            "bytes": len(spirv), "made_on": module.cpu_device_name(),
            "sycl_runtime": (_build.build_info() or {}).get("sycl_runtime")}
    (directory / INFO_NAME).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return info


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m xpu_state_copy.write_device_image DIR")
    print(json.dumps(write(sys.argv[1])))
