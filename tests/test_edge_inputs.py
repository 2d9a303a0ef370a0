"""Inputs at the edges of the API, on every target: values that overflow 64-bit arithmetic, null and wrapping
addresses, meta tensors mixed with real ones, strided views handed to pointer_table, and write_pointers_
arguments that used to slip past its checks. Each must raise naming the argument, or copy nothing, and in
both cases leave every byte outside what a valid copy writes as it was."""
import random

import pytest
import torch

import xpu_state_copy
from batches import assert_matches, random_batch
from conftest import synchronize

# ------------------------------------------------------------------------- copy_states_: overflowing shifts


def _overflowing_shifts(token_bytes):
    """Shifts whose product with the token size wraps int64 to a small negative number (the row would grow
    by that many bytes) or to a small positive one, and the largest shifts of all."""
    wrap_to = [-16, -4, 4]
    return sorted({(2**64 + w) // token_bytes for w in wrap_to if (2**64 + w) // token_bytes < 2**63}
                  | {2**60 - 1, 2**62, 2**63 - 1})


@pytest.mark.parametrize("kind", ["conv_sd", "conv_ds"])
def test_huge_shift_copies_nothing(target, kind):
    """The issue's case: a [4, 4, 4] float pool, the state is its first 3 blocks, block 0 -> block 2 with a
    shift near 2**60. shift * token_bytes used to wrap, so the row grew and 16 bytes landed in pool[3]."""
    token_bytes = 4 * 4 if kind == "conv_sd" else 4
    for shift in _overflowing_shifts(token_bytes):
        pool = torch.randn(4, 4, 4, device=target.device)
        before = pool.clone()
        ids = lambda v: torch.tensor([v], dtype=torch.int64, device=target.device)  # noqa: E731
        xpu_state_copy.copy_states_([pool[:3]], [kind], ids(0), ids(2), ids(shift))
        synchronize(target.device)
        assert torch.equal(pool.cpu(), before.cpu()), f"shift {shift} ({kind}) changed the pool"


def test_huge_shift_next_to_valid_requests(target):
    """A request with an overflowing shift is skipped; the requests around it still copy."""
    pool = torch.randn(8, 4, 6, device=target.device)
    whole = torch.randn(8, 5, device=target.device)
    src, dst, shifts = [0, 2, 4], [1, 3, 5], [1, (2**64 - 16) // 24, 0]
    expected_pool, expected_whole = pool.cpu().clone(), whole.cpu().clone()
    expected_pool[1, :3] = expected_pool[0, 1:].clone()
    expected_pool[5] = expected_pool[4].clone()
    for s, d in zip(src, dst):  # whole states ignore the shift
        expected_whole[d] = expected_whole[s].clone()
    ids = lambda v: torch.tensor(v, dtype=torch.int64, device=target.device)  # noqa: E731
    xpu_state_copy.copy_states_([pool, whole], ["conv_sd", "whole"], ids(src), ids(dst), ids(shifts))
    synchronize(target.device)
    assert torch.equal(pool.cpu(), expected_pool)
    assert torch.equal(whole.cpu(), expected_whole)


# ------------------------------------------------------------------ batch_memcpy: null and wrapping addresses


def _poisoned(target, index, which, address, size):
    """A valid batch of three entries, entry `index` of table `which` replaced by `address` with `size`."""
    batch = random_batch(random.Random(), target.device, [100, 3000, 17])
    src, dst, sizes = batch.tables()
    table = {"src_ptrs": src, "dst_ptrs": dst}[which]
    host = table.cpu().view(torch.int64)
    host[index] = xpu_state_copy.as_signed(address)
    table.copy_(host.view(table.dtype).to(table.device))
    sizes[index] = size
    return batch, batch.arena.clone(), (src, dst, sizes)


BAD_ADDRESSES = [
    ("src_ptrs", 0, 16, r"src_ptrs\[1\] is a null address with sizes\[1\] = 16",
     r"entry 1: source address is null with 16 bytes"),
    ("dst_ptrs", 0, 1, r"dst_ptrs\[1\] is a null address with sizes\[1\] = 1",
     r"entry 1: destination address is null with 1 bytes"),
    ("src_ptrs", 2**64 - 8, 16, r"src_ptrs\[1\] = 0xfffffffffffffff8 \+ 16 bytes wraps past 2\*\*64",
     r"entry 1: source 0xfffffffffffffff8 \+ 16 bytes wraps past 2\*\*64"),
    ("dst_ptrs", 2**64 - 1, 3000, r"dst_ptrs\[1\] = 0xffffffffffffffff \+ 3000 bytes wraps past 2\*\*64",
     r"entry 1: destination 0xffffffffffffffff \+ 3000 bytes wraps past 2\*\*64"),
]


@pytest.mark.parametrize("which, address, size, message, validate_message", BAD_ADDRESSES)
def test_null_and_wrapping_addresses_are_refused(target, monkeypatch, which, address, size, message,
                                                 validate_message):
    """CPU tables are checked on every call (they used to end in SIGSEGV); tables on an accelerator are not
    read back, and validate mode (no bounds needed) refuses them there instead."""
    batch, untouched, tables = _poisoned(target, 1, which, address, size)
    if target.device.type == "cpu":
        with pytest.raises(RuntimeError, match=message):
            xpu_state_copy.batch_memcpy(*tables)
    monkeypatch.setenv("XPU_STATE_COPY_VALIDATE", "1")
    with pytest.raises(xpu_state_copy.UnsafeBatch, match=validate_message):
        xpu_state_copy.batch_memcpy(*tables)
    synchronize(target.device)
    assert torch.equal(batch.arena.cpu(), untouched.cpu()), "bytes moved before the error"


@pytest.mark.parametrize("address", [0, 8, 2**64 - 8, 2**63])
def test_size_zero_entries_never_dereference(target, address):
    """An entry with nothing to copy may carry any address, null and near 2**64 included."""
    batch, _, tables = _poisoned(target, 1, "src_ptrs", address, 0)
    batch.entries[1].size = 0
    expected = batch.expected()
    xpu_state_copy.batch_memcpy(*tables)
    synchronize(target.device)
    assert_matches(batch, expected)


# ------------------------------------------------------------------------------ meta tensors mixed with real


def test_meta_sizes_with_real_tables_raise(target):
    batch = random_batch(random.Random(), target.device, [100, 3000, 17])
    untouched = batch.arena.clone()
    src, dst, sizes = batch.tables()
    with pytest.raises(RuntimeError, match=r"sizes is on meta but src_ptrs is on (cpu|cuda|xpu)"):
        xpu_state_copy.batch_memcpy(src, dst, sizes.to("meta"))
    with pytest.raises(RuntimeError, match=r"dst_ptrs is on meta but src_ptrs is on (cpu|cuda|xpu)"):
        xpu_state_copy.batch_memcpy(src, dst.to("meta"), sizes)
    with pytest.raises(RuntimeError, match=r"dst_ptrs is on (cpu|cuda|xpu).* but src_ptrs is on meta"):
        torch.ops.xpu_state_copy.batch_memcpy(src.to("meta"), dst, sizes)
    synchronize(target.device)
    assert torch.equal(batch.arena.cpu(), untouched.cpu())


def test_meta_state_or_ids_in_copy_states_raise(target):
    pools = [torch.randn(4, 3, 8, device=target.device) for _ in range(3)]
    before = [p.clone() for p in pools]
    ids = lambda v, device=target.device: torch.tensor([v], device=device)  # noqa: E731
    kinds = ["whole", "conv_sd", "whole"]
    mixed = [pools[0], pools[1].to("meta"), pools[2]]
    with pytest.raises(RuntimeError, match=r"states\[1\] is on meta but states\[0\] is on (cpu|cuda|xpu)"):
        xpu_state_copy.copy_states_(mixed, kinds, ids(0), ids(1), ids(1))
    with pytest.raises(RuntimeError, match=r"src_blocks is on meta but states\[0\] is on (cpu|cuda|xpu)"):
        xpu_state_copy.copy_states_(pools, kinds, ids(0, "meta"), ids(1), ids(1))
    with pytest.raises(RuntimeError, match=r"shifts is on meta but states\[0\] is on (cpu|cuda|xpu)"):
        xpu_state_copy.copy_states_(pools, kinds, ids(0), ids(1), ids(1, "meta"))
    synchronize(target.device)
    assert all(torch.equal(p.cpu(), b.cpu()) for p, b in zip(pools, before))
    meta = [p.to("meta") for p in pools]  # all on meta: shapes only, nothing to copy, no error
    xpu_state_copy.copy_states_(meta, kinds, ids(0, "meta"), ids(1, "meta"), ids(1, "meta"))


def test_meta_tensor_in_write_pointers_raises(target):
    table = torch.zeros(4, dtype=torch.int64, device=target.device)
    with pytest.raises(RuntimeError, match=r"tensors\[0\] is on meta but table is on (cpu|cuda|xpu)"):
        xpu_state_copy.write_pointers_(table, [torch.empty(3, device="meta")], start=1)
    with pytest.raises(RuntimeError, match=r"table is on meta but tensors\[0\] is on (cpu|cuda|xpu)"):
        xpu_state_copy.write_pointers_(table.to("meta"), [torch.empty(3, device=target.device)], start=1)
    assert not table.cpu().any()
    xpu_state_copy.write_pointers_(table.to("meta"), [torch.empty(3, device="meta")], start=1)  # all meta: fine


# ------------------------------------------------------------------------- pointer_table of a strided view


def test_pointer_table_refuses_non_contiguous_tensors(target):
    """The README recipe (pointer_table of a block, st[0].nbytes bytes) on a padded pool: the block is a
    strided view, its address only its first element's; copying nbytes from there copies padding."""
    pool = torch.randn(4, 3, 8, device=target.device)[:, :, :6]
    assert not pool[1].is_contiguous()
    with pytest.raises(ValueError, match=r"tensors\[1\] is not contiguous \(shape \[3, 6\], stride \[8, 1\]\)"):
        xpu_state_copy.pointer_table([pool[0].contiguous(), pool[1]])
    table = xpu_state_copy.pointer_table([pool[0], pool[1]], allow_non_contiguous=True)  # sizes are then ours
    expected = [pool[0].data_ptr(), pool[1].data_ptr()]
    assert [xpu_state_copy.as_unsigned(v) for v in table.cpu().view(torch.int64).tolist()] == expected
    assert xpu_state_copy.pointer_table([pool[0].contiguous()]).numel() == 1


# ------------------------------------------------------------------------- write_pointers_: table and start


def test_write_pointers_checks_the_table_with_no_tensors(target):
    floats = torch.zeros(4, device=target.device)
    with pytest.raises(RuntimeError, match=r"table must be torch.uint64 or torch.int64, got Float"):
        xpu_state_copy.write_pointers_(floats, [], start=99)
    table = torch.zeros(4, dtype=torch.int64, device=target.device)
    with pytest.raises(RuntimeError, match=r"start = 99 with 0 tensors needs 99 entries but table has 4"):
        xpu_state_copy.write_pointers_(table, [], start=99)
    with pytest.raises(RuntimeError, match=r"start = -1 is negative"):
        xpu_state_copy.write_pointers_(table, [], start=-1)
    xpu_state_copy.write_pointers_(table, [], start=4)  # an empty write at the end is fine


@pytest.mark.parametrize("start", [2**63 - 1, 2**63 - 2, 2**62])
def test_write_pointers_start_near_int64_max(target, start):
    """start + n used to overflow in C++ before the bounds check, leaving the error to narrow()."""
    table = torch.zeros(4, dtype=torch.int64, device=target.device)
    tensors = [torch.empty(2, device=target.device), torch.empty(2, device=target.device)]
    with pytest.raises(RuntimeError, match=rf"start = {start} with 2 tensors needs {start + 2} entries but "
                                           r"table has 4"):
        xpu_state_copy.write_pointers_(table, tensors, start=start)
    assert not table.cpu().any()
