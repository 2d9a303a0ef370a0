"""A plain PyTorch statement of the spec-decode copies (mamba_spec_decode_postprocess_ / _precopy_), and random
scenarios shaped like vLLM's: what the op's tests compare it with, byte for byte.

The reference decides in Python ints, request by request, and copies with tensor slicing; the op decides on
the device per (request, state). Within one request the copies touch different pools; block tables here
never give two requests the same block, as vLLM's never do.
"""
import dataclasses
import random
from typing import List, Optional

import torch


def _decide_postprocess(s, slot):
    accepted = int(s.num_accepted[slot])
    if s.num_scheduled is None:
        fresh = int(s.num_computed[slot])
        running = fresh - accepted + 1
    else:
        running = int(s.num_computed[slot]) + int(s.num_scheduled[slot]) - int(s.num_draft[slot])
        fresh = running + accepted - 1
    aligned = int(fresh / s.block_size) * s.block_size  # truncating, like the integer division mirrored
    if aligned < running:
        return None
    src, dst, bias = int(s.state_idx[slot]), aligned // s.block_size - 1, aligned - running
    return src, dst, bias, src == dst, not (src == dst and bias == 0)


def _decide_precopy(s, slot):
    src, dst, bias = int(s.src_cols[slot]), int(s.dst_cols[slot]), int(s.token_bias[slot])
    return src, dst, bias, False, src >= 0 and src != dst


def _copy_state(pool, kind, table_row, src_col, dst_col, bias):
    columns = table_row.numel()
    if bias < 0:
        return
    if kind == "whole":
        src_col += bias
    if not (0 <= src_col < columns and 0 <= dst_col < columns):
        return
    src, dst = int(table_row[src_col]), int(table_row[dst_col])
    if not (0 <= src < pool.shape[0] and 0 <= dst < pool.shape[0]):
        return
    if kind == "whole":
        pool[dst] = pool[src].clone()
    elif kind == "conv_sd":
        tokens = pool.shape[1]
        if bias < tokens:
            pool[dst, :tokens - bias] = pool[src, bias:].clone()
    else:
        tokens = pool.shape[2]
        if bias < tokens:
            pool[dst, :, :tokens - bias] = pool[src, :, bias:].clone()


@dataclasses.dataclass
class Scenario:
    states: List[torch.Tensor]
    kinds: List[str]
    groups: List[int]
    block_tables: List[torch.Tensor]
    num_rows: int
    block_size: int = 16
    num_accepted: Optional[torch.Tensor] = None
    state_idx: Optional[torch.Tensor] = None
    num_computed: Optional[torch.Tensor] = None
    num_scheduled: Optional[torch.Tensor] = None
    num_draft: Optional[torch.Tensor] = None
    dst_cols: Optional[torch.Tensor] = None
    src_cols: Optional[torch.Tensor] = None
    token_bias: Optional[torch.Tensor] = None
    idx_mapping: Optional[torch.Tensor] = None
    block_table_by_slot: bool = False

    def slot(self, row):
        return int(self.idx_mapping[row]) if self.idx_mapping is not None else row

    def reference(self, precopy: bool, counts_out: Optional[torch.Tensor] = None, copy_rest: bool = True):
        """Applies the copies to self.states (and the counts to counts_out) in place."""
        slots = min(t.numel() for t in (
            (self.dst_cols, self.src_cols, self.token_bias) if precopy else
            [self.num_accepted, self.state_idx, self.num_computed, counts_out] +
            ([self.num_scheduled, self.num_draft] if self.num_scheduled is not None else [])))
        decisions = []
        for row in range(self.num_rows):
            slot = self.slot(row)
            if not 0 <= slot < slots:
                continue
            d = (_decide_precopy if precopy else _decide_postprocess)(self, slot)
            decisions.append((row, slot, d))
        if counts_out is not None:
            before = self.num_accepted.clone()
            for row, slot, d in decisions:
                if d is not None and d[3]:
                    counts_out[slot] = 1
                elif copy_rest:
                    counts_out[slot] = before[slot]
        for row, slot, d in decisions:
            if d is None or not d[4]:
                continue
            src, dst, bias = d[:3]
            table_row_index = slot if self.block_table_by_slot else row
            for pool, kind, group in zip(self.states, self.kinds, self.groups):
                table = self.block_tables[group]
                if 0 <= table_row_index < table.shape[0]:
                    _copy_state(pool, kind, table[table_row_index], src, dst, bias)


def random_pools(rng: random.Random, layers: int, groups: int, num_blocks: int, layout: str, dtype=torch.float16,
                 padded: bool = False):
    """Per layer a conv state (SD [blocks, tokens, dim] or DS [blocks, dim, tokens]) and a temporal state, each
    layer in a group; `padded` gives the blocks a stride larger than their size, as vLLM's page-aligned
    pools have."""
    states, kinds, group_of = [], [], []
    generator = torch.Generator().manual_seed(rng.randrange(1 << 30))
    # One shape for every layer: vLLM requires the Mamba groups to share one spec.
    tokens, dim = rng.choice([(3, 8), (4, 16), (4, 6)])
    heads = rng.choice([4, 8])
    for layer in range(layers):
        shape = (num_blocks, tokens, dim) if layout == "sd" else (num_blocks, dim, tokens)
        conv = torch.randn(shape, generator=generator).to(dtype)
        temporal_shape = (num_blocks, 2, heads, 8)
        temporal = torch.randn(temporal_shape, generator=generator)
        if padded:
            temporal = torch.randn(num_blocks, 2 * temporal_shape[2] * 8 + 16, generator=generator)[:, :2 * temporal_shape[2] * 8]
            temporal = temporal.view(num_blocks, 2, temporal_shape[2], 8)
        states += [conv, temporal]
        kinds += ["conv_sd" if layout == "sd" else "conv_ds", "whole"]
        group_of += [layer % groups] * 2
    return states, kinds, group_of


def random_tables(rng: random.Random, groups: int, rows: int, columns: int, num_blocks: int):
    """Per group an int32 [rows, columns] table whose entries are distinct block ids (rows * columns <=
    num_blocks), the last and first blocks among them."""
    tables = []
    for _ in range(groups):
        ids = list(range(num_blocks))
        rng.shuffle(ids)
        ids = ids[:rows * columns]
        tables.append(torch.tensor(ids, dtype=torch.int32).view(rows, columns))
    return tables


def random_postprocess(rng: random.Random, layout: str = "sd", precomputed: bool = False, mapped: bool = False,
                       max_requests: int = 64, requests: Optional[int] = None, layers: Optional[int] = None,
                       groups: Optional[int] = None):
    """A postprocess scenario: decode rows with 1..3 draft tokens and prefill rows, accepted 1..drafts+1;
    `requests` of them, or 1..max_requests; `layers` layers, or 1..3; `groups` block tables, or 1..layers."""
    requests = requests or rng.randint(1, max_requests)
    block_size = rng.choice([2, 4, 8, 16])
    num_spec = rng.randint(1, 3)
    layers = layers or rng.randint(1, 3)
    groups = groups or rng.randint(1, layers)  # every group holds a layer, as vLLM's Mamba groups do
    columns = rng.randint(4, 8)
    slots = requests + (rng.randint(0, 4) if mapped else 0)
    num_blocks = slots * columns + rng.randint(0, 3)
    states, kinds, group_of = random_pools(rng, layers, groups, num_blocks, layout,
                                           padded=rng.random() < 0.3)
    accepted, state_idx, computed, scheduled, drafts = [], [], [], [], []
    for _ in range(slots):
        decode = rng.random() < 0.7
        draft = num_spec if decode else 0
        sched = 1 + draft if decode else rng.randint(1, block_size * 2)
        done = rng.randint(0, block_size * (columns - 2) - sched)
        if rng.random() < 0.7:  # most requests end this step at or just short of a block boundary
            target = block_size * rng.randint(1, columns - 3) - rng.randint(0, draft)
            done = max(0, target - sched + draft)
        running = done + sched - draft
        acc = rng.randint(1, draft + 1)
        accepted.append(acc)
        # a whole-block copy reads column state_idx + bias (bias <= 3): vLLM's tables always hold that column
        state_idx.append(max(running - 1, 0) // block_size if rng.random() < 0.9 else rng.randint(0, columns - 4))
        computed.append(done if not precomputed else running + acc - 1)
        scheduled.append(sched)
        drafts.append(draft)
    as_tensor = lambda v: torch.tensor(v, dtype=torch.int32)
    s = Scenario(states, kinds, group_of, random_tables(rng, groups, slots, columns, num_blocks), requests,
                 block_size=block_size, num_accepted=as_tensor(accepted), state_idx=as_tensor(state_idx),
                 num_computed=as_tensor(computed))
    if not precomputed:
        s.num_scheduled, s.num_draft = as_tensor(scheduled), as_tensor(drafts)
    if mapped:
        order = list(range(slots))
        rng.shuffle(order)
        mapping = order[:requests]
        for k in range(requests):
            if rng.random() < 0.1:
                mapping[k] = -1
        s.idx_mapping = as_tensor(mapping)
        s.block_table_by_slot = rng.random() < 0.5
    return s


def random_precopy(rng: random.Random, layout: str = "sd", mapped: bool = False, max_requests: int = 64,
                   **sizes):
    """A precopy scenario: fresh requests (src -1), requests staying in their block, and ones moving on.
    `sizes`: random_postprocess's requests, layers and groups."""
    s = random_postprocess(rng, layout, precomputed=True, mapped=mapped, max_requests=max_requests, **sizes)
    slots = s.num_accepted.numel()
    columns = s.block_tables[0].shape[1]
    dst, src, bias = [], [], []
    for _ in range(slots):
        d = rng.randint(0, columns - 1)
        choice = rng.random()
        src.append(-1 if choice < 0.15 else d if choice < 0.3 else rng.randint(0, columns - 1))
        dst.append(d)
        bias.append(rng.randint(0, min(3, columns - 1 - max(src[-1], 0))))  # column src + bias in the table
    s.dst_cols, s.src_cols, s.token_bias = (torch.tensor(v, dtype=torch.int32) for v in (dst, src, bias))
    return s
