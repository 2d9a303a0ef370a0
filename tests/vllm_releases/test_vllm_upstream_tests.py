"""vLLM's own Mamba state-copy tests, from each release's source distribution, with our plugin on.

upstream_tests fetches the tests of every release CI installs (test_vllm_releases._versions) that has them,
applies the reviewed CPU edits and runs them on CPU under Triton's interpreter, with the plugin loaded
through vllm.plugins.load_general_plugins() and switched on. Every one of vLLM's tests must pass: the plugin
may serve a call or hand it to vLLM's own code, never change an answer or raise where vLLM would not.
XPU_STATE_COPY_UPSTREAM_OFF=1 also runs them with the plugin off and requires the same tests to pass there
(the control; CI leaves it out to save its time, docs/spec-decode.md records its counts).
"""
import collections
import os

import pytest

import upstream_tests
from test_vllm_releases import _unavailable, _versions

WITH_CONTROL = os.environ.get("XPU_STATE_COPY_UPSTREAM_OFF") == "1"


def _with_tests():
    return [v for v in _versions() if v in upstream_tests.SDISTS] or [
        pytest.param(None, marks=pytest.mark.skip(reason="no release chosen has pinned upstream tests"))]


def _run(version, plugin):
    try:
        return upstream_tests.run_upstream_tests(version, plugin)
    except upstream_tests.EnvUnavailable as why:
        _unavailable(f"vLLM {version}'s tests: {why}")


def _summary(result):
    counts = collections.Counter(result["outcomes"].values())
    failed = [test for test, outcome in result["outcomes"].items() if outcome != "passed"]
    return dict(counts), failed


@pytest.fixture(scope="module", params=_with_tests())
def with_plugin(request):
    return request.param, _run(request.param, "on")


def test_vllms_own_tests_all_pass_with_the_plugin_on(with_plugin):
    version, result = with_plugin
    counts, failed = _summary(result)
    assert result["outcomes"], f"no test of vLLM {version} ran:\n{result['log']}"
    assert not failed, f"vLLM {version}'s tests {counts}, not passed: {failed}\n{result['log']}"


def test_the_plugin_was_in_place_while_they_ran(with_plugin):
    version, result = with_plugin
    assert "MambaSpecDecodeGPUContext.initialize_from_forward_context" in result["patched"], result["patched"]


@pytest.mark.skipif(not WITH_CONTROL, reason="the plugin-off control runs with XPU_STATE_COPY_UPSTREAM_OFF=1")
def test_the_same_tests_pass_with_the_plugin_off(with_plugin):
    version, on = with_plugin
    off = _run(version, "off")
    assert off["patched"] == []
    assert set(off["outcomes"]) == set(on["outcomes"])
    counts, failed = _summary(off)
    assert not failed, f"vLLM {version}'s tests, plugin off {counts}, not passed: {failed}\n{off['log']}"


def test_the_cpu_edits_lift_cuda_skips_and_devices_and_refuse_what_they_do_not_cover():
    upstream = ('@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")\n'
                'def test_x():\n    device = torch.device("cuda")\n    torch.accelerator.synchronize()\n')
    edited = upstream_tests.apply_cpu_edits(upstream, "x")
    assert edited == ('@pytest.mark.skipif(False, reason="CUDA required")\n'
                      'def test_x():\n    device = torch.device("cpu")\n    torch.cpu.synchronize()\n')
    for unknown in ('torch.device("cuda:1")', "torch.cuda.synchronize()", "current_platform.is_cuda_alike() and x"):
        with pytest.raises(AssertionError, match="still names CUDA after the CPU edits"):
            upstream_tests.apply_cpu_edits(upstream + unknown, "x")
