"""XPU_STATE_COPY_REQUIRE_XPU=1 (the Intel GPU workflow sets it): a missing XPU fails the run, never skips."""
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import HAS_XPU

TESTS = pathlib.Path(__file__).resolve().parent
PROBE = '''
import importlib.util, pathlib
spec = importlib.util.spec_from_file_location("suite_conftest", {conftest!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_runtest_makereport = suite.pytest_runtest_makereport  # the hook under test, without its session check
'''
SKIPS = '''
import pytest

@pytest.mark.skipif(True, reason="no XPU device")
def test_needs_an_xpu():
    pass

@pytest.mark.skip(reason="some other reason")
def test_skipped_for_another_reason():
    pass
'''


def run_pytest(folder, *args, require="1"):
    env = {**os.environ, "XPU_STATE_COPY_REQUIRE_XPU": require}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rEs", "-p", "no:cacheprovider", *args],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_the_switch_turns_a_no_xpu_skip_into_a_failure_and_leaves_other_skips(tmp_path):
    (tmp_path / "conftest.py").write_text(PROBE.format(conftest=str(TESTS / "conftest.py")))
    (tmp_path / "test_skips.py").write_text(SKIPS)
    done = run_pytest(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 skipped, 1 error" in done.stdout  # the skip is decided while setting the test up: an error there
    assert "XPU_STATE_COPY_REQUIRE_XPU=1 turns this skip into a failure: no XPU device" in done.stdout
    unset = run_pytest(tmp_path, require="0")
    assert unset.returncode == 0 and "2 skipped" in unset.stdout, unset.stdout + unset.stderr


@pytest.mark.skipif(HAS_XPU, reason="this machine has an XPU: the session check has nothing to catch")
def test_the_switch_fails_a_run_on_a_machine_without_an_xpu():
    done = run_pytest(TESTS, "test_pointers.py")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "XPU_STATE_COPY_REQUIRE_XPU=1 but torch" in done.stdout + done.stderr
    assert "sees no XPU device" in done.stdout + done.stderr
