"""The plugin's compute_aligned_state_indices (vllm_aligned_indices) without vLLM: its gathers against a
plain Python statement of the rule on random tables, its argument errors, and how it recognises (or not)
a stand-in of vLLM's kernel. tests/vllm_releases/ compares it with vLLM's own kernel on real releases."""
import logging
import random
import types

import pytest
import torch

from test_vllm_plugin_unit import load
from xpu_state_copy import as_signed
from xpu_state_copy.vllm import plugin as vllm_plugin
from xpu_state_copy.vllm import aligned_indices as aligned
from xpu_state_copy.vllm.compat import inspect_mamba_utils


def reference(tables, stride, block_size, seq_lens, num_reqs, slots):
    """out[g][r][k]: the element at flat position r * stride + first + k of table g, -1 past its last one."""
    out = []
    for table in tables:
        rows, columns = table.shape
        extent = (rows - 1) * stride + columns
        flat = table.as_strided((extent,), (1,)).tolist()
        per_row = []
        for r in range(num_reqs):
            first = max((int(seq_lens[r]) - 1) // block_size, 0)
            per_row.append([flat[p] if p < extent else -1 for p in (r * stride + first + k for k in range(slots))])
        out.append(per_row)
    return out


def make_context(rng, groups, max_reqs, slots, block_size):
    columns = rng.randint(slots, slots + 6)
    stride = columns + rng.choice([0, 3])
    rows = [rng.randint(1, max_reqs) for _ in range(groups)]  # tables of different heights: different extents
    tables = [torch.randint(-2**31, 2**31 - 1, (r, stride), dtype=torch.int32)[:, :columns] for r in rows]
    context = types.SimpleNamespace(
        aligned_state_indices=torch.randint(-2**31, 2**31 - 1, (groups, max_reqs, slots), dtype=torch.int32),
        block_table_ptrs=torch.tensor([as_signed(t.data_ptr()) for t in tables], dtype=torch.int64),
        block_table_stride_req=stride, block_size=block_size, is_initialized=True)
    plan = aligned.build_aligned_plan(context, {"block_tables": tables}, "block_table_ptrs")
    assert isinstance(plan, aligned.AlignedPlan), plan
    context.__dict__["_xsc_aligned"] = plan
    return context, tables, stride


def vllms_method_must_not_run(self, seq_lens, num_reqs):
    raise AssertionError("the plugin had a plan and must not fall back")


@pytest.mark.parametrize("seed", range(12))
def test_gathers_match_the_rule_on_random_tables(seed):
    rng = random.Random(seed)
    groups, max_reqs, slots, block_size = rng.randint(1, 3), rng.randint(1, 64), rng.randint(1, 4), rng.choice([1, 4, 16])
    context, tables, stride = make_context(rng, groups, max_reqs, slots, block_size)
    ends = [0, 1, 2**31 - 1, -2**31, -5]  # lengths that put the first column at 0 or far past any table
    lengths = [rng.choice(ends) if rng.random() < 0.2 else rng.randint(0, (stride + 4) * block_size)
               for _ in range(max_reqs)]
    seq_lens = torch.tensor(lengths, dtype=rng.choice([torch.int32, torch.int64]))
    num_reqs = rng.choice([0, max_reqs, rng.randint(0, max_reqs)])
    before = context.aligned_state_indices.clone()
    got = aligned.ours(vllms_method_must_not_run)(context, seq_lens, num_reqs)
    buffer = context.aligned_state_indices
    assert got.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr()  # a view of the buffer
    assert got.storage_offset() == 0 and got.stride() == buffer.stride() and got.shape == (groups, num_reqs, slots)
    assert got.tolist() == reference(tables, stride, block_size, seq_lens, num_reqs, slots)
    assert torch.equal(buffer[:, num_reqs:], before[:, num_reqs:])  # rows past the batch keep their bytes


def test_bad_num_reqs_names_the_argument():
    context, _, _ = make_context(random.Random(0), 2, 8, 2, 4)
    for bad in (-1, 9, 2.0):
        with pytest.raises(ValueError, match=f"num_reqs={bad!r}"):
            aligned.ours(vllms_method_must_not_run)(context, torch.ones(8, dtype=torch.int32), bad)


def test_inputs_it_does_not_take_go_to_vllms_method():
    context, _, _ = make_context(random.Random(1), 1, 8, 2, 4)
    method = aligned.ours(lambda self, seq_lens, num_reqs: "vllm's own")
    assert method(context, torch.ones(8), 3) == "vllm's own"  # float lengths
    assert method(context, torch.ones(2, 8, dtype=torch.int32), 3) == "vllm's own"


def stand_in(kernel_body):
    params = ", ".join(aligned._KERNEL_PARAMETERS)
    return f'''
import torch

def batch_memcpy(src_ptrs, dst_ptrs, sizes):
    pass

def do_mamba_copy_block(tables):
    batch_memcpy(*tables)

class _Kernel:  # like a Triton JITFunction: the function as .fn, a launch by kernel[grid](...)
    def __init__(self, fn):
        self.fn = fn

    def __getitem__(self, grid):
        raise AssertionError("the stand-in's kernel launched")

def _kernel({params}):
{kernel_body}

{aligned.KERNEL} = _Kernel(_kernel)

class MambaSpecDecodeGPUContext:
    block_table_ptrs: torch.Tensor
    block_table_stride_req: int = 0
    aligned_state_indices: torch.Tensor = None

    def initialize_from_forward_context(self, kv_cache_config, forward_context, mamba_state_copy_funcs, block_tables):
        self.block_table_ptrs = torch.tensor([t.data_ptr() for t in block_tables], dtype=torch.int64)
        self.block_table_stride_req = block_tables[0].stride(0)
        self.aligned_state_indices = torch.full((len(block_tables), 4, 2), -7, dtype=torch.int32)
        self.block_size, self.is_initialized = 4, True

    def compute_aligned_state_indices(self, seq_lens, num_reqs):
        {aligned.KERNEL}[(1,)](self.block_table_ptrs, seq_lens, self.aligned_state_indices, self.block_table_stride_req)
'''


RECOGNISED = stand_in(f"    first_state_slot = {aligned._KERNEL_RULES[0]}\n"
                      f"    return block_tables[:, None, None] + {aligned._KERNEL_RULES[1]}")


def test_a_recognised_kernel_is_served_by_gathers(tmp_path, caplog):
    module = load(tmp_path, RECOGNISED, "aligned_stand_in")
    assert inspect_mamba_utils(module, version="x").aligned_index_table == "block_table_ptrs"
    with caplog.at_level(logging.INFO, logger="vllm.xpu_state_copy"):
        applied = vllm_plugin.patch_mamba_utils(module)
    assert vllm_plugin.ALIGNED_INDICES in applied and any(vllm_plugin.ALIGNED_INDICES in r.getMessage()
                                                          for r in caplog.records)
    tables = [torch.arange(12, dtype=torch.int32).view(4, 3) + 100 * g for g in range(2)]
    context = module.MambaSpecDecodeGPUContext()
    context.initialize_from_forward_context(None, {}, None, tables)
    got = context.compute_aligned_state_indices(torch.tensor([1, 5, 8, 0], dtype=torch.int32), 3)
    assert got.tolist() == [[[0, 1], [4, 5], [7, 8]], [[100, 101], [104, 105], [107, 108]]]
    assert context.aligned_state_indices[:, 3].eq(-7).all()


def test_an_unrecognised_kernel_stays_and_the_warning_says_why(tmp_path, caplog):
    module = load(tmp_path, stand_in("    return (seq_lens + 1) // CACHE_BLOCK_SIZE"), "aligned_stand_in_odd")
    original = module.MambaSpecDecodeGPUContext.compute_aligned_state_indices
    layout = inspect_mamba_utils(module, version="x")
    assert layout.aligned_index_table is None and layout.aligned_unrecognised
    with caplog.at_level(logging.WARNING, logger="vllm.xpu_state_copy"):
        applied = vllm_plugin.patch_mamba_utils(module)
    assert vllm_plugin.ALIGNED_INDICES not in applied
    assert module.MambaSpecDecodeGPUContext.compute_aligned_state_indices is original
    assert any(aligned.METHOD in r.getMessage() and "computes its indices differently" in r.getMessage()
               for r in caplog.records)
