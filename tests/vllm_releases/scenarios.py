"""Runs vLLM's own Mamba state-copy code on CPU tensors; executed in a subprocess inside a vLLM environment.

    python scenarios.py <plugin: on|off> <scenario>...

prints one JSON object (scenario -> result) on its last line. Each scenario builds a tiny hybrid-model cache (two Mamba layers,
each with an SD conv state [blocks, tokens, dim] and a temporal state [blocks, heads, d, d]) and drives the
real vLLM functions on it. The plugin arrives the way it does in vLLM: through the
vllm.general_plugins entry point of the installed xpu_state_copy, switched by XPU_STATE_COPY_VLLM (on: 1).
"""
import hashlib
import inspect
import json
import os
import sys
import traceback
import types

import torch

NUM_BLOCKS, MAX_REQS = 8, 4
LAYERS = ("model.layers.0.linear_attn", "model.layers.2.linear_attn")
FAKE_HIGH_BIT = 1 << 63  # what an XPU address looks like: bit 63 set
FUSED = ("run_fused_postprocess", "run_fused_precopy", "run_fused_postprocess_align",
         "compute_aligned_state_indices")  # the last one 0.29+


class HighAddressTensor(torch.Tensor):
    """A CPU tensor that reports its address with bit 63 set, like a Level Zero device pointer.
    Only its address is ever stored; no kernel is launched on it (that would dereference a fake pointer)."""

    def data_ptr(self):
        return torch.Tensor.data_ptr(self) + FAKE_HIGH_BIT


def build_cache(high_addresses=False):
    from vllm.model_executor.layers.mamba import mamba_utils as layer_utils
    from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec, MambaSpec

    generator = torch.Generator().manual_seed(7)
    states = {}
    for name in LAYERS:
        conv = torch.randn(NUM_BLOCKS, 4, 16, generator=generator).to(torch.float16)
        temporal = torch.randn(NUM_BLOCKS, 2, 8, 8, generator=generator)
        states[name] = [conv, temporal]
    spec = MambaSpec(block_size=16, shapes=((4, 16), (2, 8, 8)), dtypes=(torch.float16, torch.float32),
                     mamba_cache_mode="align")
    config = KVCacheConfig(num_blocks=NUM_BLOCKS, kv_cache_tensors=[],
                           kv_cache_groups=[KVCacheGroupSpec(layer_names=list(LAYERS), kv_cache_spec=spec)])
    view = (lambda t: t.as_subclass(HighAddressTensor)) if high_addresses else (lambda t: t)
    forward_context = {name: types.SimpleNamespace(kv_cache=[view(t) for t in ts]) for name, ts in states.items()}
    # An attention layer, as an engine binds it: its kv_cache one tensor (vLLM's copy code reads only the
    # Mamba layers; the plugin's validate mode reads them all).
    forward_context["model.layers.1.self_attn"] = types.SimpleNamespace(kv_cache=torch.zeros(NUM_BLOCKS, 2, 16, 8))
    funcs = (layer_utils.get_conv_copy_spec, layer_utils.get_temporal_copy_spec)
    if hasattr(layer_utils, "MambaStateCopyFuncsByType"):  # newer releases key the functions by Mamba type
        funcs = {spec.mamba_type: funcs}
    return states, config, forward_context, funcs


def make_buffer(*size, dtype):
    from vllm.v1.utils import CpuGpuBuffer

    return CpuGpuBuffer(*size, dtype=dtype, device=torch.device("cpu"), pin_memory=False)


def create_arguments(create, forward_context, funcs):
    """MambaSpecDecodeGPUContext.create's release-specific arguments: up to 0.33 a host-buffer factory and
    either the state-type count or the copy functions; from 0.34 the copy functions and the forward
    context (it counts each layer's states there), and no factory."""
    params = inspect.signature(create).parameters
    arguments = {"num_state_types": 2} if "num_state_types" in params else {"copy_funcs": funcs}
    if "make_buffer" in params:
        arguments["make_buffer"] = make_buffer
    if "forward_context" in params:
        arguments["forward_context"] = forward_context
    return arguments


def unsigned(values):
    return [v + (1 << 64) if v < 0 else v for v in values]


def populate(mu):
    """vLLM's spec-decode context reading state addresses that have bit 63 set."""
    _, config, forward_context, funcs = build_cache(high_addresses=True)
    context = mu.MambaSpecDecodeGPUContext.create(
        max_num_reqs=MAX_REQS, kv_cache_config=config, device=torch.device("cpu"),
        **create_arguments(mu.MambaSpecDecodeGPUContext.create, forward_context, funcs))
    block_table = torch.zeros(MAX_REQS, NUM_BLOCKS, dtype=torch.int32).as_subclass(HighAddressTensor)
    result = {"expected_state_addrs": [s.data_ptr() for n in LAYERS for s in forward_context[n].kv_cache],
              "expected_block_table_addr": block_table.data_ptr()}
    try:
        context.initialize_from_forward_context(config, forward_context, funcs, [block_table])
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"
        return result
    result["state_addrs"] = unsigned(context.state_base_addrs.tolist())
    result["block_table_addr"] = unsigned(context.block_table_ptrs.tolist())[0]
    result["table_dtypes"] = [str(context.state_base_addrs.dtype), str(context.block_table_ptrs.dtype)]
    return result


def _collect(mu, copy_buffers, config, forward_context, funcs, requests):
    copy_buffers.offset = 0
    for block_ids, src_idx, dst_idx, bias in requests:
        request = types.SimpleNamespace(block_ids=(block_ids,))
        mu.collect_mamba_copy_meta(copy_buffers, config, funcs, copy_buffers.mamba_group_ids,
                                   src_idx, dst_idx, bias, request, forward_context)


# (block ids of the request, source block index, destination block index, accepted-token bias).
# The last one keeps the same block and shifts by one token: an overlapping memmove inside one block.
REQUESTS = [([0, 1, 2, 3], 0, 1, 0), ([4, 5, 6], 0, 2, 1), ([7, 3, 2], 1, 1, 1)]


# What the V1 copy-path scenarios report on a release without that path (0.34+: no MambaCopyBuffers,
# collect_mamba_copy_meta, do_mamba_copy_block or batch_memcpy).
NO_V1_COPY_PATH = {"no_v1_copy_path": True}


def has_v1_copy_path(mu):
    return any(hasattr(mu, name) for name in ("MambaCopyBuffers", "collect_mamba_copy_meta", "do_mamba_copy_block",
                                              "batch_memcpy"))


def collect_high(mu):
    """vLLM's non-fused path recording addresses that have bit 63 set (recorded only, never copied)."""
    if not has_v1_copy_path(mu):
        return NO_V1_COPY_PATH
    _, config, forward_context, funcs = build_cache(high_addresses=True)
    copy_buffers = mu.MambaCopyBuffers.create(MAX_REQS, config, funcs, make_buffer)
    result = {"table_dtype": str(copy_buffers.src_ptrs.cpu.dtype)}
    try:
        _collect(mu, copy_buffers, config, forward_context, funcs, REQUESTS)
    except Exception as error:
        result["error"] = f"{type(error).__name__}: {error}"
        return result
    n = copy_buffers.offset
    result["dst_addrs"] = [int(v) for v in copy_buffers.dst_ptrs.np[:n]]
    dst_blocks = [block_ids[dst] for block_ids, _, dst, _ in REQUESTS]
    result["expected_dst_addrs"] = [forward_context[name].kv_cache[k][block].data_ptr()
                                    for block in dst_blocks for name in LAYERS for k in range(2)]
    return result


def copy(mu):
    """collect_mamba_copy_meta + do_mamba_copy_block on real CPU states; digest of every state after."""
    if not has_v1_copy_path(mu):
        return NO_V1_COPY_PATH
    states, config, forward_context, funcs = build_cache()
    before = hashlib.sha256(b"".join(t.numpy().tobytes() for ts in states.values() for t in ts)).hexdigest()
    copy_buffers = mu.MambaCopyBuffers.create(MAX_REQS, config, funcs, make_buffer)
    _collect(mu, copy_buffers, config, forward_context, funcs, REQUESTS)
    entries = copy_buffers.offset
    mu.do_mamba_copy_block(copy_buffers)
    after = b"".join(t.numpy().tobytes() for ts in states.values() for t in ts)
    return {"before": before, "after": hashlib.sha256(after).hexdigest(), "entries": entries,
            "table_dtype": str(copy_buffers.src_ptrs.cpu.dtype),
            "routed": bool(getattr(mu.batch_memcpy, "__xpu_state_copy_patch__", False)),
            "wrapper_calls": len(WRAPPER_CALLS)}


WRAPPER_CALLS = []


def wrap_copy_block(mu):
    """What a profiler imported before the plugin does (SCENARIO_WRAP_COPY_BLOCK=1): time do_mamba_copy_block
    with a wrapper that has no __wrapped__, before the plugin patches the module."""
    original = getattr(mu, "do_mamba_copy_block", None)
    if original is None:
        return

    def timed(*args, **kwargs):
        WRAPPER_CALLS.append(1)
        return original(*args, **kwargs)

    mu.do_mamba_copy_block = timed


def doctor(mu):
    """What `xpu-state-copy doctor` says about this vLLM (its vLLM section and its verdict)."""
    import argparse

    from xpu_state_copy.tools import doctor as doctor_command

    report = doctor_command.collect(argparse.Namespace(skip_vllm_import=False))
    return {"vllm": report["vllm"], "problems": report["problems"]}


def main():
    plugin, scenarios = sys.argv[1], sys.argv[2:]
    os.environ["XPU_STATE_COPY_VLLM"] = "1" if plugin == "on" else "0"
    import vllm
    import vllm.v1.utils
    import vllm.logger
    from vllm.plugins import load_general_plugins

    if hasattr(vllm.logger, "configure_logging"):  # newer vLLM sets up logging from the CLI, as serve does
        from vllm.config.logging import LoggingConfig

        vllm.logger.configure_logging(LoggingConfig())

    if os.environ.get("SCENARIO_WRAP_COPY_BLOCK") == "1":
        from xpu_state_copy import import_hook

        import_hook.install("vllm.v1.worker.mamba_utils", wrap_copy_block)  # runs before the plugin's patch
    # What every vLLM process does at start: run the vllm.general_plugins entry points, ours included.
    # mamba_utils is imported only afterwards, as in a real worker, so the plugin patches it on import.
    load_general_plugins()
    import vllm.v1.worker.mamba_utils as mu

    from xpu_state_copy.vllm import compat as vllm_compat, plugin as vllm_plugin

    # A CPU-only torch cannot pin host memory; newer vLLM pins before every host-to-device copy.
    vllm.v1.utils.PIN_MEMORY = False
    context = mu.MambaSpecDecodeGPUContext
    results = {
        "vllm_version": vllm.__version__,
        "planned": vllm_plugin.planned_changes(vllm_compat.inspect_mamba_utils(mu)),
        "patched": sorted(name for name, value in [("batch_memcpy", getattr(mu, "batch_memcpy", None)),
                                                   ("MambaCopyBuffers.create",
                                                    getattr(getattr(mu, "MambaCopyBuffers", None), "create", None))]
                          + [(f"MambaSpecDecodeGPUContext.{n}", getattr(context, n, None))
                             for n in vllm_compat.POINTER_WRITERS + tuple(FUSED)]
                          if getattr(value, "__xpu_state_copy_patch__", False)),
        "reapplied": vllm_plugin.patch_mamba_utils(mu) if plugin == "on" else [],  # must add nothing
    }
    if plugin == "on" and hasattr(mu, "batch_memcpy_kernel"):
        def triton_must_not_run(*args, **kwargs):
            raise AssertionError("vLLM's Triton batch_memcpy ran although the plugin routed it")

        mu.batch_memcpy_kernel = triton_must_not_run
    for scenario in scenarios:
        try:
            results[scenario] = globals()[scenario](mu)
        except Exception:
            results[scenario] = {"crash": traceback.format_exc()}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
