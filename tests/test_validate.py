"""Validate mode rejects unsafe batches, naming the entry and the addresses, before anything is read."""
import pytest
import torch

import xpu_state_copy
from xpu_state_copy import UnsafeBatch, as_signed

HIGH = 0xFFFFD556B6400000  # an XPU-like address: never dereferenced here, the check rejects first


def _tables(src, dst, sizes):
    as_table = lambda v: torch.tensor([as_signed(a) for a in v], dtype=torch.int64).view(torch.uint64)  # noqa: E731
    return as_table(src), as_table(dst), torch.tensor(sizes, dtype=torch.int64)


def test_wrap_past_2_64_is_rejected():
    src, dst, sizes = _tables([2**64 - 10, HIGH], [HIGH + 4096, HIGH + 8192], [100, 16])
    with pytest.raises(UnsafeBatch, match=r"entry 0: source 0xfffffffffffffff6 \+ 100 bytes wraps past 2\*\*64"):
        xpu_state_copy.batch_memcpy(src, dst, sizes, bounds=[])


def test_range_outside_the_bounds_is_rejected():
    pool = torch.zeros(1024, dtype=torch.uint8)
    base = pool.data_ptr()
    src, dst, sizes = _tables([base, HIGH], [base + 512, base + 600], [64, 32])
    with pytest.raises(UnsafeBatch, match=r"entry 1: source range \[0xffffd556b6400000, 0xffffd556b6400020\) lies "
                                          r"outside every bound tensor's storage"):
        xpu_state_copy.batch_memcpy(src, dst, sizes, bounds=[pool])
    src, dst, sizes = _tables([base], [base + 1000], [64])  # runs 40 bytes past the end of the pool
    with pytest.raises(UnsafeBatch, match=r"entry 0: destination range .* lies outside"):
        xpu_state_copy.batch_memcpy(src, dst, sizes, bounds=[pool])
    assert int(pool.sum()) == 0


def test_overlapping_destinations_are_rejected():
    src, dst, sizes = _tables([HIGH, HIGH + 4096], [HIGH + 65536, HIGH + 65536 + 100], [256, 256])
    with pytest.raises(UnsafeBatch, match=r"entries 0 and 1: destination ranges \[0xffffd556b6410000, "
                                          r"0xffffd556b6410100\) and \[0xffffd556b6410064, 0xffffd556b6410164\) overlap"):
        xpu_state_copy.validate_batch(src, dst, sizes)


def test_destination_over_another_entrys_source_is_rejected():
    src, dst, sizes = _tables([HIGH, HIGH + 4096], [HIGH + 4096 + 8, HIGH + 65536], [64, 64])
    with pytest.raises(UnsafeBatch, match=r"entry 0: destination range .* overlaps the source range "
                                          r"\[0xffffd556b6401000, 0xffffd556b6401040\) of entry 1"):
        xpu_state_copy.validate_batch(src, dst, sizes)


def test_negative_size_is_rejected():
    src, dst, sizes = _tables([HIGH], [HIGH + 4096], [-3])
    with pytest.raises(UnsafeBatch, match=r"sizes\[0\] = -3 is negative"):
        xpu_state_copy.validate_batch(src, dst, sizes)


def test_safe_batch_passes_and_copies(target):
    pool = torch.randint(0, 256, (8192,), dtype=torch.uint8).to(target.device)
    expected = pool.cpu().clone()
    expected[4000:4000 + 1000] = expected[0:1000].clone()
    expected[5010:5010 + 3000] = expected[5012:5012 + 3000].clone()  # an entry overlapping itself: a memmove
    base = pool.data_ptr()
    src, dst, sizes = _tables([base, base + 5012], [base + 4000, base + 5010], [1000, 3000])
    dev = target.device
    xpu_state_copy.batch_memcpy(src.to(dev), dst.to(dev), sizes.to(dev), bounds=[pool])
    assert torch.equal(pool.cpu(), expected)


def test_environment_variable_validates_every_call(monkeypatch):
    pool = torch.zeros(64, dtype=torch.uint8)
    src, dst, sizes = _tables([pool.data_ptr()], [2**64 - 8], [16])
    monkeypatch.setenv("XPU_STATE_COPY_VALIDATE", "1")
    with pytest.raises(UnsafeBatch, match="wraps past 2"):
        xpu_state_copy.batch_memcpy(src, dst, sizes)
