"""The CUDA twin's translation units, compiled here with nvcc against the CPU torch's headers.

The CUDA twin is how the kernel is measured on NVIDIA GPUs, but the machines that run this suite build
without it (their torch has no CUDA), so a change to csrc/core that only nvcc rejects (a device-only
function called from a launcher, as once happened) would first show on a GPU machine. The CPU torch wheels
ship the c10/cuda headers but one generated header (c10/cuda/impl/cuda_cmake_macros.h): with a stand-in for
it under build/ (never installed), nvcc compiles the .cu unit for the H200 the twin is measured on (sm_90),
host and device code, and g++ type-checks the C++ units as a CUDA build compiles them (XSC_WITH_CUDA). The
source list comes from setup.py's module_sources(). Not checked: linking against libc10_cuda and
libtorch_cuda, and running (scripts/device_cuda.sh builds, tests and benches on a GPU).
"""
import functools
import os
import pathlib
import re
import shutil
import subprocess
import sysconfig

import pytest
import torch
from torch.utils import cpp_extension

from test_xpu_compile import ROOT, build_script, cxx_standard, run_in_parallel

CHECK_DIR = ROOT / "build" / "cuda-compile-check"
STAND_IN = ("// Stand-in for the header CUDA builds of torch generate; used only to compile-check CUDA code.\n"
            "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
ARCH = "sm_90"


def units():
    """(source, macros) for every translation unit of a CUDA build's _C."""
    sources, macros = build_script()["module_sources"](aot=False, cuda=True, jit=False, torch_xpu=False)[
        "xpu_state_copy._C"]
    return [(source, tuple(macros)) for source in sources]


@functools.lru_cache(maxsize=None)
def toolkit_includes(nvcc):
    """The CUDA toolkit's header folders, as nvcc itself passes them (nvcc may be a wrapper script anywhere)."""
    dry = subprocess.run([nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
                         capture_output=True, text=True)
    found = re.findall(r'INCLUDES="-I([^"]+)"', dry.stdout + dry.stderr)
    return [pathlib.Path(path) for path in found]


def command(source, macros, nvcc):
    # A CUDA build puts the toolkit's headers on every unit's path, C++ ones too (state_plan.cpp asks the CUDA
    # runtime whether a stream is being captured).
    includes = ([CHECK_DIR / "include"] + build_script()["INCLUDES"] + cpp_extension.include_paths()
                + toolkit_includes(nvcc) + [sysconfig.get_paths()["include"]])
    flags = [f"-std={cxx_standard()}", "-DTORCH_EXTENSION_NAME=_C", "-DTORCH_API_INCLUDE_EXTENSION_H",
             f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    flags += [f"-D{name}" if value is None else f"-D{name}={value}" for name, value in macros]
    flags += [f"-I{path}" for path in includes]
    if source.endswith(".cu"):
        target = CHECK_DIR / (pathlib.Path(source).name + ".o")
        return [nvcc, f"-arch={ARCH}", "--expt-relaxed-constexpr", "-c", "-o", str(target)] + flags + [source]
    return [os.environ.get("CXX", "g++"), "-fsyntax-only"] + flags + [source]


@functools.lru_cache(maxsize=None)
def results():
    """{source: (command, exit code, output)}, compiled in parallel; None without nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None and cpp_extension.CUDA_HOME:
        candidate = pathlib.Path(cpp_extension.CUDA_HOME, "bin", "nvcc")
        nvcc = str(candidate) if candidate.exists() else None
    if nvcc is None or shutil.which(os.environ.get("CXX", "g++")) is None:
        return None
    stand_in = CHECK_DIR / "include" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    stand_in.write_text(STAND_IN)
    return run_in_parallel({source: command(source, macros, nvcc) for source, macros in units()})


def test_the_check_covers_the_cuda_twin():
    sources = {source for source, _ in units()}
    assert os.path.join("csrc", "cuda", "batch_memcpy_cuda.cu") in sources
    assert os.path.join("csrc", "torch", "module.cpp") in sources
    assert all(("XSC_WITH_CUDA", None) in macros for _, macros in units())


@pytest.mark.parametrize("source,macros", units(), ids=[pathlib.Path(s).name for s, _ in units()])
def test_cuda_translation_unit_compiles(source, macros):
    found = results()
    if found is None:
        pytest.skip("the CUDA compile check needs nvcc (the CUDA toolkit) and g++")
    args, code, output = found[source]
    tail = "\n".join(line for line in output.splitlines() if "error" in line)[-3000:] or output[-3000:]
    assert code == 0, f"{' '.join(map(str, args))}\n{tail}"
