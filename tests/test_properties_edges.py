"""Property tests at the limits of the value ranges, on every target: block ids and shifts at the int32 and
int64 limits (and shifts whose product with a state's token size wraps int64), meta and fake tensors, and
address tables near 0 and 2**64. Same profiles as test_properties.py (XPU_STATE_COPY_PROPERTY_EXAMPLES=N)."""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import xpu_state_copy
from batches import assert_matches
from conftest import synchronize
from test_copy_states import _reference
from test_properties import PROFILE, _storage_bytes, batches, requests, state_pools

INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)


def _token_bytes(view, kind):
    return view.shape[2] * view.element_size() if kind == "conv_sd" else view.element_size()


@st.composite
def extreme_shift(draw, token_bytes, lo, hi):
    """A shift at the limits: the dtype's extremes, powers of two, or one that wraps shift * token_bytes
    to a small number (the product the kernel used to compute)."""
    candidates = [hi, hi - 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**60 - 1, 0, 1]
    for tb in token_bytes:
        for wrap_to in (-64, -16, -1, 1, 16):
            candidates.append((2**64 + wrap_to) // tb)
            candidates.append((2**63 + wrap_to) // tb)
    candidates = [c for c in candidates if lo <= c <= hi]
    return draw(st.one_of(st.sampled_from(candidates), st.integers(0, 10), st.integers(lo, hi)))


@st.composite
def extreme_id(draw, blocks, lo, hi):
    return draw(st.sampled_from([lo, hi, -2, blocks, blocks + 1, 2**31 - 1, -2**31, 2**32]
                                + ([2**62, -2**62] if hi > 2**31 else [])).filter(lambda v: lo <= v <= hi))


@PROFILE
@given(data=st.data())
def test_copy_states_with_ids_and_shifts_at_the_limits(target, data):
    """Valid requests mixed with requests carrying extreme values. A shift that leaves nothing (however
    large) copies nothing; an invalid block id or a negative shift is refused on the CPU (ids are read
    there) and skipped by the kernel on an accelerator. Every byte of every storage is compared."""
    blocks = data.draw(st.integers(1, 12))
    storages, views, kinds = data.draw(state_pools(target.device, blocks))
    src, dst, shifts = data.draw(requests(blocks))
    id_dtype = data.draw(st.sampled_from([torch.int32, torch.int64]))
    lo, hi = INT32 if id_dtype == torch.int32 else INT64
    token_bytes = sorted({_token_bytes(v, k) for v, k in zip(views, kinds) if k != "whole"}) or [1]
    # Shifts whose product with a real token size wraps int64 to a small negative number: the row would grow
    # by that much (int64 ids only: an int32 shift times a token size cannot wrap).
    wrapping = [(2**64 + w) // tb for tb in token_bytes for w in (-64, -16, -1) if (2**64 + w) // tb <= hi] or [hi]
    # Half the examples keep every id valid, so that the CPU, which refuses invalid ids, copies too.
    choices = ["keep", "shift", "wrap", "wrap"] + (["neg_shift", "src", "dst"] if data.draw(st.booleans()) else [])
    for r in range(len(src)):
        what = data.draw(st.sampled_from(choices))
        if what == "wrap":
            shifts[r] = data.draw(st.sampled_from(wrapping))
        elif what == "shift":
            shifts[r] = data.draw(extreme_shift(token_bytes, 0, hi))
        elif what == "neg_shift":
            shifts[r] = data.draw(st.sampled_from([-1, lo, lo + 1, -2**31]).filter(lambda v: v >= lo))
        elif what in ("src", "dst"):
            (src if what == "src" else dst)[r] = data.draw(extreme_id(blocks, lo, hi))

    valid = [(0 <= s < blocks or s == -1) and (0 <= d < blocks or d == -1) and sh >= 0
             for s, d, sh in zip(src, dst, shifts)]
    ids = lambda v: torch.tensor(v, dtype=id_dtype, device=target.device)  # noqa: E731
    before = [_storage_bytes(s).copy() for s in storages]
    if target.device.type == "cpu" and not all(valid):
        with pytest.raises(RuntimeError, match=r"is not a block id|is negative"):
            xpu_state_copy.copy_states_(views, kinds, ids(src), ids(dst), ids(shifts))
        for storage, b in zip(storages, before):
            assert np.array_equal(_storage_bytes(storage), b), "bytes moved before the error"
        return

    kept = [(s, d, sh) for s, d, sh, ok in zip(src, dst, shifts, valid) if ok and s >= 0 and d >= 0]
    values = _reference(views, kinds, [k[0] for k in kept], [k[1] for k in kept], [k[2] for k in kept])
    expected = []
    for storage, view, value in zip(storages, views, values):
        host = storage.cpu().clone()
        host.as_strided(view.shape, view.stride()).copy_(value)
        expected.append(_storage_bytes(host))
    xpu_state_copy.copy_states_(views, kinds, ids(src), ids(dst), ids(shifts))
    synchronize(target.device)
    for j, (storage, want) in enumerate(zip(storages, expected)):
        bad = (_storage_bytes(storage) != want).nonzero()[0]
        assert bad.size == 0, (f"state {j} ({kinds[j]}, {tuple(views[j].shape)}): {bad.size} bytes differ, "
                               f"first at byte {bad[0]}; src={src} dst={dst} shifts={shifts}")


# ------------------------------------------------------------------------ addresses near 0 and near 2**64

NEAR_EDGES = st.one_of(st.integers(0, 4096), st.integers(2**64 - 4096, 2**64 - 1), st.just(2**63))


def _set_entry(table, i, address):
    host = table.cpu().view(torch.int64)
    host[i] = xpu_state_copy.as_signed(address)
    table.copy_(host.view(table.dtype).to(table.device))


@PROFILE
@given(data=st.data())
def test_addresses_near_0_and_2_64(target, data):
    """A random valid batch plus wild entries. With nothing to copy an entry may hold any address (it is
    never dereferenced); with bytes to copy, a null address or one whose range reaches 2**64 is refused
    (CPU tables always; accelerator tables in validate mode) before any byte moves."""
    batch = data.draw(batches(target.device))
    if not batch.entries:
        return
    src, dst, sizes = batch.tables()
    i = data.draw(st.integers(0, len(batch.entries) - 1))
    which = data.draw(st.sampled_from(["src", "dst"]))
    poison = data.draw(st.booleans())
    host_sizes = sizes.cpu()
    if poison:
        size = data.draw(st.integers(1, 2**31 - 1))
        address = data.draw(st.one_of(st.just(0), st.integers(2**64 - size, 2**64 - 1)))
        host_sizes[i] = size
    else:
        address = data.draw(NEAR_EDGES)
        host_sizes[i] = 0
        batch.entries[i].size = 0
    sizes.copy_(host_sizes.to(sizes.device))
    _set_entry(src if which == "src" else dst, i, address)
    expected = batch.expected()
    untouched = batch.arena.cpu().numpy().copy()
    if not poison:
        xpu_state_copy.batch_memcpy(src, dst, sizes)
        synchronize(target.device)
        assert_matches(batch, expected)
        return
    name = "src_ptrs" if which == "src" else "dst_ptrs"
    if target.device.type == "cpu":
        with pytest.raises(RuntimeError, match=rf"{name}\[\d+\] (is a null address|= 0x[0-9a-f]+ \+ \d+ bytes "
                                               r"wraps past 2\*\*64)"):
            xpu_state_copy.batch_memcpy(src, dst, sizes)
    with pytest.raises(xpu_state_copy.UnsafeBatch, match=r"is null|wraps past 2\*\*64"):
        xpu_state_copy.validate_batch(src, dst, sizes)
    synchronize(target.device)
    assert np.array_equal(batch.arena.cpu().numpy(), untouched), "bytes moved before the error"


# ----------------------------------------------------------------------------------- meta and fake tensors


@PROFILE
@given(data=st.data())
def test_meta_and_fake_tensors(target, data):
    """One argument moved to the meta device raises naming it; every argument as a fake tensor (what
    torch.compile traces with) runs the fake implementation and touches nothing."""
    batch = data.draw(batches(target.device))
    tables = list(batch.tables())
    untouched = batch.arena.cpu().numpy().copy()
    k = data.draw(st.integers(0, 2))
    names = ["src_ptrs", "dst_ptrs", "sizes"]
    mixed = list(tables)
    mixed[k] = mixed[k].to("meta")
    pattern = (r"(dst_ptrs|sizes) is on (cpu|cuda|xpu)\S* but src_ptrs is on meta" if k == 0
               else rf"{names[k]} is on meta but src_ptrs is on")
    with pytest.raises(RuntimeError, match=pattern):
        torch.ops.xpu_state_copy.batch_memcpy(*mixed)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(t) for t in tables]
        torch.ops.xpu_state_copy.batch_memcpy(*fakes)
    synchronize(target.device)
    assert np.array_equal(batch.arena.cpu().numpy(), untouched)
