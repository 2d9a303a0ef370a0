"""How the plugin recognises vLLM's fused spec-decode copies as 0.34 shaped them, on a stand-in written here
(no vLLM needed): no V1 copy path, the count buffer under its new name, kernels with ReplaySSM flags gated on
``self.replayssm``. Launches that change what is copied are not recognised; a ReplaySSM context is handed
to vLLM's own method. tests/vllm_releases/ runs the same against the real releases.
"""
import logging

import pytest
import torch

from test_vllm_plugin_unit import load
from xpu_state_copy import as_signed
from xpu_state_copy.vllm import plugin as vllm_plugin
from xpu_state_copy.vllm.compat import inspect_mamba_utils

TABLES = ("block_table_ptrs", "block_table_stride_req", "state_base_addrs", "state_block_strides",
          "state_elem_sizes", "state_inner_sizes", "state_conv_widths", "state_group_indices",
          "state_dim_row_count", "state_dim_row_stride")
TABLE_PARAMETERS = ", ".join(t if t == "block_table_stride_req" else f"{t}_ptr" for t in TABLES)
TABLE_ARGUMENTS = ", ".join(f"self.{t}" for t in TABLES)
STAND_IN = f'''
import torch

class _Kernel:  # like a Triton JITFunction: the function as .fn, launched as kernel[grid](...)
    def __init__(self, fn):
        self.fn, self.launches = fn, []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append(kwargs)

def _copy_mamba_state_block(*args):
    pass

def _postprocess(num_accepted_tokens_ptr, mamba_state_idx_ptr, num_scheduled_tokens_ptr, num_computed_tokens_ptr,
                 num_draft_tokens_ptr, {TABLE_PARAMETERS}, num_accepted_tokens_out_ptr, idx_mapping_ptr, num_reqs,
                 block_size, COPY_BLOCK_SIZE, CONV_STATE_DIM_FIRST, HAS_IDX_MAPPING=False,
                 PRECOMPUTED_NEW_COMPUTED=False, SKIP_TEMPORAL_STATE_COPY=False, TEMPORAL_TILES=1):
    req_idx = 0
    _copy_mamba_state_block(0, req_idx)

def _precopy(mamba_state_idx_ptr, src_col_ptr, token_bias_ptr, {TABLE_PARAMETERS}, idx_mapping_ptr, num_reqs,
             COPY_BLOCK_SIZE, CONV_STATE_DIM_FIRST, HAS_IDX_MAPPING=True, ZERO_TEMPORAL_TOKEN_BIAS=False,
             TEMPORAL_TILES=1):
    req_idx = 0
    _copy_mamba_state_block(0, req_idx)

postprocess_mamba_fused_kernel = _Kernel(_postprocess)
precopy_mamba_align_fused_kernel = _Kernel(_precopy)

def is_conv_state_dim_first():
    return False

def signed(value):
    return value - (1 << 64) if value >= 1 << 63 else value

class MambaSpecDecodeGPUContext:
''' + "".join(f"    {t}: torch.Tensor\n" for t in TABLES) + '''    num_accepted_tokens_snapshot: torch.Tensor
    replayssm: object = None
    is_initialized: bool = False

    def initialize_from_forward_context(self, kv_cache_config, forward_context, mamba_state_copy_funcs, block_tables):
        """Layers of [SD conv, temporal] states, one group."""
        states = [state for layer in forward_context.values() for state in layer.kv_cache]
        conv = [k % 2 == 0 for k in range(len(states))]
        as_table = lambda values, dtype: torch.tensor(values, dtype=dtype)
        self.state_base_addrs = as_table([signed(s.data_ptr()) for s in states], torch.int64)
        self.state_block_strides = as_table([s.stride(0) * s.element_size() for s in states], torch.int64)
        self.state_elem_sizes = as_table([s.element_size() for s in states], torch.int32)
        self.state_conv_widths = as_table([s.size(1) if c else 0 for s, c in zip(states, conv)], torch.int32)
        self.state_inner_sizes = as_table([s.stride(1) if c else s[0].numel() for s, c in zip(states, conv)],
                                          torch.int64)
        self.state_group_indices = torch.zeros(len(states), dtype=torch.int32)
        self.state_dim_row_count = torch.zeros(len(states), dtype=torch.int32)
        self.state_dim_row_stride = torch.zeros(len(states), dtype=torch.int64)
        self.block_table_ptrs = as_table([signed(t.data_ptr()) for t in block_tables], torch.int64)
        self.block_table_stride_req = block_tables[0].stride(0)
        self.num_accepted_tokens_snapshot = torch.zeros(block_tables[0].shape[0], dtype=torch.int32)
        self.block_size, self.is_initialized = 4, True

    def run_fused_precopy(self, num_reqs, state_idx_gpu, src_col_gpu, token_bias_gpu, idx_mapping):
        precopy_mamba_align_fused_kernel[(num_reqs,)](
            state_idx_gpu, src_col_gpu, token_bias_gpu, TABLES, idx_mapping, num_reqs, COPY_BLOCK_SIZE=1024,
            CONV_STATE_DIM_FIRST=is_conv_state_dim_first(), HAS_IDX_MAPPING=idx_mapping is not None,
            ZERO_TEMPORAL_TOKEN_BIAS=self.replayssm is not None)

    def run_fused_postprocess_align(self, num_reqs, num_accepted_tokens_gpu, state_idx_gpu,
                                    new_num_computed_tokens_gpu, idx_mapping):
        snapshot = self.num_accepted_tokens_snapshot
        snapshot.copy_(num_accepted_tokens_gpu)
        postprocess_mamba_fused_kernel[(num_reqs,)](
            snapshot, state_idx_gpu, None, new_num_computed_tokens_gpu, None, TABLES, num_accepted_tokens_gpu,
            idx_mapping, num_reqs, block_size=self.block_size, COPY_BLOCK_SIZE=1024,
            CONV_STATE_DIM_FIRST=is_conv_state_dim_first(), HAS_IDX_MAPPING=True, PRECOMPUTED_NEW_COMPUTED=True,
            SKIP_TEMPORAL_STATE_COPY=self.replayssm is not None)
'''.replace("TABLES,", TABLE_ARGUMENTS + ",")
FUSED = ("run_fused_precopy", "run_fused_postprocess_align")


def test_a_release_without_the_v1_copy_path_has_nothing_to_route(tmp_path):
    layout = inspect_mamba_utils(load(tmp_path, STAND_IN, "fused_stand_in"), version="x")
    assert layout.unrecognised == [] and not layout.batch_memcpy_routable
    assert layout.fused_copies == FUSED and layout.fused_unrecognised == []
    assert layout.fused_rows_by_slot == {name: True for name in FUSED}
    assert vllm_plugin.planned_changes(layout) == [f"MambaSpecDecodeGPUContext.{', '.join(FUSED)} "
                                                   f"{vllm_plugin.FUSED_COPIES}"]


@pytest.mark.parametrize("leftover", [
    "def batch_memcpy(src_ptrs, dst_ptrs, sizes):\n    pass\n",  # without do_mamba_copy_block to call it
    "class MambaCopyBuffers:\n    pass\n",
    "def collect_mamba_copy_meta(copy_bufs, forward_context):\n    pass\n",
], ids=["batch_memcpy", "MambaCopyBuffers", "collect_mamba_copy_meta"])
def test_part_of_the_v1_copy_path_is_not_recognised(tmp_path, caplog, leftover):
    module = load(tmp_path, STAND_IN + leftover, "partial_stand_in")
    original = module.MambaSpecDecodeGPUContext.run_fused_precopy
    assert any("the rest of the V1 copy path is there" in why for why in inspect_mamba_utils(module, "x").unrecognised)
    with caplog.at_level(logging.WARNING, logger="vllm.xpu_state_copy"):
        assert vllm_plugin.patch_mamba_utils(module) == []
    assert module.MambaSpecDecodeGPUContext.run_fused_precopy is original
    assert any("does not recognise" in record.getMessage() for record in caplog.records)


def test_a_module_with_neither_copy_path_is_not_recognised(tmp_path):
    module = load(tmp_path, "import torch\n", "empty_stand_in")
    assert any("neither the V1 copy path" in why for why in inspect_mamba_utils(module, "x").unrecognised)


def test_a_context_whose_fused_methods_were_all_renamed_is_not_recognised(tmp_path, caplog):
    """No V1 path and no fused method the plugin knows: nothing of that release would be ours, so the plugin
    must say so instead of patching nothing in silence."""
    renamed = STAND_IN
    for name in ("run_fused_precopy", "run_fused_postprocess_align"):
        renamed = renamed.replace(f"def {name}(", f"def {name}_v2(")
    module = load(tmp_path, renamed, "renamed_stand_in")
    assert any("neither the V1 copy path" in why for why in inspect_mamba_utils(module, "x").unrecognised)
    with caplog.at_level(logging.WARNING, logger="vllm.xpu_state_copy"):
        assert vllm_plugin.patch_mamba_utils(module) == []
    assert any("does not recognise" in record.getMessage() for record in caplog.records)


def test_the_count_buffer_may_have_either_name_but_one_it_must_have(tmp_path):
    old_name = STAND_IN.replace("num_accepted_tokens_snapshot", "num_accepted_tokens_out")
    assert inspect_mamba_utils(load(tmp_path, old_name, "old_name"), "x").fused_copies == FUSED
    neither = STAND_IN.replace("num_accepted_tokens_snapshot", "accepted_counts")
    layout = inspect_mamba_utils(load(tmp_path, neither, "no_count_buffer"), "x")
    assert layout.fused_copies == () and any("num_accepted_tokens_out / num_accepted_tokens_snapshot" in why
                                             for why in layout.fused_unrecognised)


# Launch variants our op reproduces just the same: tuning, other formatting, a flag left at its default (off).
HARMLESS = {
    "tuning option": ("idx_mapping, num_reqs, COPY_BLOCK_SIZE=1024,",
                      "idx_mapping, num_reqs, COPY_BLOCK_SIZE=64, num_warps=4,"),
    "split over lines": ("HAS_IDX_MAPPING=idx_mapping is not None",
                         "HAS_IDX_MAPPING=(\n                idx_mapping is not None)"),
    "flag left at its default": ("SKIP_TEMPORAL_STATE_COPY=self.replayssm is not None)", ")"),
    "snapshot passed as the buffer": ("            snapshot, state_idx_gpu,",
                                      "            self.num_accepted_tokens_snapshot, state_idx_gpu,"),
}
# Launches and kernels that copy something else (or may): ((old, new) edits, what the reason names).
CHANGED = {
    "flag always on": ([("SKIP_TEMPORAL_STATE_COPY=self.replayssm is not None", "SKIP_TEMPORAL_STATE_COPY=True")],
                       "SKIP_TEMPORAL_STATE_COPY to True"),
    "flag on another condition": ([("ZERO_TEMPORAL_TOKEN_BIAS=self.replayssm is not None",
                                    "ZERO_TEMPORAL_TOKEN_BIAS=self.ring is not None")],
                                  "ZERO_TEMPORAL_TOKEN_BIAS to self.ring is not None"),
    "flag left at a default that is on": (
        [("SKIP_TEMPORAL_STATE_COPY=False, TEMPORAL_TILES=1):", "SKIP_TEMPORAL_STATE_COPY=True, TEMPORAL_TILES=1):"),
         ("SKIP_TEMPORAL_STATE_COPY=self.replayssm is not None)", ")")], "SKIP_TEMPORAL_STATE_COPY to True"),
    "new kernel parameter": ([("ZERO_TEMPORAL_TOKEN_BIAS=False,", "ZERO_TEMPORAL_TOKEN_BIAS=False, RING_MODE=False,")],
                             "parameters no verified release has: RING_MODE"),
    "unknown keyword": ([("PRECOMPUTED_NEW_COMPUTED=True,", "PRECOMPUTED_NEW_COMPUTED=True, SKIP_CONV=True,")],
                        "unknown keyword SKIP_CONV"),
    "another address table": ([("token_bias_gpu, self.block_table_ptrs,",
                                "token_bias_gpu, self.aligned_index_block_table_ptrs,")],
                              "block_table_ptrs_ptr to self.aligned_index_block_table_ptrs"),
    "mapping always off": ([("HAS_IDX_MAPPING=idx_mapping is not None", "HAS_IDX_MAPPING=False")],
                           "HAS_IDX_MAPPING to False"),
    "counts decided from elsewhere": ([("        snapshot = self.num_accepted_tokens_snapshot\n",
                                        "        snapshot = self.other_counts\n")],
                                      "num_accepted_tokens_ptr to snapshot"),
    "launched twice": ([("        snapshot = self.num_accepted_tokens_snapshot\n",
                         "        snapshot = self.num_accepted_tokens_snapshot\n"
                         "        postprocess_mamba_fused_kernel[(1,)](snapshot)\n")], "2 times, expected once"),
}


@pytest.mark.parametrize("old, new", HARMLESS.values(), ids=list(HARMLESS))
def test_launches_that_copy_the_same_are_recognised(tmp_path, old, new):
    assert STAND_IN.count(old) == 1
    module = load(tmp_path, STAND_IN.replace(old, new), "harmless_stand_in")
    assert inspect_mamba_utils(module, "x").fused_copies == FUSED


@pytest.mark.parametrize("edits, reason", CHANGED.values(), ids=list(CHANGED))
def test_launches_that_change_what_is_copied_stay_on_vllms_kernels(tmp_path, caplog, edits, reason):
    source = STAND_IN
    for old, new in edits:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    module = load(tmp_path, source, "changed_stand_in")
    originals = [module.MambaSpecDecodeGPUContext.__dict__[name] for name in FUSED]
    layout = inspect_mamba_utils(module, "x")
    assert layout.fused_copies == () and any(reason in why for why in layout.fused_unrecognised), \
        layout.fused_unrecognised
    with caplog.at_level(logging.WARNING, logger="vllm.xpu_state_copy"):
        vllm_plugin.patch_mamba_utils(module)
    assert [module.MambaSpecDecodeGPUContext.__dict__[name] for name in FUSED] == originals
    assert any("stay on vLLM's Triton kernels" in r.getMessage() and reason in r.getMessage() for r in caplog.records)


class _Layer:
    def __init__(self, kv_cache):
        self.kv_cache = kv_cache


def patched_context(tmp_path, name):
    """A patched stand-in's context over one layer: SD conv [8 blocks, 4 tokens, 2] and temporal [8, 3]."""
    module = load(tmp_path, STAND_IN, name)
    assert vllm_plugin.patch_mamba_utils(module)
    conv = torch.arange(64, dtype=torch.float32).view(8, 4, 2)
    temporal = torch.arange(100, 124, dtype=torch.float32).view(8, 3)
    table = torch.arange(8, dtype=torch.int32).view(2, 4)  # request 0: blocks 0-3, request 1: blocks 4-7
    context = module.MambaSpecDecodeGPUContext()
    context.initialize_from_forward_context(None, {"layer.0": _Layer([conv, temporal])}, None, [table])
    assert context.__dict__.get("_xsc_plan") is not None
    return module, context, conv, temporal


def int32(*values):
    return torch.tensor(values, dtype=torch.int32)


def test_a_replayssm_context_is_handed_to_vllms_method_with_one_warning(tmp_path, caplog):
    module, context, conv, temporal = patched_context(tmp_path, "replayssm_stand_in")
    kernel = module.precopy_mamba_align_fused_kernel
    expected_conv, expected_temporal = conv.clone(), temporal.clone()
    expected_conv[2, :3] = conv[0, 1:]  # request 0 moves from column 0 to 2 with a shift of one token
    expected_temporal[2] = temporal[1]  # a whole state reads column src + bias
    precopy = (2, int32(2, 5), int32(0, -1), int32(1, 0), int32(0, 1))  # request 1 is fresh: nothing
    with caplog.at_level(logging.WARNING, logger="vllm.xpu_state_copy"):
        context.run_fused_precopy(*precopy)
        assert kernel.launches == [] and torch.equal(conv, expected_conv) and torch.equal(temporal, expected_temporal)
        context.replayssm = object()  # what vLLM 0.34 sets up for FlashInfer ReplaySSM
        conv.add_(1000)  # fresh bytes, so a copy of ours would show
        before = conv.clone()
        context.run_fused_precopy(*precopy)
        context.run_fused_postprocess_align(2, int32(1, 1), int32(0, 0), int32(4, 4), int32(0, 1))
    assert torch.equal(conv, before), "our op copied although the context runs ReplaySSM"
    assert [launch.get("ZERO_TEMPORAL_TOKEN_BIAS", launch.get("SKIP_TEMPORAL_STATE_COPY")) for launch in
            kernel.launches + module.postprocess_mamba_fused_kernel.launches] == [True, True]
    warnings = [r.getMessage() for r in caplog.records if "ReplaySSM" in r.getMessage()]
    assert len(warnings) == 1 and "stay on vLLM's Triton kernels" in warnings[0], warnings


def test_ours_leaves_the_snapshot_in_the_count_buffer_where_vllm_reads_it(tmp_path):
    module, context, conv, temporal = patched_context(tmp_path, "snapshot_stand_in")
    context.num_accepted_tokens_snapshot.fill_(-7)
    counts = int32(2, 3)
    before, before_temporal = conv.clone(), temporal.clone()
    # request 0 now holds 8 tokens, 2 of them just accepted: its running state sits in column 1 at token 7,
    # so the aligned state (token 8) is saved to column 1 too, shifted by one token, and its count reset
    context.run_fused_postprocess_align(1, counts, int32(1, 0), int32(8, 0), int32(0))
    assert module.postprocess_mamba_fused_kernel.launches == []
    assert context.num_accepted_tokens_snapshot.tolist() == [2, 3]  # the counts as they were before the call
    assert counts.tolist() == [1, 3]
    assert torch.equal(conv[1, :3], before[1, 1:]) and torch.equal(temporal[1], before_temporal[2])
