"""A peer of vLLM's fused spec-decode copy, written here from its description (docs/spec-decode.md).

One Triton program per (request row, state, tile), as vLLM's `postprocess_mamba_fused_kernel` from 0.30
on: each program decides on the device whether its request crossed a block boundary, reads the state's
base address and the block table's address from int64 tables, adds block ids times strides to them and
copies its tile of the span, in 8-byte words where source, destination and size allow, else bytewise.
Where vLLM tiles only the temporal copy, this peer tiles the conv copy too (never slower). It handles
the bench's scenarios only: the source and destination blocks differ (no in-place shift).
"""
import functools

import numpy as np
import torch

from .triton_peers import _interpreting

TILES = 16
WORD_BLOCK = 1024  # 8-byte words per step of one tile
BYTE_BLOCK = 1024


@functools.lru_cache(maxsize=None)
def _kernel(interpret):
    import triton
    import triton.language as tl

    @triton.jit
    def fused_postprocess(accepted, state_idx, scheduled, computed, drafts, table_addrs, table_stride,
                          base_addrs, block_strides, token_bytes, block_bytes, groups, out,
                          BLOCK_SIZE: tl.constexpr, TILES: tl.constexpr, WORDS: tl.constexpr,
                          BYTES: tl.constexpr):
        req = tl.program_id(0)
        state = tl.program_id(1)
        tile = tl.program_id(2)
        num_accepted = tl.load(accepted + req)
        running = tl.load(computed + req) + tl.load(scheduled + req) - tl.load(drafts + req)
        aligned = (running + num_accepted - 1) // BLOCK_SIZE * BLOCK_SIZE
        if aligned >= running:
            bias = aligned - running
            src_col = tl.load(state_idx + req)
            dst_col = aligned // BLOCK_SIZE - 1
            if src_col == dst_col:
                if state == 0 and tile == 0:
                    tl.store(out + req, 1)
            if src_col != dst_col or bias != 0:
                row = tl.load(table_addrs + tl.load(groups + state)).to(tl.pointer_type(tl.int32))
                row += req * table_stride
                base = tl.load(base_addrs + state)
                stride = tl.load(block_strides + state)
                per_token = tl.load(token_bytes + state)
                size = tl.load(block_bytes + state)
                shift = bias.to(tl.int64) * per_token
                src_block = tl.load(row + src_col + tl.where(per_token == 0, bias, 0)).to(tl.int64)
                src_addr = base + src_block * stride + shift
                dst_addr = base + tl.load(row + dst_col).to(tl.int64) * stride
                size -= shift
                if (src_addr % 8 == 0) & (dst_addr % 8 == 0) & (size % 8 == 0):
                    words = size // 8
                    per_tile = ((words + TILES - 1) // TILES + WORDS - 1) // WORDS * WORDS
                    end = tl.minimum(tile * per_tile + per_tile, words)
                    src_words = src_addr.to(tl.pointer_type(tl.uint64))
                    dst_words = dst_addr.to(tl.pointer_type(tl.uint64))
                    for start in range(tile * per_tile, end, WORDS):
                        offs = start + tl.arange(0, WORDS)
                        tl.store(dst_words + offs, tl.load(src_words + offs, mask=offs < end), mask=offs < end)
                else:
                    per_tile = ((size + TILES - 1) // TILES + BYTES - 1) // BYTES * BYTES
                    end = tl.minimum(tile * per_tile + per_tile, size)
                    src_bytes = src_addr.to(tl.pointer_type(tl.uint8))
                    dst_bytes = dst_addr.to(tl.pointer_type(tl.uint8))
                    for start in range(tile * per_tile, end, BYTES):
                        offs = start + tl.arange(0, BYTES)
                        tl.store(dst_bytes + offs, tl.load(src_bytes + offs, mask=offs < end), mask=offs < end)

    return fused_postprocess


def _address_table(tensors, device):
    """int64 table of the tensors' addresses, as vLLM keeps them (two's complement above 2**63)."""
    addrs = np.array([t.data_ptr() for t in tensors], dtype=np.uint64).view(np.int64)
    return torch.from_numpy(addrs).to(device)


def fused_postprocess_call(states, token_bytes, groups, table, block_size, inputs, out):
    """One step of vLLM's design: the counts carried over on the host side of the call, then one launch.
    states: pools [blocks, ...]; token_bytes[j]: bytes one token of shift drops (0: whole block);
    inputs: (accepted, state_idx, scheduled, computed, drafts) int32 per request."""
    device = table.device
    kernel = _kernel(_interpreting())
    as_i64 = lambda values: torch.tensor(values, dtype=torch.int64, device=device)  # noqa: E731
    bases = _address_table(states, device)
    tables = _address_table([table], device)
    strides = as_i64([s.stride(0) * s.element_size() for s in states])
    sizes = as_i64([s[0].numel() * s.element_size() for s in states])
    per_token = as_i64(list(token_bytes))
    group_ids = as_i64(list(groups))
    accepted, state_idx, scheduled, computed, drafts = inputs
    rows = accepted.numel()
    grid = (rows, len(states), TILES)

    def call():
        out[:rows].copy_(accepted)
        kernel[grid](accepted, state_idx, scheduled, computed, drafts, tables, table.stride(0), bases,
                     strides, per_token, sizes, group_ids, out, BLOCK_SIZE=block_size, TILES=TILES,
                     WORDS=WORD_BLOCK, BYTES=BYTE_BLOCK)
    return call
