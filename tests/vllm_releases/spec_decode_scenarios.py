"""vLLM's fused spec-decode copies against ours, in one vLLM environment on CPU (Triton in interpreter mode).

    python spec_decode_scenarios.py <seeds>

With the plugin active, every MambaSpecDecodeGPUContext.run_fused_* the release has runs twice per random
scenario on copies of the same pools: vLLM's own method (kept by the plugin as .vllm_original, its Triton
kernel) and the plugin's (our op); compute_aligned_state_indices (0.29+) likewise on the same block tables
(aligned_index_scenarios). On 0.34+ a context given a stand-in FlashInfer ReplaySSM must run vLLM's kernels
(replayssm_scenarios). Then vLLM's Triton kernels are made to raise and ours runs once more, method by method
and through a whole step, so a kernel launch along that path fails the run (no_triton_scenarios). Prints one
JSON object on its last line.
"""
import copy
import json
import os
import pathlib
import random
import sys
import traceback
import types

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/: the reference's scenarios
from spec_decode_reference import random_postprocess, random_precopy  # noqa: E402

import aligned_index_scenarios as aligned  # noqa: E402
import no_triton_scenarios as no_triton  # noqa: E402
import replayssm_scenarios as replayssm  # noqa: E402
from scenarios import create_arguments  # noqa: E402

FUSED = ("run_fused_postprocess", "run_fused_precopy", "run_fused_postprocess_align")


def release(mu):
    import vllm

    return tuple(int(p) for p in vllm.__version__.split(".")[:2])


def engine_forward_context(first, layers):
    """The forward context as an engine binds it: each Mamba layer's states a tuple, and attention layers whose
    kv_cache is one tensor (vLLM reads only its Mamba groups' layers; the plugin reads them all), the first
    laid over the first pool's memory with its block stride, as vLLM's hybrid allocator shares tensors."""
    over_first = first.as_strided((first.shape[0], 1), (first.stride(0), 1))
    forward_context = {"model.layers.0.self_attn": types.SimpleNamespace(kv_cache=over_first)}
    forward_context.update((n, types.SimpleNamespace(kv_cache=(v[0], v[1]))) for n, v in layers.items())
    forward_context["model.layers.9.self_attn"] = types.SimpleNamespace(kv_cache=torch.zeros(first.shape[0], 2, 4, 8))
    return forward_context


def build_context(mu, s, layout):
    """A context of vLLM's own, initialised from a forward context holding s's pools."""
    from vllm.model_executor.layers.mamba import mamba_utils as layer_utils
    from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec, MambaSpec

    groups = max(s.groups) + 1
    layers = {}
    for j in range(0, len(s.states), 2):
        layers[f"model.layers.{j // 2}.linear_attn"] = (s.states[j], s.states[j + 1], s.groups[j])
    specs = []
    for g in range(groups):
        names = [n for n, v in layers.items() if v[2] == g]
        conv, temporal = layers[names[0]][:2]
        spec_blocks = {"num_speculative_blocks": s.spec_blocks} if getattr(s, "spec_blocks", 0) else {}
        spec = MambaSpec(block_size=s.block_size, shapes=(tuple(conv.shape[1:]), tuple(temporal.shape[1:])),
                         dtypes=(conv.dtype, temporal.dtype), mamba_cache_mode="align", **spec_blocks)
        specs.append(KVCacheGroupSpec(layer_names=names, kv_cache_spec=spec))
    config = KVCacheConfig(num_blocks=s.states[0].shape[0], kv_cache_tensors=[], kv_cache_groups=specs)
    forward_context = engine_forward_context(s.states[0], layers)
    funcs = (layer_utils.get_conv_copy_spec, layer_utils.get_temporal_copy_spec)
    if hasattr(layer_utils, "MambaStateCopyFuncsByType"):
        funcs = {specs[0].kv_cache_spec.mamba_type: funcs}
    create = mu.MambaSpecDecodeGPUContext.create
    context = create(max_num_reqs=s.block_tables[0].shape[0], kv_cache_config=config, device=torch.device("cpu"),
                     **create_arguments(create, forward_context, funcs))
    if hasattr(mu, "is_conv_state_dim_first"):
        mu.is_conv_state_dim_first = lambda: layout == "ds"
    # As the engine hands them over: views of the persistent tables' first row (block_table.gpu[:num_reqs] of
    # the first step, one request), of which vLLM keeps the address and row stride and reads every row.
    first_rows = lambda tables: [t[:1] for t in tables]  # noqa: E731
    second = getattr(s, "aligned_tables", None)
    context.initialize_from_forward_context(config, forward_context, funcs, first_rows(s.block_tables),
                                            *([first_rows(second)] if second is not None else []))
    return context


def count_buffer(context):
    """The context's accepted-count buffer (num_accepted_tokens_out; num_accepted_tokens_snapshot from 0.34)."""
    fields = type(context).__annotations__
    return getattr(context, next(n for n in ("num_accepted_tokens_out", "num_accepted_tokens_snapshot") if n in fields))


def clone_scenario(s):
    c = copy.copy(s)
    c.states = [t.clone() for t in s.states]  # padded pools are not used here: plain clones keep the bytes
    return c


def digest(s):
    return [t.numpy().tobytes().hex() for t in s.states]


def args_for(method, s, counts_slot_count):
    if method == "run_fused_postprocess":
        return (s.num_rows, s.num_accepted, s.state_idx, s.num_scheduled, s.num_computed, s.num_draft)
    if method == "run_fused_postprocess_align":
        return (s.num_rows, s.num_accepted, s.state_idx, s.num_computed, s.idx_mapping)
    return (s.num_rows, s.state_idx if s.dst_cols is None else s.dst_cols, s.src_cols, s.token_bias, s.idx_mapping)


def order_free_align_rows(s, rng):
    """0.25-0.27's run_fused_postprocess_align reads each request's accepted count and resets it to 1 in the
    same launch (where the running state stays in its block), so with more than one accepted token the
    other states of that request see the count before or after the reset, as the programs happen to run.
    Such a row is given another source column instead (a cross-block move: no reset, the same result in
    any order), or dropped from the batch where no column fits; every other row stays as drawn."""
    columns = s.block_tables[0].shape[1]
    mapping = s.idx_mapping.tolist()
    for row, slot in enumerate(mapping):
        accepted = int(s.num_accepted[slot]) if slot >= 0 else 1
        fresh = int(s.num_computed[slot]) if slot >= 0 else 0
        running = fresh - accepted + 1
        aligned = fresh // s.block_size * s.block_size
        dst = aligned // s.block_size - 1
        if accepted <= 1 or aligned < running or dst != int(s.state_idx[slot]):
            continue  # no reset, or one that writes the count it read: order is moot
        bias = aligned - running
        sources = [c for c in range(columns - bias) if c != dst]  # a whole state reads column src + bias
        if sources:
            s.state_idx[slot] = rng.choice(sources)
        else:
            mapping[row] = -1
    s.idx_mapping = torch.tensor(mapping, dtype=torch.int32)


def scenario_for(method, rng, layout, mu):
    if method == "run_fused_postprocess":
        return random_postprocess(rng, layout, precomputed=False, mapped=False, max_requests=12)
    if method == "run_fused_postprocess_align":
        s = random_postprocess(rng, layout, precomputed=True, mapped=True, max_requests=12)
        s.block_table_by_slot = False
        if release(mu) < (0, 28):
            order_free_align_rows(s, rng)
        return s
    s = random_precopy(rng, layout, mapped=True, max_requests=12)
    s.state_idx = s.dst_cols
    if release(mu) < (0, 27):
        s.idx_mapping = s.idx_mapping  # 0.25-0.26 always map
    return s


def compare(mu, method, seed, layout):
    rng = random.Random(seed)
    s = scenario_for(method, rng, layout, mu)
    theirs, ours = clone_scenario(s), clone_scenario(s)
    ctx_theirs, ctx_ours = build_context(mu, theirs, layout), build_context(mu, ours, layout)
    cls = mu.MambaSpecDecodeGPUContext
    counts_theirs, counts_ours = s.num_accepted.clone(), s.num_accepted.clone()
    a = list(args_for(method, theirs, None))
    b = list(args_for(method, ours, None))
    if method != "run_fused_precopy":
        a[1], b[1] = counts_theirs, counts_ours
    for context in (ctx_theirs, ctx_ours):  # vLLM 0.34 reads the snapshot it leaves there: ours must match
        count_buffer(context).fill_(-7)
    getattr(cls, method).vllm_original(ctx_theirs, *a)
    getattr(cls, method)(ctx_ours, *b)
    before = digest(s)
    return {"same_pools": digest(theirs) == digest(ours),
            "copied": digest(theirs) != before,
            "same_counts": torch.equal(counts_theirs, counts_ours),
            "same_out": torch.equal(count_buffer(ctx_theirs), count_buffer(ctx_ours)),
            "ours_planned": ctx_ours.__dict__.get("_xsc_plan") is not None}


def main():
    seeds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    os.environ["XPU_STATE_COPY_VLLM"] = "1"
    import vllm.v1.utils
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    import vllm.v1.worker.mamba_utils as mu

    vllm.v1.utils.PIN_MEMORY = False
    cls = mu.MambaSpecDecodeGPUContext
    methods = [m for m in FUSED + (aligned.METHOD,) if m in cls.__dict__]
    layouts = ["sd", "ds"] if hasattr(mu, "is_conv_state_dim_first") else ["sd"]
    results = {"methods": methods,
               "replaced": [m for m in methods if hasattr(getattr(cls, m), "vllm_original")],
               "runs": {}}
    for method in (m for m in results["replaced"] if m in FUSED):
        for layout in layouts:
            for seed in range(seeds):
                key = f"{method}/{layout}/{seed}"
                try:
                    results["runs"][key] = compare(mu, method, seed, layout)
                except Exception:
                    results["runs"][key] = {"crash": traceback.format_exc()[-3000:]}
    if aligned.METHOD in results["replaced"]:
        for seed in range(6 * seeds):  # cheap: one small kernel per scenario
            key = f"{aligned.METHOD}/sd/{seed}"
            try:
                results["runs"][key] = aligned.compare_aligned(mu, seed, build_context)
            except Exception:
                results["runs"][key] = {"crash": traceback.format_exc()[-3000:]}
    this = sys.modules[__name__]  # the helpers above, for the two modules below
    results["replayssm"] = replayssm.fallback_runs(mu, seeds, layouts, this) if replayssm.applies(mu) else None
    results.update(no_triton.runs(mu, results["replaced"], layouts, this))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
