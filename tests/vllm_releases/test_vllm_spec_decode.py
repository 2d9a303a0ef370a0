"""vLLM's fused spec-decode copies (its Triton kernels, interpreted on CPU) against the plugin's (our ops),
on real releases (CI: 0.23.0, 0.28.0 and the newest verified; XPU_STATE_COPY_VLLM_VERSIONS overrides), random
scenarios, copies of the same pools: pools and accepted-token counts must be byte-identical, and with the
plugin active no Triton kernel of mamba_utils may launch along that path. The same for
compute_aligned_state_indices (0.29+): vLLM's kernel and our gathers fill byte-identical index buffers."""
import json
import os
import pathlib

import pytest

import vllm_envs
from test_vllm_releases import _release, _unavailable, _versions

SCRIPT = pathlib.Path(__file__).with_name("spec_decode_scenarios.py")
SEEDS = int(os.environ.get("XPU_STATE_COPY_SPEC_DECODE_SEEDS", "4"))
ALIGNED = "compute_aligned_state_indices"


@pytest.fixture(scope="module", params=_versions())
def spec_decode(request):
    try:
        done = vllm_envs.run_in_vllm(request.param, [str(SCRIPT), str(SEEDS)], timeout=900)
    except vllm_envs.EnvUnavailable as why:
        _unavailable(f"vLLM {request.param}: {why}")
    assert done.returncode == 0, f"spec-decode scenarios failed on vLLM {request.param}:\n{done.stderr[-3000:]}"
    return request.param, json.loads(done.stdout.strip().splitlines()[-1])


def test_every_fused_copy_of_the_release_is_replaced(spec_decode):
    version, result = spec_decode
    expected = ["run_fused_postprocess"]
    if _release(version) >= (0, 25):
        expected += ["run_fused_precopy", "run_fused_postprocess_align"]
    if _release(version) >= (0, 29):
        expected.append(ALIGNED)
    assert sorted(result["methods"]) == sorted(expected)
    assert result["replaced"] == result["methods"]


def test_ours_is_byte_identical_to_vllms_kernel(spec_decode):
    version, result = spec_decode
    assert result["runs"], "no scenario ran"
    copied = {method: 0 for method in result["replaced"]}
    for key, run in result["runs"].items():
        assert "crash" not in run, f"{key}: {run.get('crash')}"
        assert run["ours_planned"], key
        if key.startswith(ALIGNED):
            assert run["same_buffer"] and run["same_view"] and run["is_view"], (key, run)
        else:
            assert run["same_pools"] and run["same_counts"] and run["same_out"], (key, run)
        copied[key.split("/")[0]] += run["copied"]
    assert all(copied.values()), f"no scenario of some method copied anything: {copied}"
    aligned = [run for key, run in result["runs"].items() if key.startswith(ALIGNED)]
    if ALIGNED in result["replaced"]:  # the empty batch and several groups came up too
        assert any(run["num_reqs"] == 0 for run in aligned) and any(run["groups"] > 1 for run in aligned)


def test_no_triton_kernel_launches_with_the_plugin(spec_decode):
    _, result = spec_decode
    assert result["no_triton"] and all(v is True for v in result["no_triton"].values()), result["no_triton"]
    assert sorted(result["no_triton"]) == sorted(result["replaced"])
    if ALIGNED in result["replaced"]:  # vLLM's own launch does raise under that trap
        assert result["aligned_trap_armed"] is True
