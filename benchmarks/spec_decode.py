"""The spec-decode step: vLLM's postprocess after a speculative-decoding step, in align mode.

Every request of the batch ran 1 + d tokens (d drafts, MTP 1..max_drafts) and kept `accepted` of them;
those whose new token count crossed a block boundary save their running state there: per layer a conv
state (dropping the `bias` tokens past the boundary) and a temporal state (the block `bias` columns on).
Whether and what to copy is decided on the device, so the methods get the same inputs vLLM's runner
has: state pools, one block table, per-request counts. The roofline copies the bytes that move.
"""
import random
from dataclasses import dataclass, replace

import torch

from . import triton_spec_decode
from .peers import ROOFLINE, ImportFailed, Roofline, candidate, random_bytes, size_table
from .workloads import CONV_TOKENS, KiB, MiB, format_bytes

OURS = "ours"
TABLES = "tables"  # batch_memcpy over the spans that move, tables built on the host
TRITON_FUSED = "triton_fused"
COLUMNS = 6  # block-table columns a request uses: destination m - 1, sources m .. m + 2 (m <= 3)


@dataclass(frozen=True)
class SpecDecodeWorkload:
    name: str
    requests: int = 16
    layers: int = 36
    conv_bytes: int = 48 * KiB  # CONV_TOKENS tokens
    temporal_bytes: int = 1 * MiB
    max_drafts: int = 3
    block_size: int = 64  # tokens per Mamba block
    seed: int = 0
    note: str = ""

    @property
    def entries(self):
        return self.requests * 2 * self.layers

    def plan(self):
        """Per request: (drafts, accepted, computed, m, bias or None); m - 1 is the destination column
        and m the running state's. Even requests cross a block boundary, odd ones do not."""
        rng = random.Random(self.seed)
        out = []
        for r in range(self.requests):
            drafts = rng.randint(1, self.max_drafts)
            accepted = rng.randint(1, drafts + 1)
            m = rng.randint(1, 3)
            boundary = m * self.block_size
            if r % 2 == 0:  # running = computed + 1 <= boundary <= running + accepted - 1
                bias = rng.randint(0, accepted - 1)
                out.append((drafts, accepted, boundary - bias - 1, m, bias))
            else:
                out.append((drafts, accepted, boundary, m, None))
        return out

    @property
    def total_bytes(self):
        token = self.conv_bytes // CONV_TOKENS
        return sum(self.layers * (self.temporal_bytes + self.conv_bytes - bias * token)
                   for *_, bias in self.plan() if bias is not None)

    def describe(self):
        return (f"{self.requests} req, MTP 1-{self.max_drafts}, half crossing a block: {self.layers} x "
                f"({format_bytes(self.conv_bytes)} conv + {format_bytes(self.temporal_bytes)} temporal)")

    def scaled(self, scale):
        if scale >= 1:
            return self
        token = max(64, int(self.conv_bytes * scale) // CONV_TOKENS // 64 * 64)
        return replace(self, conv_bytes=token * CONV_TOKENS,
                       temporal_bytes=max(4 * KiB, int(self.temporal_bytes * scale) // 64 * 64))


def named_workloads():
    return {"spec_decode": SpecDecodeWorkload("spec_decode", note="vLLM's spec-decode postprocess step")}


class SpecDecodeBuffers:
    """Pools, per rotation set a block table (blocks distinct over every set), the shared counts, and
    the expected pools and counts after every set ran once."""

    def __init__(self, wl, device, rotations, seed=0):
        self.wl, self.device = wl, torch.device(device)
        plan = wl.plan()
        used = sum(1 + (0 if bias is None else bias + 1) for *_, bias in plan)
        blocks = used * rotations
        token = wl.conv_bytes // CONV_TOKENS
        self.conv = torch.empty((wl.layers, blocks, wl.conv_bytes), dtype=torch.uint8, device=device)
        self.temporal = torch.empty((wl.layers, blocks, wl.temporal_bytes), dtype=torch.uint8, device=device)
        self.states = [self.conv[i].view(blocks, CONV_TOKENS, token) for i in range(wl.layers)]
        self.states += [self.temporal[i] for i in range(wl.layers)]
        self.kinds = ["conv_sd"] * wl.layers + ["whole"] * wl.layers
        self.token_bytes = [token] * wl.layers + [0] * wl.layers
        ids = torch.randperm(blocks, generator=torch.Generator().manual_seed(seed)).tolist()
        self.tables, self.copies = [], []  # copies: (src block, dst block, bias) per crossing request
        for _ in range(rotations):
            table = torch.full((wl.requests, COLUMNS), -1, dtype=torch.int32)
            for r, (_, _, _, m, bias) in enumerate(plan):
                if bias is None:
                    continue
                for col in range(m - 1, m + bias + 1):
                    table[r, col] = ids.pop()
                self.copies.append((int(table[r, m]), int(table[r, m + bias]), int(table[r, m - 1]), bias))
            self.tables.append(table.to(device))
        as_ints = lambda values: torch.tensor(values, dtype=torch.int32, device=device)  # noqa: E731
        self.accepted = as_ints([p[1] for p in plan])
        self.state_idx = as_ints([p[3] for p in plan])
        self.computed = as_ints([p[2] for p in plan])
        self.drafts = as_ints([p[0] for p in plan])
        self.scheduled = self.drafts + 1
        self.outs = [torch.empty_like(self.accepted) for _ in range(rotations)]
        self.inputs = (self.accepted, self.state_idx, self.scheduled, self.computed, self.drafts)

    def fill(self):
        for pool in (self.conv, self.temporal):
            pool.copy_(random_bytes(pool.shape, pool.device))
        self.pristine = (self.conv.clone(), self.temporal.clone())
        conv, temporal = (t.clone() for t in self.pristine)
        shift = self.wl.conv_bytes // CONV_TOKENS
        for conv_src, whole_src, dst, bias in self.copies:
            keep = self.wl.conv_bytes - bias * shift
            conv[:, dst, :keep] = self.pristine[0][:, conv_src, bias * shift:]
            temporal[:, dst] = self.pristine[1][:, whole_src]
        self.expected = (conv, temporal)

    def poison(self):
        self.conv.copy_(self.pristine[0])
        self.temporal.copy_(self.pristine[1])
        for out in self.outs:
            out.fill_(-7)

    def check(self):
        problems = []
        for name, pool, exp in (("conv", self.conv, self.expected[0]), ("temporal", self.temporal, self.expected[1])):
            bad = pool != exp
            if bool(bad.any()):
                problems.append(f"{name} pools: {int(bad.sum())} bytes wrong in {int(bad.any(-1).sum())} blocks")
        # No request's running state is already in its destination block: every count is carried over.
        if any(not torch.equal(out, self.accepted) for out in self.outs):
            problems.append("num_accepted_out differs from num_accepted")
        return "; ".join(problems) or None


def _ours(op, b):
    wl = b.wl
    return [lambda t=t, out=out: op.mamba_spec_decode_postprocess_(
        b.states, b.kinds, [0] * len(b.states), [t], wl.block_size, wl.requests, b.accepted, b.state_idx,
        b.computed, out, num_scheduled=b.scheduled, num_draft=b.drafts) for t, out in zip(b.tables, b.outs)]


def spans(b):
    """Per rotation set, (sources, destinations): views of exactly the spans the step moves, in the op's
    entry order (per request: conv states, then temporal), as the host would work them out."""
    wl = b.wl
    token = wl.conv_bytes // CONV_TOKENS
    per_set = len(b.copies) // len(b.tables)
    sets = []
    for k in range(len(b.tables)):
        srcs, dsts = [], []
        for conv_src, whole_src, dst, bias in b.copies[k * per_set:(k + 1) * per_set]:
            srcs += [b.conv[i, conv_src, bias * token:] for i in range(wl.layers)]
            dsts += [b.conv[i, dst, :wl.conv_bytes - bias * token] for i in range(wl.layers)]
            srcs += [b.temporal[i, whole_src] for i in range(wl.layers)]
            dsts += [b.temporal[i, dst] for i in range(wl.layers)]
        sets.append((srcs, dsts))
    return sets


def _tables(op, b):
    """batch_memcpy over the spans (tables built on the host): what deciding on the device costs against
    the same bytes."""
    calls = []
    for srcs, dsts in spans(b):
        tables = (op.pointer_table(srcs), op.pointer_table(dsts), size_table(srcs, b.device))
        calls.append(lambda t=tables: op.batch_memcpy(*t))
    return calls


class PoolsOnly:
    """The check of a method that copies the pools and leaves the counts alone: each poisoning sets the
    counts to what the step leaves there (every one carried over), so only the pools are judged."""

    def __init__(self, buffers):
        self.buffers, self.device = buffers, buffers.device

    def poison(self):
        self.buffers.poison()
        for out in self.buffers.outs:
            out.copy_(self.buffers.accepted)

    def check(self):
        return self.buffers.check()


def _triton_fused(b):
    return [triton_spec_decode.fused_postprocess_call(b.states, b.token_bytes, [0] * len(b.states), t,
                                                      b.wl.block_size, b.inputs, out)
            for t, out in zip(b.tables, b.outs)]


def run_workload(wl, builds, with_triton, wanted, dev, rotations, measure, span_methods=()):
    """The workload's result in run.py's form. builds: (key, label, module, import error) of each build of
    the op to time (ours, and a baseline); span_methods: pointer-table methods (peers.Method) timed over
    the same spans as `tables`; measure(candidates) verifies and times methods together (run.py's
    _measure)."""
    result = {"name": wl.name, "description": wl.describe(), "entries": wl.entries,
              "total_bytes": wl.total_bytes, "rotations": rotations, "methods": []}
    roof = Roofline(wl.total_bytes, rotations, dev)
    result["methods"] += measure([(ROOFLINE, roof.label, roof.calls, roof)])
    del roof
    buffers = SpecDecodeBuffers(wl, dev, rotations)
    buffers.fill()
    pools_only = PoolsOnly(buffers)
    methods = []
    for key, label, op, error in builds:
        if op is None:
            op = ImportFailed(error)
        methods.append((key, f"{label}: mamba_spec_decode_postprocess_", lambda op=op: _ours(op, buffers), buffers))
        if key == OURS:
            methods.append((TABLES, f"{label}: batch_memcpy, the same spans", lambda op=op: _tables(op, buffers),
                            pools_only))
    if with_triton:
        methods.append((TRITON_FUSED, "Triton, vLLM's fused design", lambda: _triton_fused(buffers), buffers))
    for m in span_methods:
        methods.append((m.key, f"{m.label}, the same spans", lambda m=m: m.build(spans(buffers), dev), pools_only))
    result["methods"] += measure([candidate(*m) for m in methods if wanted is None or m[0] in wanted])
    return result
