"""Installing released engine wheels (vLLM, SGLang) for the release tests, without touching this interpreter.

Each set of requirements goes into a directory of its own with ``pip install --no-deps --target``; the
directory is renamed into place only once complete, so an interrupted install is redone, not trusted. The
release tests put such directories on PYTHONPATH of a subprocess only, so torch stays the one under test.
"""
import contextlib
import fcntl
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]

INSTALL_TIMEOUT_S = 900


class EnvUnavailable(Exception):
    """A release cannot be installed here (no network, no wheel for this platform, ...); the reason says which."""


def run_pip(args, timeout=INSTALL_TIMEOUT_S):
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EnvUnavailable(f"pip {' '.join(args[:3])} ... took over {timeout}s") from None
    if done.returncode != 0:
        raise EnvUnavailable(f"pip {' '.join(args[:3])} ... failed: {(done.stderr or done.stdout)[-600:]}")
    return done.stdout


def install_once(target, requirements):
    """`requirements` installed into the directory `target` (a pathlib.Path), unless already complete there
    with the same requirements (a changed pin list is installed afresh, not trusted)."""
    done = target / ".complete"
    if done.exists() and done.read_text().split() == list(requirements):
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    run_pip(["install", "-q", "--no-deps", "--no-compile", "--target", str(partial), *requirements])
    (partial / ".complete").write_text(" ".join(requirements) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def cache_root(variable, folder) -> pathlib.Path:
    """$variable, else $XDG_CACHE_HOME/xpu-state-copy/folder, else .cache/folder in the repository."""
    if os.environ.get(variable):
        return pathlib.Path(os.environ[variable])
    if os.environ.get("XDG_CACHE_HOME"):
        return pathlib.Path(os.environ["XDG_CACHE_HOME"]) / "xpu-state-copy" / folder
    return REPO / ".cache" / folder


@contextlib.contextmanager
def install_lock(root):
    """Held while installing into the cache under `root`: concurrent test runs share it. Not reentrant."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def install_release(root, dependencies, name, requirements):
    """(the release's directory, the shared dependencies' directory) under root, installed if not yet:
    `requirements` into root/name, `dependencies` into a directory named by their digest."""
    with install_lock(root):
        digest = hashlib.sha256(" ".join(dependencies).encode()).hexdigest()[:12]
        deps = install_once(root / f"deps-{digest}", dependencies)
        return install_once(root / name, requirements), deps
