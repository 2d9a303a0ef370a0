"""Property tests: random batches against the memmove reference, and random state pools against plain torch
indexing, on every target (native CPU, SYCL CPU device, CUDA / XPU where present).

The whole arena (or the whole storage under the state pools) starts as random bytes and is compared byte
for byte afterwards, so a copy that writes outside its entry, or skips part of it, is caught.

Profiles: a bounded one by default (fast enough for CI); XPU_STATE_COPY_PROPERTY_EXAMPLES=N runs N
examples per test and target instead, e.g. once before a release:

    XPU_STATE_COPY_PROPERTY_EXAMPLES=5000 pytest tests/test_properties.py --hypothesis-show-statistics
"""
import os

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xpu_state_copy
from batches import Batch, Entry, assert_matches
from conftest import synchronize
from test_copy_states import _reference

_COMMON = dict(
    deadline=None,  # the first SYCL call of a process may build the kernel
    database=None,  # nothing written into the checkout; a failure prints its reproduction blob instead
    print_blob=True,
    # `target` is function scoped on purpose: it selects the backend once for all examples of the test.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("xsc-bounded", max_examples=300, **_COMMON)
_LONG = os.environ.get("XPU_STATE_COPY_PROPERTY_EXAMPLES")
if _LONG:
    settings.register_profile("xsc-long", max_examples=int(_LONG), **_COMMON)
PROFILE = settings.get_profile("xsc-long" if _LONG else "xsc-bounded")

# ---------------------------------------------------------------------------------------------- batch_memcpy

@st.composite
def entries(draw):
    """One entry as (size, src offset, dst offset, overlap): overlap is None, or ('left'|'right', shift).

    Mostly small sizes (head/tail handling, many entries per tile), some on word and chunk boundaries, and
    about one in fifty large (long enough to be split into several pieces)."""
    size = draw(st.one_of(st.integers(0, 64), st.integers(65, 9000),
                          st.sampled_from([0, 16, 4096, 8192 + 1, 64 * 1024 + 3])))
    if draw(st.integers(0, 49)) == 0:  # about one entry in fifty is large
        size = draw(st.integers(64 * 1024, (1 << 20) + 64))
    src_off, dst_off = draw(st.integers(0, 15)), draw(st.integers(0, 15))
    overlap = None
    if size > 1 and draw(st.booleans()) and draw(st.booleans()):  # a quarter of them shift in place
        shift = draw(st.one_of(st.integers(1, min(size - 1, 64)), st.integers(1, size - 1)))
        overlap = (draw(st.sampled_from(["left", "right"])), shift)
    return size, src_off, dst_off, overlap


def _align16(offset):
    return (offset + 15) // 16 * 16


@st.composite
def batches(draw, device):
    specs = draw(st.lists(entries(), min_size=0, max_size=40))
    order = draw(st.permutations(range(len(specs))))  # table order differs from arena order
    laid_out, cursor = [], draw(st.integers(0, 15))
    for size, src_off, dst_off, overlap in specs:
        if overlap is None:
            # Each side starts on a 16-byte boundary plus its own offset (the arena itself is 64-aligned),
            # with the source first or the destination first in memory; the second may start right where
            # the first ends (adjacent, not overlapping).
            first_off, second_off, src_first = (src_off, dst_off, True) if draw(st.booleans()) else (dst_off, src_off, False)
            first = _align16(cursor) + first_off
            second = _align16(first + size) + second_off
            src, dst = (first, second) if src_first else (second, first)
            cursor = second + size
        else:
            direction, shift = overlap
            lo = _align16(cursor) + src_off
            src, dst = (lo + shift, lo) if direction == "left" else (lo, lo + shift)
            cursor = lo + shift + size
        laid_out.append(Entry(src=src, dst=dst, size=size))
        cursor += draw(st.integers(0, 16))  # gap between entries: bytes nobody may touch
    seed = draw(st.integers(0, 2**31 - 1))
    arena = torch.randint(0, 256, (cursor + 32,), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
    table_dtype = draw(st.sampled_from([torch.uint64, torch.int64]))
    size_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    return Batch(arena.to(device), [laid_out[i] for i in order], table_dtype, size_dtype)


@PROFILE
@given(data=st.data())
def test_batch_memcpy_matches_memmove(target, data):
    batch = data.draw(batches(target.device))
    expected = batch.expected()
    src, dst, sizes = batch.tables()
    xpu_state_copy.batch_memcpy(src, dst, sizes)
    synchronize(target.device)
    assert_matches(batch, expected)


# ---------------------------------------------------------------------------------------------- copy_states_

# Element sizes 1, 2, 4, 8: the copy is by bytes, so integer dtypes stand in for every float of their size
# (and keep random bits free of NaN canonicalisation in the reference).
DTYPES = [torch.uint8, torch.int16, torch.int32, torch.int64]


@st.composite
def state_pools(draw, device, blocks):
    """A random number of pools of random kinds, each a strided view into its own random byte storage with
    padding after every block (and, for conv_ds, after every row); returns (storages, views, kinds)."""
    storages, views, kinds = [], [], []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["whole", "conv_sd", "conv_ds"]))
        dtype = draw(st.sampled_from(DTYPES))
        es = torch.tensor([], dtype=dtype).element_size()
        if kind == "whole":
            inner = draw(st.lists(st.integers(1, 9), min_size=1, max_size=3))
        else:
            inner = [draw(st.integers(1, 8)), draw(st.integers(1, 24))]  # tokens, dim (or dim, tokens)
        row_pad = draw(st.integers(0, 3)) if kind == "conv_ds" else 0
        rows = inner[0] if kind == "conv_ds" else 1
        row = inner[-1] + row_pad if kind == "conv_ds" else int(torch.tensor(inner).prod())
        block_elems = rows * row
        block_stride = block_elems + draw(st.integers(0, 5))
        total = blocks * block_stride
        seed = draw(st.integers(0, 2**31 - 1))
        raw = torch.randint(0, 256, (total * es,), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
        storage = raw.view(dtype).to(device)
        if kind == "conv_ds":
            view = storage.as_strided((blocks, inner[0], inner[1]), (block_stride, row, 1))
        elif kind == "conv_sd":
            view = storage.as_strided((blocks, inner[0], inner[1]), (block_stride, inner[1], 1))
        else:
            strides, acc = [], 1
            for n in reversed(inner):
                strides.insert(0, acc)
                acc *= n
            view = storage.as_strided([blocks] + inner, [block_stride] + strides)
        storages.append(storage)
        views.append(view)
        kinds.append(kind)
    return storages, views, kinds


@st.composite
def requests(draw, blocks):
    """Requests that touch disjoint blocks (as the op requires): moves, in-place shifts, and skips (-1)."""
    free = draw(st.permutations(range(blocks)))
    src, dst, shifts = [], [], []
    while len(free) >= 2 and draw(st.integers(0, 4)) != 0:
        how = draw(st.sampled_from(["move", "in_place", "skip_src", "skip_dst"]))
        a = free.pop()
        b = a if how == "in_place" else free.pop()
        s, d = {"move": (a, b), "in_place": (a, a), "skip_src": (-1, b), "skip_dst": (a, -1)}[how]
        src.append(s)
        dst.append(d)
        shifts.append(draw(st.integers(0, 10)))  # past the token count too: such requests copy nothing
    return src, dst, shifts


def _storage_bytes(t):
    return t.cpu().view(torch.uint8).numpy()


@PROFILE
@given(data=st.data())
def test_copy_states_matches_torch_indexing(target, data):
    blocks = data.draw(st.integers(1, 12))
    storages, views, kinds = data.draw(state_pools(target.device, blocks))
    src, dst, shifts = data.draw(requests(blocks))
    id_dtype = data.draw(st.sampled_from([torch.int32, torch.int64]))

    # Expected storage: the reference's values written through the same view of a host copy, so the
    # padding between blocks and rows must come out unchanged.
    values = _reference(views, kinds, src, dst, shifts)
    expected = []
    for storage, view, value in zip(storages, views, values):
        host = storage.cpu().clone()
        host.as_strided(view.shape, view.stride()).copy_(value)
        expected.append(host)

    ids = lambda v: torch.tensor(v, dtype=id_dtype, device=target.device)  # noqa: E731
    xpu_state_copy.copy_states_(views, kinds, ids(src), ids(dst), ids(shifts))
    synchronize(target.device)
    for j, (storage, want) in enumerate(zip(storages, expected)):
        got, ref = _storage_bytes(storage), _storage_bytes(want)
        bad = (got != ref).nonzero()[0]
        assert bad.size == 0, (f"state {j} ({kinds[j]}, {tuple(views[j].shape)}, strides {views[j].stride()}):"
                               f" {bad.size} bytes differ, first at byte {bad[0]}; src={src} dst={dst} "
                               f"shifts={shifts}")
