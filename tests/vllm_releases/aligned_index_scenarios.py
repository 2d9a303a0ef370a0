"""vLLM's compute_aligned_state_indices (its Triton kernel, interpreted on CPU) against the plugin's gathers.

Imported by spec_decode_scenarios.py, whose build_context makes the contexts. Each random scenario has
1-3 Mamba groups with one block table each (and, where the release has them, a second set of tables for
this method), a block size, 0-3 speculative blocks, int32 table entries over the whole int32 range, rows
padded past their width, and seq_lens at block boundaries (0, 1, k*B - 1, k*B, k*B + 1), some reaching past
a row's last column into the next row; num_reqs from 0 to 64. Both contexts' output buffers start with the
same random bytes, so rows beyond num_reqs must be left alone by both.
"""
import inspect
import random

import torch

from spec_decode_reference import Scenario, random_pools

METHOD = "compute_aligned_state_indices"
KERNEL = "get_aligned_state_indices_multi_group_kernel"


class _LooksLikeCuda(torch.Tensor):
    """vLLM's method asserts `seq_lens.is_cuda`; its kernel runs in Triton's interpreter on CPU here."""

    @property
    def is_cuda(self):
        return True


def _random_tables(rng, generator, groups, rows, columns, stride):
    """Per group an int32 [rows, columns] table with row stride `stride` (a view of a wider buffer)."""
    tables = []
    for _ in range(groups):
        wide = torch.randint(-2**31, 2**31 - 1, (rows, stride), dtype=torch.int32, generator=generator)
        tables.append(wide[:, :columns])
    return tables


def _seq_len(rng, block_size, columns, stride, slots, spill):
    """A length whose first state column is at the row's start, its end, or (spill) past its last column but
    inside the next row, which vLLM's kernel reads through its flat position."""
    if rng.random() < 0.1:
        return rng.choice([0, 1])
    last_in_row = columns - slots  # the last first column whose slots all stay in the row
    first = rng.randint(last_in_row + 1, last_in_row + stride) if spill else rng.choice(
        [0, last_in_row, rng.randint(0, last_in_row)])
    # seq_len - 1 = first * B + (0 .. B - 1): lengths just past a block boundary and just at the next one
    return first * block_size + rng.choice([1, min(2, block_size), max(block_size - 1, 1), block_size])


def random_aligned(rng, second_tables: bool):
    """A scenario for the context plus the method's inputs."""
    generator = torch.Generator().manual_seed(rng.randrange(1 << 30))
    groups = rng.randint(1, 3)
    layers = rng.randint(groups, 3)
    block_size = rng.choice([1, 2, 4, 16, 64])
    spec_blocks = rng.randint(0, 3)
    slots = 1 + spec_blocks
    max_reqs = rng.randint(1, 64)
    columns = rng.randint(slots + 1, slots + 8)
    stride = columns + rng.choice([0, 0, 1, 5])
    states, kinds, group_of = random_pools(rng, layers, groups, 4, "sd")
    s = Scenario(states, kinds, group_of, _random_tables(rng, generator, groups, max_reqs, columns, stride), 0,
                 block_size=block_size)
    s.spec_blocks = spec_blocks
    s.aligned_tables = (_random_tables(rng, generator, groups, max_reqs, columns, stride)
                        if second_tables and rng.random() < 0.7 else None)
    num_reqs = 0 if rng.random() < 0.1 else rng.choice([max_reqs, rng.randint(1, max_reqs)])
    lengths = [_seq_len(rng, block_size, columns, stride, slots, spill=r < max_reqs - 1 and rng.random() < 0.15)
               for r in range(max_reqs)]
    seq_lens = torch.tensor(lengths, dtype=torch.int32)
    if rng.random() < 0.3:  # a strided view, as a slice of a wider buffer would be
        seq_lens = torch.stack([seq_lens, torch.full_like(seq_lens, -9)], dim=1)[:, 0]
    s.seq_lens, s.num_reqs = seq_lens, num_reqs
    return s


def takes_second_tables(mu):
    init = inspect.unwrap(mu.MambaSpecDecodeGPUContext.initialize_from_forward_context)
    return "aligned_index_block_tables" in inspect.signature(init).parameters


def compare_aligned(mu, seed, build_context):
    rng = random.Random(seed)
    s = random_aligned(rng, takes_second_tables(mu))
    theirs, ours = build_context(mu, s, "sd"), build_context(mu, s, "sd")
    poison = torch.randint(-2**31, 2**31 - 1, theirs.aligned_state_indices.shape, dtype=torch.int32,
                           generator=torch.Generator().manual_seed(seed))
    theirs.aligned_state_indices.copy_(poison)
    ours.aligned_state_indices.copy_(poison)
    method = getattr(mu.MambaSpecDecodeGPUContext, METHOD)
    got_theirs = method.vllm_original(theirs, s.seq_lens.as_subclass(_LooksLikeCuda), s.num_reqs)
    got_ours = method(ours, s.seq_lens, s.num_reqs)

    def view_of_buffer(got, context):
        buffer = context.aligned_state_indices
        return (got.untyped_storage().data_ptr() == buffer.untyped_storage().data_ptr(),
                tuple(got.shape), got.stride(), got.storage_offset(), got.dtype)

    buffers = [c.aligned_state_indices.numpy().tobytes() for c in (theirs, ours)]
    return {"same_buffer": buffers[0] == buffers[1],
            "same_view": view_of_buffer(got_theirs, theirs) == view_of_buffer(got_ours, ours),
            "is_view": view_of_buffer(got_ours, ours)[0],
            "copied": s.num_reqs > 0 and not torch.equal(ours.aligned_state_indices, poison),
            "ours_planned": ours.__dict__.get("_xsc_aligned") is not None,
            "num_reqs": s.num_reqs, "groups": len(s.block_tables)}


def _full_batch(mu, build_context):
    s = random_aligned(random.Random(7), takes_second_tables(mu))
    s.num_reqs = s.seq_lens.numel()
    return s, build_context(mu, s, "sd")


def no_triton_aligned(mu, build_context):
    """Ours once more, after the caller made every Triton kernel raise."""
    s, context = _full_batch(mu, build_context)
    getattr(mu.MambaSpecDecodeGPUContext, METHOD)(context, s.seq_lens, s.num_reqs)
    return True


def trap_catches_vllms_launch(mu, build_context) -> bool:
    """With the kernels made to raise, vLLM's own method must raise: else no_triton_aligned proves nothing."""
    s, context = _full_batch(mu, build_context)
    try:
        getattr(mu.MambaSpecDecodeGPUContext, METHOD).vllm_original(
            context, s.seq_lens.as_subclass(_LooksLikeCuda), s.num_reqs)
    except AssertionError as error:
        return KERNEL in str(error)
    return False
