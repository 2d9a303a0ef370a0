"""vLLM's fused spec-decode copies (its Triton kernels, interpreted on CPU) against the plugin's (our ops),
on real releases (CI: 0.23.0, 0.26.0, 0.28.0, 0.33.0 and the newest verified, each on the torch its XPU
build pins; XPU_STATE_COPY_VLLM_VERSIONS overrides), random scenarios, copies of the same pools: pools, accepted-token counts and the context's count
buffer must be byte-identical, and with the plugin active no Triton kernel of mamba_utils may launch along
that path, method by method and through a whole V2 step. The same for compute_aligned_state_indices (0.29+):
vLLM's kernel and our gathers fill byte-identical index buffers. A FlashInfer ReplaySSM context (0.34+)
keeps vLLM's kernels, and the plugin says so."""
import json
import os
import pathlib

import pytest

import vllm_envs
from test_vllm_releases import _release, _unavailable, _versions, expected_fused

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
    assert sorted(result["methods"]) == sorted(expected_fused(version))
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
    version, result = spec_decode
    assert "vllm.v1.worker.mamba_utils.postprocess_mamba_fused_kernel" in result["trapped"]
    # vLLM's own methods do launch a kernel under that trap, so a quiet run of ours means something
    assert result["trap_armed"] == {method: True for method in result["replaced"]}, result["trap_armed"]
    assert result["no_triton"] == {method: True for method in result["replaced"]}, result["no_triton"]
    step = [m for m in ("run_fused_precopy", ALIGNED, "run_fused_postprocess_align") if m in result["replaced"]]
    assert bool(result["whole_step"]) == (_release(version) >= (0, 25))
    for layout, run in result["whole_step"].items():  # precopy, aligned indices, postprocess on one context
        assert "crash" not in run, f"{layout}: {run.get('crash')}"
        assert run["methods"] == step and run["ours_planned"] and run["copied"], (layout, run)
        assert run["same_pools"] and run["same_counts"] and run["same_out"] and run["same_indices"], (layout, run)


def test_replayssm_contexts_run_vllms_own_kernels_and_the_plugin_says_so(spec_decode):
    version, result = spec_decode
    if _release(version) < (0, 34):
        assert result["replayssm"] is None  # no ReplaySSM before 0.34: nothing to hand back
        pytest.skip(f"vLLM {version} has no FlashInfer ReplaySSM")
    runs = result["replayssm"]["runs"]
    assert runs, "no ReplaySSM scenario ran"
    for key, run in runs.items():
        assert "crash" not in run, f"{key}: {run.get('crash')}"
        assert run["fallback_planned"], key  # ours could have run: the stand-in is what sent it to vLLM's
        assert run["fallback_same_as_vllm"], (key, run)
        assert run["flags"] == {"vllm": [True], "fallback": [True], "ours": []}, (key, run)
    for method in ("run_fused_precopy", "run_fused_postprocess_align"):  # else the runs could not tell
        assert any(not run["ours_same_as_vllm"] for key, run in runs.items() if key.startswith(method)), method
    warnings = result["replayssm"]["warnings"]
    assert len(warnings) == 1 and "stay on vLLM's Triton kernels" in warnings[0], warnings
