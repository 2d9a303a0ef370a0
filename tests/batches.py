"""Random copy batches laid out in one byte arena, and the memmove reference they must match."""
import dataclasses
import random
from typing import List

import numpy as np
import torch

import xpu_state_copy

# Sizes the issue calls out: empty, tiny, around the 16-byte word, page-ish and chunk-crossing large ones.
EDGE_SIZES = [0, 1, 3, 15, 16, 17, 4095, 64 * 1024 + 3, (1 << 20) + 7]


@dataclasses.dataclass
class Entry:
    src: int  # offsets into the arena
    dst: int
    size: int


@dataclasses.dataclass
class Batch:
    arena: torch.Tensor  # uint8, on the target device, random bytes
    entries: List[Entry]
    table_dtype: torch.dtype = torch.uint64
    size_dtype: torch.dtype = torch.int32

    def tables(self):
        base = xpu_state_copy.pointer_table([self.arena]).cpu().view(torch.int64).item()
        base = xpu_state_copy.as_unsigned(base)
        src = [xpu_state_copy.as_signed(base + e.src) for e in self.entries]
        dst = [xpu_state_copy.as_signed(base + e.dst) for e in self.entries]
        dev = self.arena.device
        as_table = lambda v: torch.tensor(v, dtype=torch.int64).view(self.table_dtype).to(dev)  # noqa: E731
        sizes = torch.tensor([e.size for e in self.entries], dtype=self.size_dtype).to(dev)
        return as_table(src), as_table(dst), sizes

    def expected(self) -> np.ndarray:
        """memmove applied entry by entry on a host copy (entries are disjoint, so order is irrelevant)."""
        ref = self.arena.cpu().numpy().copy()
        for e in self.entries:
            ref[e.dst:e.dst + e.size] = ref[e.src:e.src + e.size].copy()
        return ref


def random_batch(rng: random.Random, device, sizes, *, overlap_every=0, table_dtype=torch.uint64,
                 size_dtype=torch.int32) -> Batch:
    """Entries of the given sizes at random offsets 0..15 on both sides; every `overlap_every`-th entry
    (if set) is an in-place shift left or right by a random amount, the rest are disjoint."""
    entries, cursor = [], 0
    for i, size in enumerate(sizes):
        if overlap_every and i % overlap_every == 0 and size > 1:
            shift = rng.choice([1, 2, 7, 16, 64, max(1, size // 3)])
            shift = min(shift, size - 1)
            lo = cursor + rng.randrange(16)
            left = rng.random() < 0.5
            entries.append(Entry(src=lo + shift, dst=lo, size=size) if left else Entry(src=lo, dst=lo + shift, size=size))
            cursor = lo + size + shift + 16
        else:
            src = cursor + rng.randrange(16)
            dst = src + size + 16 + rng.randrange(16)
            entries.append(Entry(src=src, dst=dst, size=size))
            cursor = dst + size + 16
    arena = torch.randint(0, 256, (cursor + 64,), dtype=torch.uint8, generator=torch.Generator().manual_seed(rng.randrange(2**31)))
    return Batch(arena.to(device), entries, table_dtype, size_dtype)


def assert_matches(batch: Batch, expected: np.ndarray):
    got = batch.arena.cpu().numpy()
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, f"{bad.size} bytes differ from the memmove reference; first at offset {bad[0]}"
