"""scripts/baseline_tree.py: an older source tree copied under another import name, so that its build loads
beside the current one and the bench times both in one process (scripts/device_cuda.sh, BASELINE=DIR).

Checked here on a copy of this tree's own sources: every name a second build would collide on is renamed
(the Python package and its folder, the op namespace, the extension modules setup.py builds), nothing else
changes, and bad arguments are refused before anything is written. Building the renamed tree and importing it
beside the current build is what scripts/device_cuda.sh's build stage does on a GPU machine.
"""
import importlib.util
import pathlib
import runpy
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("baseline_tree", ROOT / "scripts" / "baseline_tree.py")
baseline_tree = importlib.util.module_from_spec(spec)
spec.loader.exec_module(baseline_tree)

BUILT = shutil.ignore_patterns("*.so", "_build_info.py", "kernels*.spv*", "__pycache__")  # build outputs linked in


@pytest.fixture(scope="module")
def renamed(tmp_path_factory):
    source = tmp_path_factory.mktemp("old")
    for name in ("setup.py", "pyproject.toml", "build_backend.py"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("csrc", "python", "benchmarks"):
        shutil.copytree(ROOT / folder, source / folder, ignore=BUILT)
    (source / "build").mkdir()
    (source / "build" / "stale.txt").write_text("xpu_state_copy")  # an earlier build's output: left behind
    (source / ".git").mkdir()
    (source / ".git" / "HEAD").write_text("xpu_state_copy")
    (source / "blob.bin").write_bytes(b"\xff\xfe xpu_state_copy \x80")  # not text: copied as it is
    destination = tmp_path_factory.mktemp("new") / "tree"
    changed = baseline_tree.rename_tree(source, destination, "xsc_old")
    return source, destination, changed


def test_every_colliding_name_is_renamed(renamed):
    source, destination, changed = renamed
    assert not (destination / "python" / "xpu_state_copy").exists()
    assert (destination / "python" / "xsc_old" / "__init__.py").is_file()
    ops = (destination / "python" / "xsc_old" / "ops.py").read_text()
    assert "torch.ops.xsc_old" in ops and "torch.ops.xpu_state_copy" not in ops
    assert "TORCH_LIBRARY(xsc_old," in (destination / "csrc" / "torch" / "schema.cpp").read_text()
    assert 'name = "xsc-old"' in (destination / "pyproject.toml").read_text()
    modules = runpy.run_path(str(destination / "setup.py"), run_name="baseline_tree_check")["module_sources"](
        aot=False, cuda=True, jit=True, torch_xpu=False)
    assert set(modules) == {"xsc_old._C", "xsc_old._sycl_jit"}
    texts = [p for p in destination.rglob("*") if p.is_file() and p.suffix in (".py", ".cpp", ".h", ".cu", ".toml")]
    assert len(texts) > 50 and not [p for p in texts if "xpu_state_copy" in p.read_text()]
    assert changed >= 20


def test_nothing_else_changes(renamed):
    source, destination, _ = renamed
    for path in (source / "csrc" / "core").rglob("*"):
        if path.is_file():  # the kernels: not a name of the package in them
            assert (destination / path.relative_to(source)).read_bytes() == path.read_bytes(), path
    assert (destination / "blob.bin").read_bytes() == (source / "blob.bin").read_bytes()
    schema = (source / "csrc" / "torch" / "schema.cpp").read_text()
    assert (destination / "csrc" / "torch" / "schema.cpp").read_text() == schema.replace("xpu_state_copy", "xsc_old")
    assert not (destination / "build").exists() and not (destination / ".git").exists()


def test_bad_arguments_are_refused_before_anything_is_written(renamed, tmp_path):
    source, _, _ = renamed
    target = tmp_path / "out"
    for args, message in (((source, target, "xpu_state_copy_old"), "name 'xpu_state_copy_old'"),
                          ((source, target, "not-an-identifier"), "name 'not-an-identifier'"),
                          ((tmp_path, target), "is not a source tree of this project"),
                          ((source, source / "inside"), "lies in the source tree")):
        with pytest.raises(ValueError, match=message):
            baseline_tree.rename_tree(*args)
        assert not target.exists() and not (source / "inside").exists()
