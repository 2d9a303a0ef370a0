"""Validate mode: prove a batch_memcpy batch is safe before it runs.

A copy kernel that takes raw addresses corrupts memory silently when handed a bad table. Validation reads
the tables back to the host (so it synchronizes with the device, which is why it is opt-in) and checks:

* every size is >= 0, no address with bytes to copy is null, and no [address, address + size) wraps past
  2**64;
* with `bounds`, every source and destination range lies inside the storage of one of the bound tensors;
* no two entries' destination ranges overlap, and no destination overlaps another entry's source
  (an entry may overlap itself: that is a memmove).

Errors name the entry index and the addresses in hex. Address arithmetic is done on numpy uint64.
"""
import bisect
import os
from typing import Optional, Sequence

import numpy as np  # a declared dependency; uint64 arithmetic that torch tensors lack
import torch

ENV_VAR = "XPU_STATE_COPY_VALIDATE"


class UnsafeBatch(ValueError):
    """A batch that would copy outside its bounds, wrap around, or race with itself."""


def requested() -> bool:
    """True when XPU_STATE_COPY_VALIDATE=1 asks every batch_memcpy to be validated."""
    return os.environ.get(ENV_VAR, "0") not in ("", "0", "false", "no")


def _addresses(table: torch.Tensor) -> np.ndarray:
    return table.detach().cpu().contiguous().view(torch.int64).numpy().view(np.uint64)


def _hex_range(start, size) -> str:
    return f"[{int(start):#x}, {int(start) + int(size):#x})"


def _storage_ranges(bounds: Sequence[torch.Tensor]):
    """Sorted (start, end) of the bound tensors' storages, as Python ints (they may exceed 2**63)."""
    ranges = []
    for t in bounds:
        storage = t.untyped_storage()
        ranges.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
    return sorted(ranges)


def _check_inside(name, starts, sizes, ranges):
    lows = [lo for lo, _ in ranges]
    for i in np.flatnonzero(sizes > 0):
        start, end = int(starts[i]), int(starts[i]) + int(sizes[i])
        k = bisect.bisect_right(lows, start) - 1  # the last storage starting at or before `start`
        if k < 0 or end > max(hi for lo, hi in ranges[: k + 1] if lo <= start):
            raise UnsafeBatch(f"entry {i}: {name} range {_hex_range(start, sizes[i])} lies outside every "
                              f"bound tensor's storage")


def _check_disjoint(src, dst, sizes):
    live = np.flatnonzero(sizes > 0)
    order = live[np.argsort(dst[live], kind="stable")]
    ends = dst[order] + sizes[order].astype(np.uint64)
    clash = np.flatnonzero(dst[order][1:] < ends[:-1])
    if clash.size:
        a, b = order[clash[0]], order[clash[0] + 1]
        raise UnsafeBatch(f"entries {a} and {b}: destination ranges {_hex_range(dst[a], sizes[a])} and "
                          f"{_hex_range(dst[b], sizes[b])} overlap")
    # A destination against every other entry's source, in blocks to bound memory (O(n^2), a debug mode).
    s_lo, s_hi = src[live], src[live] + sizes[live].astype(np.uint64)
    for begin in range(0, live.size, 1024):
        idx = live[begin:begin + 1024]
        d_lo, d_hi = dst[idx][:, None], (dst[idx] + sizes[idx].astype(np.uint64))[:, None]
        hit = (d_lo < s_hi[None, :]) & (s_lo[None, :] < d_hi) & (idx[:, None] != live[None, :])
        if hit.any():
            r, c = np.argwhere(hit)[0]
            i, j = idx[r], live[c]
            raise UnsafeBatch(f"entry {i}: destination range {_hex_range(dst[i], sizes[i])} overlaps the source "
                              f"range {_hex_range(src[j], sizes[j])} of entry {j}")


def validate_batch(src_ptrs: torch.Tensor, dst_ptrs: torch.Tensor, sizes: torch.Tensor,
                   bounds: Optional[Sequence[torch.Tensor]] = None) -> None:
    """Raise UnsafeBatch if the batch is not provably safe (see the module docstring). Synchronizes."""
    src, dst = _addresses(src_ptrs), _addresses(dst_ptrs)
    n = sizes.detach().cpu().numpy().astype(np.int64)
    if not (src.shape == dst.shape == n.shape):
        raise UnsafeBatch(f"tables have {src.size}, {dst.size} and {n.size} entries; they must be equal")
    negative = np.flatnonzero(n < 0)
    if negative.size:
        raise UnsafeBatch(f"sizes[{negative[0]}] = {n[negative[0]]} is negative")
    for name, starts in (("source", src), ("destination", dst)):
        nulls = np.flatnonzero((n > 0) & (starts == 0))
        if nulls.size:
            i = nulls[0]
            raise UnsafeBatch(f"entry {i}: {name} address is null with {n[i]} bytes to copy")
        wraps = np.flatnonzero((n > 0) & (starts + n.astype(np.uint64) < starts))
        if wraps.size:
            i = wraps[0]
            raise UnsafeBatch(f"entry {i}: {name} {int(starts[i]):#x} + {n[i]} bytes wraps past 2**64")
    if bounds is not None:
        ranges = _storage_ranges(bounds)
        _check_inside("source", src, n, ranges)
        _check_inside("destination", dst, n, ranges)
    _check_disjoint(src, dst, n)
