"""vLLM's own Mamba state-copy tests, taken from each release's source distribution, run on CPU.

A release's sdist ships its ``tests/``; its wheel does not. For each release in SDISTS this fetches the sdist
once from the indexes pip is configured with (checked against its sha256), extracts only the test files below
(and requirements/xpu.txt) into the release-environment cache (next to the installed wheel, see vllm_envs),
applies the CPU edits below, and runs them with pytest in the
release's environment, Triton in interpreter mode, the plugin switched on or off. vLLM's own conftest.py files
are not used (they import most of vLLM's serving stack); upstream_plugin_loader loads the plugins instead,
through ``vllm.plugins.load_general_plugins()``, as vLLM's workers do.

The CPU edits are the whole difference from upstream: they lift the CUDA-availability skips and put the
tensors on the CPU. No assertion is touched. An edited file that still names a CUDA device or skip fails the
run (LEFT_FOR_CUDA), so a release that spells those differently is noticed, not silently skipped.
"""
import json
import pathlib
import re
import shutil
import sys
import tarfile
import tempfile

import pip_index
import release_envs
import vllm_envs
from release_envs import EnvUnavailable

HERE = pathlib.Path(__file__).resolve().parent
# The releases CI installs (test_vllm_releases._chosen) that ship these tests: their sdists' sha256, from the
# index's project page. The sdist is fetched through the indexes pip is configured with (pip_index).
SDISTS = {
    "0.23.0": "760269db3d9611e12e524681df1bca0977d5d2f5fcb4481cc34d33efc4ae7ff5",
    "0.26.0": "23e9fa19d7e20ce7dcc1c074d41503e2116d23f19e688f5d5ea91b741f958502",
    "0.28.0": "ac96dd0ec5be9c13f2aa4bfb50498c4727110406f6e4980b58a4097e4d18634a",
    "0.33.0": "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112",
    "0.34.0": "fcad848b246a9d8652b47e6425af92334dc02492f9802720f54e27b823cf0113",
}
# vLLM's Mamba copy tests (each release has those of them it has) and the files they import from tests/.
TEST_FILES = ("tests/v1/worker/test_mamba_utils.py", "tests/kernels/mamba/test_precopy_mamba_align.py",
              "tests/kernels/mamba/test_memcpy_u64_tiled.py")
SUPPORT_FILES = ("tests/__init__.py", "tests/v1/__init__.py", "tests/v1/worker/__init__.py",
                 "tests/kernels/__init__.py", "tests/kernels/mamba/__init__.py",
                 "tests/v1/worker/test_utils.py")  # 0.34's test_mamba_utils imports a mixer from it
# Kept as shipped, for tests/vllm_releases/test_xpu_torch_pins.py: the torch the release's XPU build pins.
XPU_REQUIREMENTS = "requirements/xpu.txt"
# The reviewed CPU edits, applied to every test file above: (literal, replacement). Skip conditions become
# False (the kernels run under TRITON_INTERPRET=1 on CPU tensors), devices become the CPU, and the device
# synchronisation, which raises without an accelerator, becomes the CPU's no-op one.
CPU_EDITS = (
    ("not torch.cuda.is_available()", "False"),
    ("not (current_platform.is_cuda_alike() or current_platform.is_xpu())", "False"),
    ("not current_platform.is_cuda_alike()", "False"),
    ("not current_platform.is_cuda()", "False"),
    ('torch.device("cuda:0")', 'torch.device("cpu")'),
    ('torch.device("cuda")', 'torch.device("cpu")'),
    ("torch.device(current_platform.device_type)", 'torch.device("cpu")'),
    ("torch.accelerator.synchronize()", "torch.cpu.synchronize()"),
)
LEFT_FOR_CUDA = re.compile(r"torch\.cuda\.|is_cuda|\"cuda|'cuda|torch\.accelerator\.|current_platform\.device_type")
RUN_TIMEOUT_S = 1500


def apply_cpu_edits(text, name):
    """`text` with CPU_EDITS applied; raises if a CUDA device or skip is left that no edit covers."""
    for literal, replacement in CPU_EDITS:
        text = text.replace(literal, replacement)
    left = sorted({m.group(0) for m in LEFT_FOR_CUDA.finditer(text)})
    if left:
        raise AssertionError(f"{name} still names CUDA after the CPU edits ({', '.join(left)}): review "
                             "upstream_tests.CPU_EDITS for this release")
    return text


def tests_root(version) -> pathlib.Path:
    """A directory holding the release's tests/ subset, CPU-edited; fetched and extracted on first use."""
    if version not in SDISTS:
        raise EnvUnavailable(f"no pinned sdist for vLLM {version} (upstream_tests.SDISTS)")
    root = vllm_envs.cache_root()
    target = root / f"vllm-{version}-upstream-tests"
    if (target / ".complete").exists() and (target / XPU_REQUIREMENTS).exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    filename = f"vllm-{version}.tar.gz"
    with tempfile.TemporaryDirectory(dir=root) as scratch:
        archive = pathlib.Path(scratch) / filename
        pip_index.download("vllm", filename, SDISTS[version], archive)
        with tarfile.open(archive) as sdist:
            for path in TEST_FILES + SUPPORT_FILES + (XPU_REQUIREMENTS,):
                try:
                    member = sdist.getmember(f"vllm-{version}/{path}")
                except KeyError:
                    continue  # a test file this release does not have yet
                text = sdist.extractfile(member).read().decode()
                if path in TEST_FILES:  # (xpu.txt is read as shipped)
                    text = apply_cpu_edits(text, f"vLLM {version} {path}")
                (partial / path).parent.mkdir(parents=True, exist_ok=True)
                (partial / path).write_text(text)
    (partial / ".complete").write_text(f"{filename} sha256 {SDISTS[version]}\n")
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def run_upstream_tests(version, plugin):
    """Run the release's Mamba copy tests with the plugin "on" or "off"; returns upstream_plugin_loader's
    report: {"outcomes": {test id: outcome}, "patched": [...], "served": {our op: calls}}."""
    with release_envs.install_lock(vllm_envs.cache_root()):
        root = tests_root(version)
    files = [path for path in TEST_FILES if (root / path).exists()]
    with tempfile.TemporaryDirectory() as scratch:
        report = pathlib.Path(scratch) / "report.json"
        env = {"XPU_STATE_COPY_VLLM": "1" if plugin == "on" else "0", "XPU_STATE_COPY_UPSTREAM_REPORT": str(report)}
        done = vllm_envs.run_in_vllm(
            version, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest", "-p", "upstream_plugin_loader",
                      "-o", "addopts=", "--rootdir", str(root), *files],
            extra_env=env, timeout=RUN_TIMEOUT_S, cwd=root, extra_path=[HERE])
        if not report.exists():
            raise AssertionError(f"vLLM {version}'s tests (plugin {plugin}) stopped before reporting, exit "
                                 f"{done.returncode}:\n{(done.stdout + done.stderr)[-4000:]}")
        result = json.loads(report.read_text())
    result["log"] = (done.stdout + done.stderr)[-6000:]
    return result


if __name__ == "__main__":  # python upstream_tests.py 0.33.0 on|off: the counts, as the test sees them
    outcome = run_upstream_tests(sys.argv[1], sys.argv[2])
    counts = {}
    for state in outcome["outcomes"].values():
        counts[state] = counts.get(state, 0) + 1
    not_passed = {test: state for test, state in outcome["outcomes"].items() if state != "passed"}
    print(outcome["log"] if not_passed else "")
    print(json.dumps({"counts": counts, "not_passed": not_passed, "patched": outcome["patched"],
                      "served": outcome["served"]}))
