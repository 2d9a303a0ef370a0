"""With the plugin active, no Triton kernel of vLLM's may launch along the spec-decode path it serves.

Imported by spec_decode_scenarios.py, which passes itself in (`sd`) for its scenario helpers. Every Triton
kernel of vLLM's mamba_utils (and, from 0.34, of replayssm_utils) is replaced by one that raises when
launched. vLLM's own methods are first shown to hit that trap (else a quiet run would prove nothing); then
  * each method the plugin replaced runs once on its own, its context's initialisation included;
  * one whole step of the V2 runner runs on one context, in the runner's order: run_fused_precopy,
    compute_aligned_state_indices, run_fused_postprocess_align (those the release has). Its pools, accepted
    counts, count buffer and aligned indices must equal those of the same step run, before the trap was set,
    by vLLM's own methods.
"""
import random
import sys
import traceback

import torch

import aligned_index_scenarios as aligned
from spec_decode_reference import random_precopy

STEP = ("run_fused_precopy", aligned.METHOD, "run_fused_postprocess_align")
MODULES = ("vllm.v1.worker.mamba_utils", "vllm.v1.worker.replayssm_utils")
STEP_SEED = 5


class _Raiser:
    def __init__(self, name):
        self.name = name

    def __getitem__(self, grid):
        raise AssertionError(f"vLLM's Triton {self.name} was launched although the plugin serves this path")


def _is_triton_kernel(value):
    return hasattr(value, "fn") and hasattr(type(value), "__getitem__")  # a JITFunction (or its interpreter)


def make_kernels_raise():
    """Replaces every Triton kernel of MODULES; returns their names."""
    trapped = []
    for name in MODULES:
        module = sys.modules.get(name)
        for attribute, value in list(vars(module).items()) if module is not None else ():
            if _is_triton_kernel(value):
                setattr(module, attribute, _Raiser(attribute))
                trapped.append(f"{name}.{attribute}")
    return trapped


def _context_and_args(mu, method, layout, sd):
    """One fixed scenario of `method`: the context it runs on and the arguments it is called with."""
    s = sd.scenario_for(method, random.Random(99), layout, mu)
    return sd.build_context(mu, s, layout), sd.args_for(method, s, None)


def _vllms_launch_is_trapped(mu, method, layout, sd):
    if method == aligned.METHOD:
        return aligned.trap_catches_vllms_launch(mu, sd.build_context)
    context, args = _context_and_args(mu, method, layout, sd)
    try:
        getattr(mu.MambaSpecDecodeGPUContext, method).vllm_original(context, *args)
    except AssertionError as error:
        return "was launched although the plugin serves this path" in str(error)
    return False


def _method_alone(mu, method, layout, sd):
    if method == aligned.METHOD:
        return aligned.no_triton_aligned(mu, sd.build_context)
    context, args = _context_and_args(mu, method, layout, sd)
    getattr(mu.MambaSpecDecodeGPUContext, method)(context, *args)
    return True


def _step_scenario(mu, layout, sd):
    """Inputs for both copies on one set of pools: the precopy's columns, and the postprocess's counts and
    running columns. Those are drawn separately (vLLM's runner passes one state_idx to both) so that each
    stays inside the block tables, where vLLM's kernels, which check no bounds, are defined."""
    rng = random.Random(STEP_SEED)
    s = random_precopy(rng, layout, mapped=True, max_requests=12)
    if sd.release(mu) < (0, 28):
        sd.order_free_align_rows(s, rng)  # see there: rows with one result only on 0.25-0.27
    return s


def _run_step(mu, s, layout, methods, sd, vllms):
    """The step on a fresh context of s's pools, by vLLM's methods or the plugin's; (context, counts, aligned)."""
    cls = mu.MambaSpecDecodeGPUContext
    method = (lambda name: getattr(cls, name).vllm_original) if vllms else (lambda name: getattr(cls, name))
    context = sd.build_context(mu, s, layout)
    sd.count_buffer(context).fill_(-7)
    counts, indices = s.num_accepted.clone(), None
    if "run_fused_precopy" in methods:
        method("run_fused_precopy")(context, s.num_rows, s.dst_cols, s.src_cols, s.token_bias, s.idx_mapping)
    if aligned.METHOD in methods:
        seq_lens = s.num_computed.as_subclass(aligned._LooksLikeCuda) if vllms else s.num_computed
        indices = method(aligned.METHOD)(context, seq_lens, s.num_rows).tolist()
    if "run_fused_postprocess_align" in methods:
        method("run_fused_postprocess_align")(context, s.num_rows, counts, s.state_idx, s.num_computed,
                                              s.idx_mapping)
    return context, counts, indices


def runs(mu, replaced, layouts, sd):
    """What the release tests check about Triton launches, as one dict."""
    step = [m for m in STEP if m in replaced]
    theirs = {}
    for layout in layouts if step else ():
        s = _step_scenario(mu, layout, sd)
        vllms = sd.clone_scenario(s)
        theirs[layout] = (s, vllms, _run_step(mu, vllms, layout, step, sd, True))
    results = {"trapped": make_kernels_raise(), "trap_armed": {}, "no_triton": {}, "whole_step": {}}
    for method in replaced:
        for key, check in (("trap_armed", _vllms_launch_is_trapped), ("no_triton", _method_alone)):
            try:
                results[key][method] = check(mu, method, layouts[0], sd)
            except Exception:
                results[key][method] = traceback.format_exc()[-3000:]
    for layout, (s, vllms, (their_context, their_counts, their_indices)) in theirs.items():
        try:
            ours = sd.clone_scenario(s)
            context, counts, indices = _run_step(mu, ours, layout, step, sd, False)
            results["whole_step"][layout] = {
                "methods": step, "copied": sd.digest(vllms) != sd.digest(s),
                "same_pools": sd.digest(ours) == sd.digest(vllms),
                "ours_planned": context.__dict__.get("_xsc_plan") is not None,
                "same_counts": torch.equal(counts, their_counts), "same_indices": indices == their_indices,
                "same_out": torch.equal(sd.count_buffer(context), sd.count_buffer(their_context))}
        except Exception:
            results["whole_step"][layout] = {"crash": traceback.format_exc()[-3000:]}
    return results
