"""batch_memcpy against the memmove reference, on every target (native CPU, SYCL CPU device, CUDA, XPU)."""
import random

import pytest
import torch

import xpu_state_copy
from batches import EDGE_SIZES, Entry, assert_matches, random_batch
from conftest import synchronize


def _sizes_for(n, rng):
    """n sizes that cycle through the edge sizes but keep the arena bounded for large n."""
    small = [s for s in EDGE_SIZES if s < 65536]
    return [EDGE_SIZES[i % len(EDGE_SIZES)] if i < 2 * len(EDGE_SIZES) else rng.choice(small) for i in range(n)]


def _run(batch, device):
    expected = batch.expected()
    src, dst, sizes = batch.tables()
    xpu_state_copy.batch_memcpy(src, dst, sizes)
    synchronize(device)
    assert_matches(batch, expected)


@pytest.mark.parametrize("n", [0, 1, 7, 311])
@pytest.mark.parametrize("table_dtype", [torch.uint64, torch.int64])
@pytest.mark.parametrize("size_dtype", [torch.int32, torch.int64])
def test_matches_memmove_reference(target, n, table_dtype, size_dtype):
    rng = random.Random()  # fresh inputs every run: the kernel must be right for any valid batch
    batch = random_batch(rng, target.device, _sizes_for(n, rng), overlap_every=5,
                         table_dtype=table_dtype, size_dtype=size_dtype)
    _run(batch, target.device)


OVERLAPS = [(size, shift) for size in (2, 17, 4095, 64 * 1024 + 3, (1 << 20) + 7)
            for shift in (1, 2, 8, 16, 4096) if shift < size]


@pytest.mark.parametrize("size,shift", OVERLAPS)
@pytest.mark.parametrize("direction", ["left", "right"])
def test_overlapping_entry_is_a_memmove(target, size, shift, direction):
    rng = random.Random()
    batch = random_batch(rng, target.device, [size])
    e = batch.entries[0]
    lo = 8 + rng.randrange(16)
    e.src, e.dst = (lo + shift, lo) if direction == "left" else (lo, lo + shift)
    _run(batch, target.device)


def test_every_alignment_pair(target):
    """All 16 x 16 source/destination offsets in one batch, sizes that need head, body and tail."""
    rng = random.Random()
    sizes = [rng.choice([33, 100, 4099]) for _ in range(256)]
    batch = random_batch(rng, target.device, sizes)
    cursor = 0
    for i, e in enumerate(batch.entries):
        e.src = cursor + i // 16
        e.dst = cursor + 4200 + i % 16
        cursor += 8500
    batch.arena = torch.randint(0, 256, (cursor + 64,), dtype=torch.uint8).to(target.device)
    _run(batch, target.device)


def _pairs_batch(rng, device, sizes, gap=48):
    """One entry per (source mod 16, destination mod 16) pair and size, far enough apart not to overlap.
    Whatever the arena's own alignment, the 256 offset pairs map onto all 256 address pairs mod 16."""
    entries, cursor = [], 0
    for size in sizes:
        for pair in range(256):
            src = cursor + pair // 16
            dst = src - pair // 16 + size + gap + pair % 16
            entries.append(Entry(src=src, dst=dst, size=size))
            cursor = dst - pair % 16 + size + gap
    batch = random_batch(rng, device, [])
    batch.entries = entries
    batch.arena = torch.randint(0, 256, (cursor + 64,), dtype=torch.uint8).to(device)
    return batch


def test_every_alignment_pair_every_size_to_300(target):
    """Every (src mod 16, dst mod 16) pair at every size 0..300: heads, shifted words and tails of every
    length (the mismatched pairs take the shifted 16-byte path)."""
    rng = random.Random()
    batch = _pairs_batch(rng, target.device, range(0, 301))
    _run(batch, target.device)


@pytest.mark.parametrize("size", [8192 - 1, 8192 * 3 + 5, 12345, 100_003])
def test_every_alignment_pair_large(target, size):
    """The same pairs for sizes of one to a dozen copy units (8 KiB each)."""
    _run(_pairs_batch(random.Random(), target.device, [size], gap=16 + random.randrange(16)), target.device)


@pytest.mark.parametrize("size", [33, 300, 8192 * 2 + 77, 70001])
@pytest.mark.parametrize("direction", ["left", "right"])
def test_overlapping_entries_at_every_offset_mismatch(target, size, direction):
    """Overlapping entries (memmove) whose shift is every residue mod 16, from every destination offset:
    the ordered walk through the shifted 16-byte path."""
    rng = random.Random()
    entries, cursor = [], 0
    for shift in range(1, 33):
        lo = cursor + rng.randrange(16)
        src, dst = (lo + shift, lo) if direction == "left" else (lo, lo + shift)
        entries.append(Entry(src=src, dst=dst, size=size))
        cursor = lo + size + shift + 48
    batch = random_batch(rng, target.device, [])
    batch.entries = entries
    batch.arena = torch.randint(0, 256, (cursor + 64,), dtype=torch.uint8).to(target.device)
    _run(batch, target.device)


def test_many_entries_share_the_groups(target):
    """More entries than any work-group tile, each tiny: the per-tile scan and unit hand-out."""
    rng = random.Random()
    batch = random_batch(rng, target.device, [rng.randrange(0, 300) for _ in range(5000)],
                         size_dtype=torch.int64)
    _run(batch, target.device)


def test_tiles_mixing_multi_unit_empty_and_overlapping_entries(target):
    """Several tiles of entries, where units carry over from tile to tile: runs of empty entries, entries
    of many copy units, in-place shifts, and tile boundaries falling inside each kind."""
    rng = random.Random()
    sizes = []
    for i in range(9000):
        kind = rng.random()
        if kind < 0.3:
            sizes.append(0)
        elif kind < 0.33:
            sizes.append(rng.randrange(8192, 70000))  # several units of the kernel
        else:
            sizes.append(rng.randrange(1, 600))
    batch = random_batch(rng, target.device, sizes, overlap_every=37, size_dtype=torch.int64)
    _run(batch, target.device)


def test_tiles_left_empty_by_the_first_units_between_tiles_with_more(target):
    """More entries than the grid has sub-groups (70,000: more than a large CPU's or the H200's grid), so
    each entry's first unit is copied before any scan, and a tile whose entries were all one unit long is
    skipped by a group vote. Runs of multi-unit entries near entries 3000, 30000 and 69000 put tiles with
    units left before and between such skipped tiles (at 1024 - 8192 entries per tile), so the units
    carried over a skipped tile must still be dealt out right; empty entries and in-place shifts sit in
    every tile."""
    rng = random.Random()
    multi = set(range(3000, 3100)) | set(range(30000, 30050)) | set(range(69000, 69100))
    sizes = [rng.randrange(8193, 40000) if i in multi else rng.choice([0, rng.randrange(1, 300)])
             for i in range(70000)]
    batch = random_batch(rng, target.device, sizes, overlap_every=37, size_dtype=torch.int64)
    _run(batch, target.device)


@pytest.mark.parametrize("n, lone, size_dtype", [
    (70000, 7, torch.int32), (70000, 8, torch.int64), (70000, 1023, torch.int64), (70000, 4095, torch.int32),
    (3000, 2999, torch.int64), (2200, 1500, torch.int32)])
def test_first_tile_with_one_entry_of_two_units(target, n, lone, size_dtype):
    """The first tile's vote is taken on size words each work-item read during its last first unit. One
    entry of two units among n of at most one (exactly one unit beside empty and short ones) must stop that
    tile's skip wherever it sits: a work-item's last or first entry, a tile's last at 1024 or 4096 entries
    per tile, the batch's last. With 3000 or 2200 entries the batch is one tile (4096 entries on 512-wide
    groups) and, on a grid of 2112 sub-groups, some sub-groups copy two first units and the rest one.
    Every 41st entry longer than a byte is an in-place shift (at most one unit, copied whole with its
    first). The words are read from int32 and int64 sizes as they are."""
    rng = random.Random()
    sizes = [rng.choice([0, 8192, rng.randrange(1, 300)]) for _ in range(n)]
    sizes[lone] = rng.randrange(8193, 16385)
    batch = random_batch(rng, target.device, sizes, overlap_every=41, size_dtype=size_dtype)
    _run(batch, target.device)


@pytest.mark.parametrize("n, size_dtype", [(200, torch.int32), (240, torch.int64), (480, torch.int32),
                                           (1600, torch.int32), (2000, torch.int64), (2111, torch.int32)])
def test_entries_nearly_filling_the_grid(target, n, size_dtype):
    """Between three quarters of the grid's sub-groups and all of them (1,584 - 2,111 on an H200; a few
    hundred on a small CPU's SYCL grid) batch_memcpy's direct build has each sub-group copy the first two
    units of its entry before any scan, and the scan deals out only what is left: entries of up to two
    units (odd sizes, any offsets mod 16) are then done with no scan, longer ones and overlapping shifts
    among them are finished by it."""
    rng = random.Random()
    sizes = [rng.choice([0, rng.randrange(1, 8193), rng.randrange(8193, 16385), rng.randrange(16385, 60000)])
             for _ in range(n)]
    batch = random_batch(rng, target.device, sizes, overlap_every=29, size_dtype=size_dtype)
    _run(batch, target.device)


@pytest.mark.parametrize("n", [1, 2, 9, 40, 150])
def test_few_entries_of_many_units(target, n):
    """Fewer entries than the grid has sub-groups, most of them many copy units long, beside empty, short
    and overlapping ones: each sub-group schedules itself there (a direct unit, then its own share of the
    rest), and those shares must cover every byte once."""
    rng = random.Random()
    big = {1: 6 << 20, 2: 3 << 20, 9: 1 << 20, 40: 300 << 10, 150: 96 << 10}[n]
    sizes = [rng.randrange(big // 2, big) if rng.random() < 0.7 else rng.choice([0, 17, 8191, 8193, 20000])
             for _ in range(n)]
    batch = random_batch(rng, target.device, sizes, overlap_every=4, size_dtype=torch.int64)
    _run(batch, target.device)


def test_state_pool_block_copy(target):
    """The realistic shape: blocks of per-layer state pools, block src -> block dst in every pool."""
    pools = [torch.randn(6, 48 * 256 // 4, device=target.device) for _ in range(4)]  # 48 KiB blocks
    pools += [torch.randn(6, 1 << 16, device=target.device, dtype=torch.bfloat16) for _ in range(4)]  # 128 KiB
    before = [p.clone() for p in pools]
    src = xpu_state_copy.pointer_table([p[1] for p in pools])
    dst = xpu_state_copy.pointer_table([p[4] for p in pools])
    sizes = torch.tensor([p[0].numel() * p.element_size() for p in pools], dtype=torch.int32, device=target.device)
    xpu_state_copy.batch_memcpy(src, dst, sizes)
    synchronize(target.device)
    for p, b in zip(pools, before):
        expected = b.clone()
        expected[4] = b[1]
        assert torch.equal(p, expected)
