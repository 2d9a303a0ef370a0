"""The installed build's record of how it was made, and what an import under another torch says.

A mismatch is simulated on a copy of the installed package whose _build_info.py names another torch; a load
failure, by swapping that copy's _C for a library that needs a symbol nothing defines (what the loader meets
when torch no longer exports a symbol the build used).
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import torch

import xpu_state_copy
from xpu_state_copy import _build, _loader

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAKE_TORCH = "2.10.0"  # a release no supported build is made for: never the torch under test
assert _build.release(torch.__version__) != FAKE_TORCH


def test_the_installed_package_records_its_build():
    info = xpu_state_copy.build_info()
    package = pathlib.Path(xpu_state_copy.__file__).resolve()
    assert info is not None, f"{package} has no _build_info.py: it was not installed from a setup.py build"
    assert ROOT / "python" not in package.parents, "the suite must run against the installed wheel"
    assert info["torch"] == torch.__version__
    assert info["torch_cxx11_abi"] == bool(torch._C._GLIBCXX_USE_CXX11_ABI)
    assert info["torch_xpu"] == bool(hasattr(torch, "xpu") and torch.xpu._is_compiled())
    backends = info["backends"]
    assert backends["cpu"] is True
    assert backends["sycl-jit"] == (xpu_state_copy.sycl_status()[0] == "sycl-jit")
    assert bool(backends["sycl-aot"]) == _loader._C.built_with_sycl_aot
    assert bool(backends["cuda"]) == _loader._C.built_with_cuda
    if backends["sycl-aot"]:
        assert backends["sycl-aot"]["targets"]
    info["torch"] = "changed by the caller"
    assert xpu_state_copy.build_info()["torch"] == torch.__version__, "build_info() must hand out a copy"


def test_the_same_release_is_no_mismatch():
    assert _build.torch_mismatch() is None
    assert _build.torch_mismatch({"torch": "2.13.0+cpu"}, "2.13.0") is None
    assert _build.torch_mismatch({"torch": "2.13.0"}, "2.13.0+xpu") is None


def test_another_release_is_named_with_both_versions_and_the_fix():
    message = _build.torch_mismatch({"torch": "2.13.0+cpu"}, "2.14.1")
    assert "built for torch 2.13.0+cpu" in message and "imported under torch 2.14.1" in message
    assert "pip install --no-build-isolation --force-reinstall" in message and "built for torch 2.14.1" in message


def test_a_load_failure_other_than_a_missing_symbol_is_left_alone():
    assert _build.explain_load_failure(ImportError("libsycl.so.8: cannot open shared object file"), "m") is None


@pytest.fixture
def package_copy(tmp_path):
    """A copy of the installed package that claims to be built for FAKE_TORCH; (folder for PYTHONPATH, copy)."""
    copy = tmp_path / "xpu_state_copy"
    shutil.copytree(pathlib.Path(xpu_state_copy.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    info = xpu_state_copy.build_info()
    info["torch"] = FAKE_TORCH
    (copy / "_build_info.py").write_text(f"BUILD_INFO = {info!r}\n")
    return tmp_path, copy


def run_python(pythonpath, code, *args):
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=pythonpath, timeout=300)


IMPORT_TWICE = """
import importlib, json, warnings
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    import xpu_state_copy
    importlib.import_module("xpu_state_copy")
    from xpu_state_copy.tools import doctor
print(json.dumps({"file": xpu_state_copy.__file__, "build": xpu_state_copy.build_info()["torch"],
                  "warnings": [(w.category.__name__, str(w.message)) for w in seen]}))
"""


def test_a_mismatched_build_warns_once_naming_both_versions_and_the_fix(package_copy):
    folder, copy = package_copy
    done = run_python(folder, IMPORT_TWICE)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert pathlib.Path(result["file"]).parent == copy and result["build"] == FAKE_TORCH
    mismatches = [message for category, message in result["warnings"] if category == "TorchVersionMismatch"]
    assert len(mismatches) == 1, result["warnings"]
    assert f"built for torch {FAKE_TORCH}" in mismatches[0]
    assert f"imported under torch {torch.__version__}" in mismatches[0]
    assert "rebuild xpu_state_copy against the installed torch" in mismatches[0]


def test_doctor_flags_a_mismatched_build_as_a_problem(package_copy):
    folder, _ = package_copy
    done = run_python(folder, "import sys; from xpu_state_copy.tools.cli import main; sys.exit(main(sys.argv[1:]))",
                      "doctor", "--json", "--skip-vllm-import")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["build"]["recorded"]["torch"] == FAKE_TORCH
    assert any(f"built for torch {FAKE_TORCH}" in problem for problem in report["problems"]), report["problems"]


def replace_with_a_library_missing_a_symbol(folder, extension):
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("g++")
    assert compiler, "a C compiler is needed to make the stand-in library (the build needs one too)"
    stand_in = folder / "needs_a_missing_symbol.c"
    stand_in.write_text("extern void xsc_symbol_torch_no_longer_exports(void);\n"
                        "void xsc_touch(void) { xsc_symbol_torch_no_longer_exports(); }\n")
    subprocess.run([compiler, "-x", "c", "-shared", "-fPIC", "-o", str(extension), str(stand_in)], check=True)


@pytest.mark.parametrize("recorded", [FAKE_TORCH, "same"])
def test_a_missing_symbol_is_explained_instead_of_the_loader_message(package_copy, recorded):
    folder, copy = package_copy
    if recorded == "same":
        info = xpu_state_copy.build_info()
        (copy / "_build_info.py").write_text(f"BUILD_INFO = {info!r}\n")
    (extension,) = copy.glob("_C*.so")
    replace_with_a_library_missing_a_symbol(folder, extension)
    done = run_python(folder, "import xpu_state_copy")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: xpu_state_copy was built for torch"), done.stderr
    built = FAKE_TORCH if recorded == FAKE_TORCH else torch.__version__
    assert f"built for torch {built}" in last and f"torch {torch.__version__}" in last
    assert "rebuild xpu_state_copy against the installed torch" in last
    assert "undefined symbol: xsc_symbol_torch_no_longer_exports" in last  # kept, after the explanation


def test_a_sycl_module_missing_a_symbol_leaves_the_import_and_explains_itself(package_copy):
    folder, copy = package_copy
    found = list(copy.glob("_sycl_jit*.so"))
    if not found:
        pytest.skip("this build has no _sycl_jit module")
    replace_with_a_library_missing_a_symbol(folder, found[0])
    done = run_python(folder, "import warnings; warnings.simplefilter('ignore'); import xpu_state_copy as x; "
                              "print(x.sycl_status()[1])")
    assert done.returncode == 0, done.stderr
    reason = done.stdout.strip().splitlines()[-1]
    assert reason.startswith(f"xpu_state_copy was built for torch {FAKE_TORCH}"), reason
    assert "xpu_state_copy._sycl_jit cannot be loaded" in reason and "rebuild" in reason
