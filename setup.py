"""Builds xpu_state_copy with torch.utils.cpp_extension.

Which modules are built depends on what this machine has:
  _C          always: op schemas, argument checks, native CPU path, pointer tables.
              + the CUDA twin when torch has CUDA and nvcc is found (backend "cuda");
              + the SYCL kernel compiled ahead of time when torch has XPU and icpx is on PATH (SyclExtension,
                backend "sycl-aot"; TORCH_XPU_ARCH_LIST picks the GPU targets).
  _sycl_jit   when intel-sycl-rt's headers and libsycl are found and icpx is not used: host code built by the
              ordinary C++ compiler, the kernel compiled at run time by SYCL's kernel compiler (backend
              "sycl-jit"), for XPU tensors on an XPU torch and for CPU tensors on the OpenCL CPU device.
  _build_info.py  how this build was made (torch version and C++ ABI, backends), read before _C is loaded.
Environment: XPU_STATE_COPY_BUILD_CUDA / XPU_STATE_COPY_BUILD_SYCL = 0 or 1 force a part off or on;
XPU_STATE_COPY_BUILD_SYCL_AOT=0 builds sycl-jit even where icpx is found (=1: sycl-aot or a build error);
SYCL_ROOT names the prefix holding include/sycl and lib/libsycl.so (default: this Python's prefix).
With _sycl_jit, the build also writes the SPIR-V device images (kernels.spv, kernels-8loads.spv,
device_image.py) made on the OpenCL CPU device (intel-opencl-rt); XPU_STATE_COPY_BUILD_DEVICE_IMAGE=0 skips
them, =1 makes their failure fatal.

The source lists live in module_sources() alone: tests/test_xpu_compile.py loads this file (without running
the build below, which sits under __main__) to type-check every translation unit an XPU build compiles.
"""
import importlib.metadata
import os
import pathlib
import pprint
import shutil
import subprocess
import sys

import setuptools
import torch
from setuptools import setup
from setuptools.command.build_py import build_py
from torch.utils import cpp_extension as ce

ROOT = pathlib.Path(__file__).resolve().parent
GENERATED = ROOT / "build" / "generated"
sys.path.insert(0, str(ROOT / "csrc" / "sycl"))
import embed_sources  # noqa: E402  (writes the kernel source into a header for the run-time compiler)


def wanted(name, default):
    value = os.environ.get(f"XPU_STATE_COPY_BUILD_{name}")
    return default if value is None else value not in ("0", "false", "no", "")


def sycl_prefix():
    for prefix in (os.environ.get("SYCL_ROOT"), os.environ.get("CMPLR_ROOT"), sys.prefix):
        if prefix and (pathlib.Path(prefix) / "include" / "sycl" / "sycl.hpp").exists():
            return pathlib.Path(prefix)
    return None


def license_metadata():
    """Apache-2.0 for setup(): an SPDX expression (License-Expression) where setuptools knows them (77 and newer,
    which deprecate the free-text License field), the free text before that."""
    return {"license_expression" if int(setuptools.__version__.split(".")[0]) >= 77 else "license": "Apache-2.0"}


def rel(*parts):
    return str(pathlib.Path(*parts))  # setuptools wants paths relative to setup.py


# No -std here: torch.utils.cpp_extension picks the standard this torch was built with (C++20 on newer
# releases); forcing an older one miscompiles torch's own inline helpers (seen: crashes while formatting errors).
CXX_FLAGS = ["-O3"]
SYCL_HOST_FLAGS = ["-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING", "-Wno-deprecated-declarations"]
CORE = [rel("csrc", "torch", f) for f in ("schema.cpp", "checks.cpp", "state_plan.cpp", "cpu_ops.cpp", "pointer_ops.cpp",
                                                  "module.cpp", "spec_decode.cpp", "spec_decode_cpu.cpp")]
SYCL_OPS = [rel("csrc", "torch", "sycl_ops.cpp"), rel("csrc", "sycl", "launcher.cpp"),
            rel("csrc", "torch", "spec_decode_sycl.cpp")]
INCLUDES = [str(ROOT / "csrc" / d) for d in ("core", "sycl", "torch")] + [str(GENERATED)]


def module_sources(aot, cuda, jit, torch_xpu):
    """{module name: (sources, define_macros)} for one build configuration."""
    modules = {}
    if aot:
        modules["xpu_state_copy._C"] = (CORE + SYCL_OPS + [rel("csrc", "sycl", "kernel_provider_aot.sycl")],
                                        [("XSC_KERNEL_AOT", None), ("XSC_WITH_TORCH_XPU", None)])
    elif cuda:
        modules["xpu_state_copy._C"] = (CORE + [rel("csrc", "cuda", "batch_memcpy_cuda.cu")], [("XSC_WITH_CUDA", None)])
    else:
        modules["xpu_state_copy._C"] = (CORE, [])
    if jit:
        modules["xpu_state_copy._sycl_jit"] = (
            SYCL_OPS + [rel("csrc", "torch", "checks.cpp"), rel("csrc", "torch", "state_plan.cpp"),
                        rel("csrc", "torch", "spec_decode.cpp"), rel("csrc", "torch", "sycl_module.cpp"),
                        rel("csrc", "sycl", "kernel_provider_jit.cpp")],
            [("XSC_WITH_TORCH_XPU", None)] if torch_xpu else [])
    return modules


def build_info(aot, cuda, jit):
    """What _build_info.py records: the import compares `torch` with the torch it runs under."""
    def version(package):
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    backends = {"cpu": True, "sycl-jit": jit,
                "sycl-aot": {"targets": os.environ.get("TORCH_XPU_ARCH_LIST") or "spir64"} if aot else False,
                "cuda": {"cuda": torch.version.cuda, "arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST")} if cuda else False}
    return {"torch": torch.__version__, "torch_cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
            "torch_xpu": TORCH_XPU, "torch_cuda": torch.version.cuda, "backends": backends,
            "python": "%d.%d" % sys.version_info[:2], "sycl_runtime": version("intel-sycl-rt") if jit else None}


TORCH_XPU = hasattr(torch, "xpu") and torch.xpu._is_compiled()


def write_device_image(build_lib):
    """The device images into the built package; without the OpenCL CPU device a warning, unless required."""
    if not wanted("DEVICE_IMAGE", True):
        return
    required = os.environ.get("XPU_STATE_COPY_BUILD_DEVICE_IMAGE") is not None  # set, and not 0
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(build_lib)] + sys.path),
               XPU_STATE_COPY_DEVICE_IMAGE="off")
    run = subprocess.run([sys.executable, "-m", "xpu_state_copy.write_device_image",
                          str(build_lib / "xpu_state_copy")], env=env, capture_output=True, text=True)
    if run.returncode == 0:
        print(f"device image: {run.stdout.strip()}")
        return
    why = (run.stderr.strip().splitlines() or ["no output"])[-1]
    if required:
        sys.exit(f"XPU_STATE_COPY_BUILD_DEVICE_IMAGE=1 but the device image could not be made: {why}")
    print(f"warning: no SPIR-V device image in this build ({why}); install intel-opencl-rt to make one",
          file=sys.stderr)


def main():
    use_aot = wanted("SYCL_AOT", wanted("SYCL", True) and TORCH_XPU and shutil.which("icpx") is not None)
    use_cuda = wanted("CUDA", torch.version.cuda is not None and ce.CUDA_HOME is not None)
    prefix = sycl_prefix()
    use_jit = wanted("SYCL", prefix is not None) and not use_aot
    if use_jit and prefix is None:
        sys.exit("XPU_STATE_COPY_BUILD_SYCL=1 but no SYCL headers were found: pip install intel-sycl-rt, or set SYCL_ROOT")

    ext_modules = []
    for name, (sources, macros) in module_sources(use_aot, use_cuda, use_jit, TORCH_XPU).items():
        if name.endswith("._sycl_jit"):
            embed_sources.write_if_changed(GENERATED / "kernel_sources.inc")
            lib = str(prefix / "lib")
            ext_modules.append(ce.CppExtension(
                name, sources, define_macros=macros,
                include_dirs=INCLUDES + [str(prefix / "include"), str(prefix / "include" / "sycl")],
                library_dirs=[lib], libraries=["sycl"] + (["c10_xpu", "torch_xpu"] if TORCH_XPU else []),
                # The runtime sits in the environment's lib/: found relative to site-packages once installed.
                extra_link_args=[f"-Wl,-rpath,{lib}", "-Wl,-rpath,$ORIGIN/../../.."],
                extra_compile_args={"cxx": CXX_FLAGS + SYCL_HOST_FLAGS}))
        elif use_aot:
            ext_modules.append(ce.SyclExtension(name, sources, include_dirs=INCLUDES, define_macros=macros,
                                                extra_compile_args={"cxx": CXX_FLAGS, "sycl": ["-O3"]}))
        elif use_cuda:
            ext_modules.append(ce.CUDAExtension(
                name, sources, include_dirs=INCLUDES, define_macros=macros,
                extra_compile_args={"cxx": CXX_FLAGS, "nvcc": ["-O3", "--expt-relaxed-constexpr"]}))
        else:
            ext_modules.append(ce.CppExtension(name, sources, include_dirs=INCLUDES, define_macros=macros,
                                               extra_compile_args={"cxx": CXX_FLAGS}))

    info = build_info(use_aot, use_cuda and not use_aot, use_jit)  # _C is one of the two

    class BuildPyWithInfo(build_py):
        """Writes _build_info.py into the build folder (so into the wheel), never into the source tree."""

        def run(self):
            # Python files a build of an older tree left here would go into the wheel as well (modules that
            # were since moved or removed): the package's sources are copied afresh, the compiled modules stay.
            for stale in (pathlib.Path(self.build_lib) / "xpu_state_copy").rglob("*.py"):
                stale.unlink()
            super().run()
            target = pathlib.Path(self.build_lib) / "xpu_state_copy" / "_build_info.py"
            target.write_text('"""How this copy of xpu_state_copy was built (written by setup.py)."""\n'
                              f"BUILD_INFO = {pprint.pformat(info, sort_dicts=True)}\n")

    class BuildExtWithDeviceImage(ce.BuildExtension):
        """After the modules, the SPIR-V device images (device_image.py): the built package, run in a child
        process, compiles its embedded kernel source on the OpenCL CPU device and writes kernels*.spv."""

        def __init__(self, dist):
            super().__init__(dist)
            # Set here, not through BuildExtension.with_options(use_ninja=...): that passes use_ninja on to the
            # command's constructor, and setuptools 77.0.x's build_ext derives from distutils' Command, whose
            # constructor takes no keywords (TypeError while pip reads the metadata). Without ninja,
            # BuildExtension's own default would warn and fall back; asking for it only when found keeps quiet.
            self.use_ninja = shutil.which("ninja") is not None

        def run(self):
            super().run()
            if use_jit and not self.inplace:
                write_device_image(pathlib.Path(self.build_lib))

    # One build folder per torch and configuration: setuptools packs everything under its build folder into the
    # wheel, so a module built earlier for another configuration (another torch, or with SYCL) must not be there.
    config = "-".join([torch.__version__.replace("+", "_")] + [name for name, on in
                      (("aot", use_aot), ("cuda", use_cuda), ("jit", use_jit)) if on])
    setup(
        options={"build": {"build_base": str(pathlib.Path("build") / f"torch-{config}")}},
        packages=["xpu_state_copy", "xpu_state_copy.vllm", "xpu_state_copy.sglang", "xpu_state_copy.tools",
                  "xpu_state_copy.benchmarks"],
        package_dir={"xpu_state_copy": "python/xpu_state_copy", "xpu_state_copy.benchmarks": "benchmarks"},
        # The bench's CUDA peers, compiled by the bench itself when it runs on a CUDA device (not part of _C).
        package_data={"xpu_state_copy.benchmarks": ["*.cu"]},
        ext_modules=ext_modules,
        cmdclass={"build_ext": BuildExtWithDeviceImage, "build_py": BuildPyWithInfo},
        **license_metadata(),
    )


if __name__ == "__main__":  # setuptools' build backend runs this file as __main__
    main()
