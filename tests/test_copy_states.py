"""copy_states_ against a reference built from plain torch indexing, on every target."""
import random

import pytest
import torch

import xpu_state_copy
from conftest import synchronize

BLOCKS, TOKENS, DIM = 9, 4, 40


def _pools(device, dtype):
    """One pool of each kind, with padded block strides (and padded rows for DS), random contents."""
    g = torch.Generator().manual_seed(random.randrange(2**31))
    rand = lambda *shape: torch.randn(*shape, generator=g).to(dtype).to(device)  # noqa: E731
    whole = rand(BLOCKS, 3, 5, 7 + 1)[..., :7].contiguous()  # contiguous blocks
    whole_padded = rand(BLOCKS, 2 * 6 * 8 + 16)[:, : 2 * 6 * 8].view(BLOCKS, 2, 6, 8)
    conv_sd = rand(BLOCKS, TOKENS + 1, DIM)[:, :TOKENS]  # block stride padded, block contiguous
    conv_ds = rand(BLOCKS, DIM, TOKENS + 3)[:, :, :TOKENS]  # rows of TOKENS, row stride TOKENS + 3
    return [whole, whole_padded, conv_sd, conv_ds], ["whole", "whole", "conv_sd", "conv_ds"]


def _reference(states, kinds, src, dst, shifts):
    out = [s.cpu().clone() for s in states]
    for sb, db, sh in zip(src, dst, shifts):
        if sb < 0 or db < 0:
            continue
        for o, kind in zip(out, kinds):
            if kind == "whole":
                o[db] = o[sb].clone()
            elif kind == "conv_sd" and sh < o.shape[1]:
                o[db, : o.shape[1] - sh] = o[sb, sh:].clone()
            elif kind == "conv_ds" and sh < o.shape[2]:
                o[db, :, : o.shape[2] - sh] = o[sb, :, sh:].clone()
    return out


def _requests(rng):
    """Disjoint blocks per request: a move with a shift, a same-block left shift, a skip, a plain move."""
    b = rng.sample(range(BLOCKS), 7)
    src = [b[0], b[2], -1, b[4], b[6]]
    dst = [b[1], b[2], b[3], b[5], b[6]]
    shifts = [rng.randrange(1, TOKENS), rng.randrange(1, TOKENS), 1, 0, TOKENS + 2]  # last: shift past T
    return src, dst, shifts


def _bits(t):
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("id_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("with_rows", [True, False], ids=["with_conv_ds", "one_row"])
def test_matches_torch_indexing(target, dtype, id_dtype, with_rows):
    # Without a conv_ds state every span is one row (the layout of vLLM's common models); the same-block
    # left shift still has to run in order.
    rng = random.Random()
    states, kinds = _pools(target.device, dtype)
    if not with_rows:
        states, kinds = states[:3], kinds[:3]
    src, dst, shifts = _requests(rng)
    expected = _reference(states, kinds, src, dst, shifts)
    as_ids = lambda v: torch.tensor(v, dtype=id_dtype, device=target.device)  # noqa: E731
    xpu_state_copy.copy_states_(states, kinds, as_ids(src), as_ids(dst), as_ids(shifts))
    synchronize(target.device)
    for j, (got, want) in enumerate(zip(states, expected)):
        assert torch.equal(_bits(got.cpu()), _bits(want)), f"state {j} ({kinds[j]}) differs from the reference"


def test_many_requests_and_big_states(target):
    """Qwen3-Next-like pools, enough requests that the work spreads over many groups."""
    rng = random.Random()
    conv = [torch.randn(40, 3, 2048, device=target.device, dtype=torch.bfloat16) for _ in range(3)]
    temporal = [torch.randn(40, 4, 64, 128, device=target.device, dtype=torch.bfloat16) for _ in range(3)]
    states, kinds = conv + temporal, ["conv_sd"] * 3 + ["whole"] * 3
    blocks = rng.sample(range(40), 40)
    src, dst = blocks[:20], blocks[20:]
    shifts = [rng.randrange(0, 3) for _ in src]
    expected = _reference(states, kinds, src, dst, shifts)
    ids = lambda v: torch.tensor(v, device=target.device)  # noqa: E731
    xpu_state_copy.copy_states_(states, kinds, ids(src), ids(dst), ids(shifts))
    synchronize(target.device)
    for got, want in zip(states, expected):
        assert torch.equal(_bits(got.cpu()), _bits(want))


def test_more_entries_than_sub_groups(target):
    """Thousands of (request, state) entries, more than the kernel has sub-groups on an H200 (2,112): each
    sub-group then copies entries' first units straight from the tables before the scan deals out the rest.
    Row-wise (conv_ds) and shifted entries take the general path there."""
    rng = random.Random()
    blocks = 1400
    g = torch.Generator().manual_seed(rng.randrange(2**31))
    rand = lambda *shape: torch.randn(*shape, generator=g).to(target.device)  # noqa: E731
    states = [rand(blocks, 3, 5), rand(blocks, TOKENS + 1, 700)[:, :TOKENS], rand(blocks, 30, TOKENS + 3)[:, :, :TOKENS],
              rand(blocks, 4, 1100)]
    kinds = ["whole", "conv_sd", "conv_ds", "whole"]
    ids = rng.sample(range(blocks), 2 * 620)
    src, dst = ids[:620], ids[620:]
    shifts = [rng.randrange(0, TOKENS) for _ in src]
    expected = _reference(states, kinds, src, dst, shifts)
    as_ids = lambda v: torch.tensor(v, device=target.device)  # noqa: E731
    xpu_state_copy.copy_states_(states, kinds, as_ids(src), as_ids(dst), as_ids(shifts))
    synchronize(target.device)
    for j, (got, want) in enumerate(zip(states, expected)):
        assert torch.equal(got.cpu(), want), f"state {j} ({kinds[j]}) differs from the reference"


def test_block_layout_is_read_from_sizes_and_strides(target):
    """A size-1 dim's stride does not matter; a padded row inside a block is refused, naming the state."""
    base = torch.randn(9, 6, device=target.device)
    odd_stride = base.as_strided((9, 1, 6), (6, 100, 1))  # size-1 dim with an unusual stride: still dense
    expected = _reference([odd_stride], ["whole"], [2], [5], [0])
    ids = lambda v: torch.tensor(v, device=target.device)  # noqa: E731
    xpu_state_copy.copy_states_([odd_stride], ["whole"], ids([2]), ids([5]), ids([0]))
    synchronize(target.device)
    assert torch.equal(odd_stride.cpu(), expected[0])
    padded_rows = torch.randn(9, 5, 8, device=target.device)[:, :, :7]
    with pytest.raises(RuntimeError, match=r"states\[1\] must be contiguous within a block"):
        xpu_state_copy.copy_states_([odd_stride, padded_rows], ["whole", "whole"], ids([2]), ids([5]), ids([0]))


def test_opcheck_and_compile(target):
    states, kinds = _pools(target.device, torch.float32)
    ids = lambda v: torch.tensor(v, device=target.device)  # noqa: E731
    kind_ids = [xpu_state_copy.STATE_KINDS[k] for k in kinds]
    torch.library.opcheck(torch.ops.xpu_state_copy.copy_states_.default,
                          (states, kind_ids, ids([0, 2]), ids([1, 3]), ids([1, 0])))
    src, dst, shifts = [4, 6], [5, 7], [2, 1]
    expected = _reference(states, kinds, src, dst, shifts)

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(a, b, c):
        xpu_state_copy.copy_states_(states, kinds, a, b, c)

    step(ids(src), ids(dst), ids(shifts))
    synchronize(target.device)
    for got, want in zip(states, expected):
        assert torch.equal(got.cpu(), want)


def _cpu_rejects(states, kinds, src, dst, shifts, pattern):
    before = [s.clone() for s in states]
    with pytest.raises((RuntimeError, ValueError), match=pattern):
        xpu_state_copy.copy_states_(states, kinds, src, dst, shifts)
    assert all(torch.equal(a, b) for a, b in zip(states, before)), "bytes moved before the error"


def test_bad_arguments_name_the_value():
    states, kinds = _pools("cpu", torch.float32)
    t = lambda *v, dtype=torch.int64: torch.tensor(v, dtype=dtype)  # noqa: E731
    _cpu_rejects(states, kinds, t(0), t(BLOCKS), t(0), rf"dst_blocks\[0\] = {BLOCKS} is not a block id")
    _cpu_rejects(states, kinds, t(0), t(1), t(-2), r"shifts\[0\] = -2 is negative")
    _cpu_rejects(states, kinds, t(0), t(1), t(0, dtype=torch.int32), r"shifts is Int but src_blocks is Long")
    _cpu_rejects(states, kinds, t(0, 1), t(1), t(0), r"dst_blocks has 1 entries but src_blocks has 2")
    _cpu_rejects(states, kinds[:2], t(0), t(1), t(0), r"kinds has 2 entries but states has 4")
    _cpu_rejects(states, ["whole", "whole", "conv_sd", "diagonal"], t(0), t(1), t(0), r"unknown kind 'diagonal'")
    _cpu_rejects([states[0].transpose(1, 2)], ["whole"], t(0), t(1), t(0), r"states\[0\] must be contiguous within a block")
