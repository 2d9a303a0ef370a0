"""Builds xpu_state_copy with torch.utils.cpp_extension.

Which modules are built depends on what this machine has:
  _C          always: op schemas, argument checks, native CPU path, pointer tables.
              + the CUDA twin when torch has CUDA and nvcc is found (backend "cuda");
              + the SYCL kernel compiled ahead of time when torch has XPU and icpx is on PATH (SyclExtension,
                backend "sycl-aot"; TORCH_XPU_ARCH_LIST picks the GPU targets).
  _sycl_jit   when intel-sycl-rt's headers and libsycl are found and icpx is not used: host code built by the
              ordinary C++ compiler, the kernel compiled at run time by SYCL's kernel compiler (backend
              "sycl-jit"), for XPU tensors on an XPU torch and for CPU tensors on the OpenCL CPU device.
Environment: XPU_STATE_COPY_BUILD_CUDA / XPU_STATE_COPY_BUILD_SYCL = 0 or 1 force a part off or on;
SYCL_ROOT names the prefix holding include/sycl and lib/libsycl.so (default: this Python's prefix).
"""
import os
import pathlib
import shutil
import sys

import torch
from setuptools import setup
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


def rel(*parts):
    return str(pathlib.Path(*parts))  # setuptools wants paths relative to setup.py


TORCH_XPU = hasattr(torch, "xpu") and torch.xpu._is_compiled()
USE_AOT = wanted("SYCL", True) and TORCH_XPU and shutil.which("icpx") is not None
USE_CUDA = wanted("CUDA", torch.version.cuda is not None and ce.CUDA_HOME is not None)
PREFIX = sycl_prefix()
USE_JIT = wanted("SYCL", PREFIX is not None) and not USE_AOT
if USE_JIT and PREFIX is None:
    sys.exit("XPU_STATE_COPY_BUILD_SYCL=1 but no SYCL headers were found: pip install intel-sycl-rt, or set SYCL_ROOT")

# No -std here: torch.utils.cpp_extension picks the standard this torch was built with (C++20 on newer
# releases); forcing an older one miscompiles torch's own inline helpers (seen: crashes while formatting errors).
CXX_FLAGS = ["-O3"]
SYCL_HOST_FLAGS = ["-DSYCL_DISABLE_FSYCL_SYCLHPP_WARNING", "-Wno-deprecated-declarations"]
CORE = [rel("csrc", "torch", f) for f in ("schema.cpp", "checks.cpp", "state_plan.cpp", "cpu_ops.cpp", "pointer_ops.cpp",
                                                  "module.cpp", "spec_decode.cpp", "spec_decode_cpu.cpp")]
SYCL_OPS = [rel("csrc", "torch", "sycl_ops.cpp"), rel("csrc", "sycl", "launcher.cpp"),
            rel("csrc", "torch", "spec_decode_sycl.cpp")]
INCLUDES = [str(ROOT / "csrc" / d) for d in ("core", "sycl", "torch")] + [str(GENERATED)]

ext_modules = []
if USE_AOT:
    ext_modules.append(ce.SyclExtension(
        "xpu_state_copy._C",
        CORE + SYCL_OPS + [rel("csrc", "sycl", "kernel_provider_aot.sycl")],
        include_dirs=INCLUDES,
        define_macros=[("XSC_KERNEL_AOT", None), ("XSC_WITH_TORCH_XPU", None)],
        extra_compile_args={"cxx": CXX_FLAGS, "sycl": ["-O3"]},
    ))
elif USE_CUDA:
    ext_modules.append(ce.CUDAExtension(
        "xpu_state_copy._C",
        CORE + [rel("csrc", "cuda", "batch_memcpy_cuda.cu")],
        include_dirs=INCLUDES,
        define_macros=[("XSC_WITH_CUDA", None)],
        extra_compile_args={"cxx": CXX_FLAGS, "nvcc": ["-O3", "--expt-relaxed-constexpr"]},
    ))
else:
    ext_modules.append(ce.CppExtension("xpu_state_copy._C", CORE, include_dirs=INCLUDES,
                                       extra_compile_args={"cxx": CXX_FLAGS}))

if USE_JIT:
    embed_sources.write_if_changed(GENERATED / "kernel_sources.inc")
    lib = str(PREFIX / "lib")
    ext_modules.append(ce.CppExtension(
        "xpu_state_copy._sycl_jit",
        SYCL_OPS + [rel("csrc", "torch", "checks.cpp"), rel("csrc", "torch", "state_plan.cpp"),
                    rel("csrc", "torch", "spec_decode.cpp"),
                    rel("csrc", "torch", "sycl_module.cpp"),
                    rel("csrc", "sycl", "kernel_provider_jit.cpp")],
        include_dirs=INCLUDES + [str(PREFIX / "include"), str(PREFIX / "include" / "sycl")],
        library_dirs=[lib],
        libraries=["sycl"] + (["c10_xpu", "torch_xpu"] if TORCH_XPU else []),
        define_macros=[("XSC_WITH_TORCH_XPU", None)] if TORCH_XPU else [],
        # The runtime sits in the environment's lib/: found relative to site-packages once installed.
        extra_link_args=[f"-Wl,-rpath,{lib}", "-Wl,-rpath,$ORIGIN/../../.."],
        extra_compile_args={"cxx": CXX_FLAGS + SYCL_HOST_FLAGS},
    ))

# One build folder per torch and configuration: setuptools packs everything under its build folder into the
# wheel, so a module built earlier for another configuration (another torch, or with SYCL) must not be there.
CONFIG = "-".join([torch.__version__.replace("+", "_")] + [name for name, on in
                  (("aot", USE_AOT), ("cuda", USE_CUDA), ("jit", USE_JIT)) if on])

setup(
    options={"build": {"build_base": str(pathlib.Path("build") / f"torch-{CONFIG}")}},
    packages=["xpu_state_copy", "xpu_state_copy.benchmarks"],
    package_dir={"xpu_state_copy": "python/xpu_state_copy", "xpu_state_copy.benchmarks": "benchmarks"},
    ext_modules=ext_modules,
    cmdclass={"build_ext": ce.BuildExtension.with_options(use_ninja=shutil.which("ninja") is not None)},
)
