"""Bad arguments raise an error naming the argument and the value, before any byte moves."""
import random

import pytest
import torch

import xpu_state_copy
from batches import random_batch
from conftest import HAS_CUDA, HAS_XPU


def _batch(target):
    batch = random_batch(random.Random(), target.device, [100, 3000, 17])
    return batch, batch.arena.clone()


def _assert_rejected(batch, untouched, src, dst, sizes, pattern):
    with pytest.raises(RuntimeError, match=pattern):
        xpu_state_copy.batch_memcpy(src, dst, sizes)
    assert torch.equal(batch.arena.cpu(), untouched.cpu()), "bytes moved before the error"


def test_wrong_table_dtype(target):
    batch, untouched = _batch(target)
    src, dst, sizes = batch.tables()
    _assert_rejected(batch, untouched, src.view(torch.float64), dst, sizes,
                     r"src_ptrs must be torch.uint64 or torch.int64, got Double")
    _assert_rejected(batch, untouched, src, dst.view(torch.int32), sizes,
                     r"dst_ptrs must be 1-D|dst_ptrs must be torch.uint64 or torch.int64, got Int")


def test_wrong_sizes_dtype(target):
    batch, untouched = _batch(target)
    src, dst, sizes = batch.tables()
    _assert_rejected(batch, untouched, src, dst, sizes.to(torch.int16),
                     r"sizes must be torch.int32 or torch.int64, got Short")


def test_two_dimensional_table(target):
    batch, untouched = _batch(target)
    src, dst, sizes = batch.tables()
    _assert_rejected(batch, untouched, src, dst.reshape(3, 1), sizes, r"dst_ptrs must be 1-D, got shape \[3, 1\]")


def test_length_mismatch(target):
    batch, untouched = _batch(target)
    src, dst, sizes = batch.tables()
    _assert_rejected(batch, untouched, src, dst[:2], sizes, r"dst_ptrs has 2 entries but src_ptrs has 3")
    _assert_rejected(batch, untouched, src, dst, sizes[:1], r"sizes has 1 entries but src_ptrs has 3")


def test_non_contiguous_table(target):
    batch, untouched = _batch(target)
    src, dst, sizes = batch.tables()
    strided = torch.stack([src, src], dim=1).view(torch.int64)[:, 0]
    assert not strided.is_contiguous()
    _assert_rejected(batch, untouched, strided, dst, sizes, r"src_ptrs must be contiguous, got stride \[2\]")


def test_negative_size_on_host_sizes(target):
    if target.device.type != "cpu":
        pytest.skip("device-resident sizes are not read back (that would synchronize); see docs")
    batch, untouched = _batch(target)
    src, dst, sizes = batch.tables()
    sizes[1] = -5
    _assert_rejected(batch, untouched, src, dst, sizes, r"sizes\[1\] = -5 is negative")


@pytest.mark.skipif(not (HAS_CUDA or HAS_XPU), reason="needs an accelerator: tables on two different devices")
def test_tables_on_different_devices():
    device = "cuda" if HAS_CUDA else "xpu"
    arena = torch.randint(0, 256, (256,), dtype=torch.uint8, device=device)
    untouched = arena.clone()
    src = xpu_state_copy.pointer_table([arena[:8]])
    dst = xpu_state_copy.pointer_table([arena[64:]])
    sizes = torch.tensor([8], dtype=torch.int32, device=device)
    with pytest.raises(RuntimeError, match=r"dst_ptrs is on cpu but src_ptrs is on (cuda|xpu):0"):
        xpu_state_copy.batch_memcpy(src, dst.cpu(), sizes)
    with pytest.raises(RuntimeError, match=r"sizes is on cpu but src_ptrs is on (cuda|xpu):0"):
        xpu_state_copy.batch_memcpy(src, dst, sizes.cpu())
    assert torch.equal(arena, untouched)


def test_unknown_backend_variable(monkeypatch):
    monkeypatch.setenv("XPU_STATE_COPY_BACKEND", "fast")
    with pytest.raises(RuntimeError, match=r"XPU_STATE_COPY_BACKEND='fast' is not one of: auto, cpu, sycl"):
        xpu_state_copy.backend("cpu")
    t = torch.zeros(1, dtype=torch.int64)
    with pytest.raises(RuntimeError, match=r"XPU_STATE_COPY_BACKEND='fast'"):
        xpu_state_copy.batch_memcpy(t, t, torch.zeros(1, dtype=torch.int32))
