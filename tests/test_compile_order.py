"""torch.compile keeps eager order around the copies.

batch_memcpy reads and writes memory that only its addresses name: the schema cannot tell the compiler,
which used to move `dst * 3` before the copy (inductor) and copy before an in-place `src.add_(1)` (aot_eager
and inductor). It is now a graph break; these tests check both cases under both backends, through the
Python API and through the raw op. copy_states_ names the states it writes, so it stays in the graph and
must come out in order as well."""
import pytest
import torch

import xpu_state_copy
from conftest import synchronize

BACKENDS = ["aot_eager", "inductor"]


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()  # each test compiles its own functions with its own backend
    yield
    torch._dynamo.reset()


def _copy(via):
    if via == "api":
        return xpu_state_copy.batch_memcpy
    return torch.ops.xpu_state_copy.batch_memcpy


def _tables(src, dst):
    sizes = torch.tensor([src.nbytes], dtype=torch.int64, device=src.device)
    return xpu_state_copy.pointer_table([src]), xpu_state_copy.pointer_table([dst]), sizes


@pytest.mark.parametrize("via", ["api", "raw_op"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_reads_of_the_destination_stay_on_their_side(target, backend, via):
    copy = _copy(via)
    src = torch.randn(64, device=target.device)
    dst = torch.randn(64, device=target.device)
    old = dst.clone()
    tables = _tables(src, dst)

    @torch.compile(backend=backend)
    def step(src_ptrs, dst_ptrs, sizes, dst):
        before = dst * 2
        copy(src_ptrs, dst_ptrs, sizes)
        after = dst * 3
        return before, after

    before, after = step(*tables, dst)
    synchronize(target.device)
    assert torch.equal(before.cpu(), (old * 2).cpu())
    assert torch.equal(after.cpu(), (src * 3).cpu())


@pytest.mark.parametrize("via", ["api", "raw_op"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_writes_to_the_source_land_before_the_copy(target, backend, via):
    copy = _copy(via)
    src = torch.randn(64, device=target.device)
    dst = torch.zeros(64, device=target.device)
    expected = (src + 1).cpu()
    tables = _tables(src, dst)

    @torch.compile(backend=backend)
    def step(src_ptrs, dst_ptrs, sizes, src):
        src.add_(1)
        copy(src_ptrs, dst_ptrs, sizes)
        return dst.sum()

    total = step(*tables, src)
    synchronize(target.device)
    assert torch.equal(dst.cpu(), expected)
    assert torch.allclose(total.cpu(), expected.sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_states_in_a_graph_keeps_order(target, backend):
    pool = torch.randn(4, 3, 8, device=target.device)
    whole = torch.randn(4, 5, device=target.device)
    old_pool, old_whole = pool.clone(), whole.clone()
    ids = lambda v: torch.tensor([v], device=target.device)  # noqa: E731

    @torch.compile(fullgraph=True, backend=backend)
    def step(src, dst, shifts):
        pool.add_(1)  # lands before the copy: the copy moves the incremented values
        before = whole * 2
        xpu_state_copy.copy_states_([pool, whole], ["conv_sd", "whole"], src, dst, shifts)
        after = whole * 3
        return before, after

    before, after = step(ids(0), ids(2), ids(1))
    synchronize(target.device)
    expected_pool, expected_whole = (old_pool + 1).cpu(), old_whole.cpu().clone()
    expected_pool[2, :2] = expected_pool[0, 1:].clone()
    expected_whole[2] = expected_whole[0].clone()
    assert torch.equal(pool.cpu(), expected_pool)
    assert torch.equal(whole.cpu(), expected_whole)
    assert torch.equal(before.cpu(), old_whole.cpu() * 2)
    assert torch.equal(after.cpu(), expected_whole * 3)


def test_fullgraph_cannot_hold_batch_memcpy(target):
    """The graph break is deliberate: fullgraph=True says so instead of compiling a misordered graph."""
    src, dst = torch.randn(8, device=target.device), torch.zeros(8, device=target.device)
    tables = _tables(src, dst)

    @torch.compile(fullgraph=True, backend="aot_eager")
    def step(src_ptrs, dst_ptrs, sizes):
        xpu_state_copy.batch_memcpy(src_ptrs, dst_ptrs, sizes)

    with pytest.raises(Exception, match=r"(?i)disable|graph break|skip"):
        step(*tables)
