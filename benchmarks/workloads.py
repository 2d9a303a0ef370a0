"""Workload shapes and the buffers they copy between.

A workload mimics what vLLM's align-mode prefix caching copies: every layer owns
a pool ``[num_blocks, block_bytes]`` and a request crossing a block boundary
copies one block to another block in each pool.  Pools of one kind (say the 36
conv-state pools) live in one backing tensor ``[layers, num_blocks, block_bytes]``,
much as vLLM carves its per-layer caches out of one allocation.
"""
import math
import re
from dataclasses import dataclass, field

import torch

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

_UNITS = {"": 1, "B": 1, "K": KiB, "KB": KiB, "KIB": KiB, "M": MiB, "MB": MiB,
          "MIB": MiB, "G": GiB, "GB": GiB, "GIB": GiB}


def parse_bytes(text):
    """'48K' -> 49152, '1M' -> 1048576, '4096' -> 4096 (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ValueError(f"not a byte size: {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_bytes(n):
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


@dataclass(frozen=True)
class Term:
    """``layers`` pools whose blocks are ``block_bytes``; each request copies one
    block per pool; ``requests`` of them per call.  ``tokens`` > 0 makes the
    blocks conv states ``[tokens, block_bytes / tokens]`` (copy_states_'s
    "conv_sd"): with a shift of s tokens a request copies source tokens s.. to
    destination tokens 0.., so ``shift`` tokens fewer per entry."""
    layers: int
    block_bytes: int
    requests: int = 1
    tokens: int = 0
    shift: int = 0

    @property
    def entries(self):
        return self.layers * self.requests

    @property
    def shift_bytes(self):
        return self.shift * self.block_bytes // self.tokens if self.tokens else 0

    @property
    def entry_bytes(self):
        return self.block_bytes - self.shift_bytes


@dataclass
class Workload:
    name: str
    terms: list
    note: str = ""
    # copy_states_ workloads: a request's block ids are the same in every pool (as vLLM's block table
    # gives them), and copy_states_ itself is timed beside the pointer-table methods.
    states: bool = False

    @property
    def entries(self):
        return sum(t.entries for t in self.terms)

    @property
    def total_bytes(self):
        return sum(t.entries * t.entry_bytes for t in self.terms)

    def describe(self):
        parts = []
        for t in self.terms:
            reqs = f" x {t.requests} req" if t.requests > 1 else ""
            shift = f" shift {t.shift}" if t.shift else ""
            parts.append(f"{t.layers} x {format_bytes(t.block_bytes)}{shift}{reqs}")
        return " + ".join(parts)


def parse_spec(spec, requests=1):
    """'36x48K,36x1M' -> terms; each 'NxSIZE' is N pools copying one block per
    request, so the spec above with requests=16 is the step16 workload."""
    terms = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*(\S+)\s*", part)
        if not m:
            raise ValueError(f"bad spec term {part!r}: expected COUNTxSIZE, e.g. 36x48K")
        terms.append(Term(int(m.group(1)), parse_bytes(m.group(2)), requests))
    return terms


# Qwen3-Next-like states: a conv state of 3 tokens x 16 KiB (8192 bf16 channels) and a 1 MiB temporal state,
# 36 layers of each.
CONV_TOKENS = 3


def state_terms(requests, shift):
    return [Term(36, 48 * KiB, requests, tokens=CONV_TOKENS, shift=shift), Term(36, 1 * MiB, requests)]


def named_workloads():
    """The four shapes issue 4 sets targets for, then those of issue 18: odd sizes at mismatched offsets
    and copy_states_ itself."""
    step = parse_spec("36x48K,36x1M")
    named = {
        "step": Workload("step", step, "one Qwen3-Next-like request step"),
        "step16": Workload("step16", parse_spec("36x48K,36x1M", 16), "16 requests"),
        "tiny": Workload("tiny", [Term(1, 4 * KiB, 4096)], "many tiny entries"),
        "mixed": Workload("mixed", [Term(1, 256 * MiB), Term(1000, 8 * KiB)],
                          "one huge entry among small ones"),
        # Blocks of 12,345 bytes lie at 12,345-byte strides, so a source and a destination block differ
        # mod 16 unless their indices agree mod 16 (random blocks: 15 times in 16).
        "odd": Workload("odd", [Term(1, 12345, 2000)], "odd sizes, source and destination misaligned"),
    }
    for requests, name in ((1, "states"), (16, "states16")):
        for shift in (0, 1):
            key = name + ("_s1" if shift else "")
            named[key] = Workload(key, state_terms(requests, shift),
                                  f"copy_states_, {requests} request(s), conv shift {shift}", states=True)
    named["states64"] = Workload("states64", state_terms(64, 0), "copy_states_, 64 requests", states=True)
    return named


DEFAULT_WORKLOADS = "step,step16,tiny,mixed,odd,states,states_s1,states16,states16_s1,states64,spec_decode"


def scaled(workload, scale):
    """Shrink block sizes (never entry counts, which drive per-entry overhead)
    so slow devices finish quickly.  Blocks stay >= 4 KiB unless they were
    smaller, and 64-byte multiples so alignment matches the real shapes."""
    if scale >= 1:
        return workload
    terms = []
    for t in workload.terms:
        size = max(int(t.block_bytes * scale), min(t.block_bytes, 4 * KiB))
        size = max(64, size // 64 * 64) if t.block_bytes >= 64 else t.block_bytes
        if t.block_bytes % 16:  # an odd size is the point of its workload: keep it
            size = t.block_bytes
        if t.tokens:  # whole tokens of 64-byte multiples
            size = max(64, size // t.tokens // 64 * 64) * t.tokens
        terms.append(Term(t.layers, size, t.requests, t.tokens, t.shift))
    return Workload(workload.name, terms, workload.note, workload.states)


@dataclass
class Buffers:
    """Backing pools plus, per rotation set, the block pairs to copy.

    ``pairs[k][i]`` is (backing index, layer, src block, dst block) of entry i in
    set k.  Source and destination blocks are all distinct, so entries never
    overlap each other and the expected result does not depend on order."""
    workload: Workload
    device: torch.device
    rotations: int
    backing: list
    index: list = field(default_factory=list)  # per term: (src_idx, dst_idx) [layers, req*rot]

    def entry_views(self, k):
        """(src views, dst views) of rotation set k, in vLLM's order: request by
        request, then pool by pool."""
        srcs, dsts = [], []
        for r in range(max(t.requests for t in self.workload.terms)):
            for ti, t in enumerate(self.workload.terms):
                if r >= t.requests:
                    continue
                src_idx, dst_idx = self.index[ti]
                col = k * t.requests + r
                for layer in range(t.layers):
                    pool = self.backing[ti][layer]
                    srcs.append(pool[int(src_idx[layer, col])][t.shift_bytes:])
                    dsts.append(pool[int(dst_idx[layer, col])][:t.entry_bytes])
        return srcs, dsts

    def block_ids(self, k):
        """(src, dst) block ids of rotation set k, one per request (states workloads: the same in every
        pool), as int32 tensors on the device."""
        src_idx, dst_idx = self.index[0]
        t = self.workload.terms[0]
        cols = slice(k * t.requests, (k + 1) * t.requests)
        as_ids = lambda v: v[0, cols].to(torch.int32).to(self.device)  # noqa: E731
        return as_ids(src_idx), as_ids(dst_idx)

    def expected_after_all_sets(self):
        """Each backing tensor as it must look after every set was copied once."""
        out = []
        for ti, bk in enumerate(self.backing):
            src_idx, dst_idx = (i.to(bk.device) for i in self.index[ti])
            rows = torch.arange(bk.shape[0], device=bk.device)[:, None]
            t = self.workload.terms[ti]
            exp = bk.clone()
            exp[rows, dst_idx, :t.entry_bytes] = bk[rows, src_idx, t.shift_bytes:]
            out.append(exp)
        return out

    def nbytes(self):
        return sum(b.numel() for b in self.backing)


def rotation_count(workload, cache_bytes, max_rotations=16):
    """Enough disjoint buffer sets that one pass over them (read + write) spans
    >= 4x the last-level cache, so timings measure memory, not cache."""
    per_set = 2 * workload.total_bytes
    return max(1, min(max_rotations, math.ceil(4 * cache_bytes / per_set)))


def allocate(workload, device, rotations, seed=0):
    gen = torch.Generator().manual_seed(seed)
    backing, index = [], []
    shared = None
    for t in workload.terms:
        need = t.requests * rotations
        blocks = 2 * need
        backing.append(torch.empty((t.layers, blocks, t.block_bytes), dtype=torch.uint8,
                                   device=device))
        # Random distinct blocks per pool: first half of a permutation are
        # sources, second half destinations.  A states workload uses one
        # permutation for every pool (every term has the same requests).
        if workload.states:
            shared = torch.randperm(blocks, generator=gen) if shared is None else shared
            perm = shared.expand(t.layers, blocks)
        else:
            perm = torch.stack([torch.randperm(blocks, generator=gen) for _ in range(t.layers)])
        index.append((perm[:, :need].contiguous(), perm[:, need:].contiguous()))
    return Buffers(workload, torch.device(device), rotations, backing, index)
