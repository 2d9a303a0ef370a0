"""Every translation unit an XPU build compiles, type-checked here with g++ (no XPU torch, no icpx needed).

An XPU build differs from what this machine builds: torch is an XPU build (XSC_WITH_TORCH_XPU: the XPU
stream, device guard and XPU kernel registrations) and, with icpx, the kernel is compiled ahead of time into
_C (XSC_KERNEL_AOT). The CPU torch wheels ship the c10/xpu headers that code includes, all but one generated
header (c10/xpu/impl/xpu_cmake_macros.h); with a stand-in for it under build/ (never installed), `g++
-fsyntax-only` checks that code against the real c10/xpu and SYCL headers. The source lists come from
setup.py's module_sources(), so a file added there is checked here without further edits.

The .sycl sources icpx compiles (kernel_provider_aot.sycl, and the kernel it includes) are checked too, as
g++ sees them: the host side of a SYCL compilation. The one thing g++ lacks there is what icpx's integration
header declares, that the free-function kernels are kernels (sycl::ext::oneapi::experimental::is_kernel); a
wrapper under build/ adds that for the kernels the file looks up by id. Not checked here
(docs/intel-gpu-runner.md): icpx's device compilation of that file for TORCH_XPU_ARCH_LIST, and linking
against libc10_xpu/libtorch_xpu (the kernel body is compiled on every run of the sycl-jit tests, by SYCL's
run-time compiler).
"""
import concurrent.futures
import functools
import inspect
import os
import pathlib
import re
import runpy
import shutil
import subprocess
import sysconfig

import pytest
import torch
from torch.utils import cpp_extension

ROOT = pathlib.Path(__file__).resolve().parent.parent
CHECK_DIR = ROOT / "build" / "xpu-compile-check"
STAND_IN = ("// Stand-in for the header XPU builds of torch generate; used only to type-check XPU host code.\n"
            "#pragma once\n#define C10_XPU_BUILD_SHARED_LIBS\n")
# The configurations of an XPU build: (name, module_sources() arguments, the module holding the XPU host code).
CONFIGS = [("sycl-jit", dict(aot=False, cuda=False, jit=True, torch_xpu=True), "xpu_state_copy._sycl_jit"),
           ("sycl-aot", dict(aot=True, cuda=False, jit=False, torch_xpu=True), "xpu_state_copy._C")]


@functools.lru_cache(maxsize=None)
def build_script():
    return runpy.run_path(str(ROOT / "setup.py"), run_name="xpu_state_copy_setup_sources")


def units():
    """(config, source, macros) for every translation unit an XPU build compiles."""
    found = []
    for config, arguments, module in CONFIGS:
        sources, macros = build_script()["module_sources"](**arguments)[module]
        found += [(config, source, tuple(macros)) for source in sources]
    return found


def sycl_host_view(source):
    """A .sycl file as g++ can check it: after its includes, the kernels it looks up by id marked as kernels."""
    text = (ROOT / source).read_text()
    lines = text.splitlines()
    last_include = max(i for i, line in enumerate(lines) if line.startswith("#include"))
    kernels = sorted(set(re.findall(r"get_kernel_id<\s*(\w+)\s*>", text)))
    marks = [f"template <> struct sycl::ext::oneapi::experimental::is_kernel<{name}> "
             "{ static constexpr bool value = true; };" for name in kernels]
    wrapper = (lines[:last_include + 1] + ["// As icpx's integration header declares them:"] + marks
               + [f'#line {last_include + 2} "{ROOT / source}"'] + lines[last_include + 1:])
    target = CHECK_DIR / "sycl-host" / (pathlib.Path(source).name + ".cpp")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f'#line 1 "{ROOT / source}"\n' + "\n".join(wrapper) + "\n")
    return target


@functools.lru_cache(maxsize=None)
def cxx_standard():
    """The -std BuildExtension adds for this torch (it forces one when the extension names none)."""
    found = re.search(r"'(c\+\+\d\d)'", inspect.getsource(cpp_extension.BuildExtension))
    return found.group(1) if found else "c++17"


def prepare_headers():
    """The stand-in header and the embedded kernel source, under build/ (no file in the source tree)."""
    stand_in = CHECK_DIR / "include" / "c10" / "xpu" / "impl" / "xpu_cmake_macros.h"
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    stand_in.write_text(STAND_IN)
    build_script()["embed_sources"].write_if_changed(CHECK_DIR / "generated" / "kernel_sources.inc")


def command(source, macros, sycl_prefix):
    script = build_script()
    includes = ([CHECK_DIR / "include", CHECK_DIR / "generated"] + script["INCLUDES"]
                + cpp_extension.include_paths() + [sysconfig.get_paths()["include"],
                                                   sycl_prefix / "include", sycl_prefix / "include" / "sycl"])
    defines = [f"-D{name}" if value is None else f"-D{name}={value}" for name, value in macros]
    defines += ["-DTORCH_EXTENSION_NAME=_C", "-DTORCH_API_INCLUDE_EXTENSION_H",
                f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    if source.endswith(".sycl"):  # its includes are found beside the original
        includes.append((ROOT / source).parent)
        source = sycl_host_view(source)
    return ([os.environ.get("CXX", "g++"), "-fsyntax-only", f"-std={cxx_standard()}"] + script["SYCL_HOST_FLAGS"]
            + defines + [f"-I{path}" for path in includes] + [str(ROOT / source)])


@functools.lru_cache(maxsize=None)
def results():
    """{(config, source): (command, exit code, output)}, checked in parallel (each unit takes seconds)."""
    sycl_prefix = build_script()["sycl_prefix"]()
    if sycl_prefix is None or shutil.which(os.environ.get("CXX", "g++")) is None:
        return None
    prepare_headers()

    # The command lines are made here, not in the threads: inspect.getsource (cxx_standard) parses Python,
    # and CPython 3.11's parser is not safe to run in two threads at once (seen: SystemError).
    commands = {(config, source): command(source, macros, sycl_prefix) for config, source, macros in units()}

    return run_in_parallel(commands)


def run_in_parallel(commands):
    """{key: command line} -> {key: (command line, exit code, output)}, run from the repository root."""
    def run(item):
        key, args = item
        done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
        return key, (args, done.returncode, done.stdout + done.stderr)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(pool.map(run, commands.items()))


def test_the_check_covers_every_xpu_host_unit():
    checked = {(config, source) for config, source, _ in units()}
    assert ("sycl-jit", os.path.join("csrc", "torch", "sycl_ops.cpp")) in checked
    assert ("sycl-aot", os.path.join("csrc", "torch", "module.cpp")) in checked
    assert ("sycl-aot", os.path.join("csrc", "sycl", "kernel_provider_aot.sycl")) in checked
    for config, arguments, module in CONFIGS:
        sources, macros = build_script()["module_sources"](**arguments)[module]
        assert ("XSC_WITH_TORCH_XPU", None) in macros
        assert set(sources) == {s for c, s in checked if c == config}


@pytest.mark.parametrize("config,source,macros", units(), ids=[f"{c}:{pathlib.Path(s).name}" for c, s, _ in units()])
def test_xpu_translation_unit_type_checks(config, source, macros):
    found = results()
    if found is None:
        message = "the XPU compile checks need g++ and intel-sycl-rt's headers (pip install intel-sycl-rt)"
        if os.environ.get("XPU_STATE_COPY_REQUIRE_SYCL") == "1":
            pytest.fail(message)
        pytest.skip(message)
    args, code, output = found[(config, source)]
    assert code == 0, f"g++ rejected {source} as the {config} build compiles it:\n{' '.join(args)}\n{output}"
