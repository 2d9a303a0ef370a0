"""Graph capture (CUDA, and XPU where torch can capture), torch.compile(mode="reduce-overhead"), and several
devices (CUDA here; XPU goes through the same device-guard logic)."""
import random

import pytest
import torch

import xpu_state_copy
from batches import assert_matches, random_batch
from conftest import HAS_CUDA, HAS_XPU

needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and a CUDA build")
needs_two = pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs two CUDA devices")


def _retarget(static, batch):
    """Write a new batch's tables into the captured (static) table tensors."""
    for old, new in zip(static, batch.tables()):
        old.view(torch.int64).copy_(new.view(torch.int64))  # bit copy; no uint64 kernel needed


GRAPH_TARGETS = [
    pytest.param("cuda", marks=needs_cuda),
    pytest.param("xpu", marks=pytest.mark.skipif(
        not (HAS_XPU and hasattr(torch.xpu, "XPUGraph") and hasattr(torch.xpu, "graph")),
        reason="needs an XPU and a torch with XPU graph capture")),
]


@pytest.mark.parametrize("device", GRAPH_TARGETS)
def test_graph_replays_with_new_table_contents(device):
    api = getattr(torch, device)  # torch.cuda or torch.xpu: Graph class, graph() context, synchronize()
    rng = random.Random()
    sizes = [rng.choice([0, 5, 4096, 70000]) for _ in range(40)]
    first = random_batch(rng, device, sizes, overlap_every=7, size_dtype=torch.int64)
    static = first.tables()
    xpu_state_copy.batch_memcpy(*static)  # warm-up outside capture
    api.synchronize()
    graph = api.CUDAGraph() if device == "cuda" else api.XPUGraph()
    with api.graph(graph):
        xpu_state_copy.batch_memcpy(*static)
    for _ in range(3):
        batch = random_batch(rng, device, [rng.choice([0, 5, 4096, 70000]) for _ in range(40)],
                             overlap_every=7, size_dtype=torch.int64)
        expected = batch.expected()
        _retarget(static, batch)
        graph.replay()
        api.synchronize()
        assert_matches(batch, expected)


@needs_cuda
def test_cuda_graph_replays_copy_states():
    pools = [torch.randn(8, 3, 256, device="cuda") for _ in range(2)] + [torch.randn(8, 4, 64, device="cuda")]
    kinds = ["conv_sd", "conv_sd", "whole"]
    src, dst, shifts = (torch.zeros(2, dtype=torch.int64, device="cuda") for _ in range(3))
    xpu_state_copy.copy_states_(pools, kinds, src, dst, shifts)  # builds and caches the plan before capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        xpu_state_copy.copy_states_(pools, kinds, src, dst, shifts)
    for s, d, sh in (([0, 2], [1, 3], [1, 2]), ([4, 6], [5, 6], [0, 1])):
        expected = [p.clone() for p in pools]
        for sb, db, k in zip(s, d, sh):
            for e, kind in zip(expected, kinds):
                if kind == "whole":
                    e[db] = e[sb].clone()
                else:
                    e[db, : e.shape[1] - k] = e[sb, k:].clone()
        src.copy_(torch.tensor(s)), dst.copy_(torch.tensor(d)), shifts.copy_(torch.tensor(sh))
        graph.replay()
        torch.cuda.synchronize()
        for p, e in zip(pools, expected):
            assert torch.equal(p, e)


@pytest.mark.parametrize("device", GRAPH_TARGETS)
def test_a_captured_plan_outlives_its_eviction_from_the_plan_cache(device):
    """The graph reads the device plan (addresses, strides) it captured at every replay. Afterwards more
    distinct plans than the cache keeps (8) are used, each on pools of its own, and small device tensors full
    of junk are allocated where a freed plan would be reused: the replays must still copy the right bytes."""
    api = getattr(torch, device)
    pools = [torch.randn(8, 3, 256, device=device), torch.randn(8, 4, 64, device=device)]
    kinds = ["conv_sd", "whole"]
    src, dst, shifts = (torch.zeros(2, dtype=torch.int64, device=device) for _ in range(3))
    xpu_state_copy.copy_states_(pools, kinds, src, dst, shifts)  # the plan is made and cached outside capture
    api.synchronize()
    graph = api.CUDAGraph() if device == "cuda" else api.XPUGraph()
    with api.graph(graph):
        xpu_state_copy.copy_states_(pools, kinds, src, dst, shifts)
    one = torch.zeros(1, dtype=torch.int64, device=device)
    for n in range(12):  # 12 other plans push every uncaptured one out of the cache
        other = torch.randn(4 + n, 2, 32, device=device)
        xpu_state_copy.copy_states_([other], ["whole"], one, one, one)
    api.synchronize()
    junk = [torch.full((16 + n,), -1, dtype=torch.int64, device=device) for n in range(256)]
    for s, d, sh in (([0, 2], [1, 3], [1, 2]), ([4, 6], [5, 7], [0, 3])):
        expected = [p.clone() for p in pools]
        for sb, db, k in zip(s, d, sh):
            expected[0][db, : 3 - k] = expected[0][sb, k:].clone()
            expected[1][db] = expected[1][sb].clone()
        src.copy_(torch.tensor(s)), dst.copy_(torch.tensor(d)), shifts.copy_(torch.tensor(sh))
        graph.replay()
        api.synchronize()
        for p, e in zip(pools, expected):
            assert torch.equal(p, e)
    del junk


@needs_cuda
def test_cuda_graph_replays_spec_decode_between_eager_launches():
    """A captured spec-decode launch replayed between eager launches of another step: each leaves exactly
    the reference's bytes and counts."""
    from test_spec_decode import Relaunch, busy_step, run_postprocess
    rng = random.Random(53)
    captured, eager = (Relaunch(busy_step(rng), "cuda") for _ in range(2))
    run_postprocess(captured.ours, captured.out)  # plan cached before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run_postprocess(captured.ours, captured.out)
    for launch in range(3):
        captured.reset()
        graph.replay()
        eager.launch()
        torch.cuda.synchronize()
        captured.check(launch)
        eager.check(launch)


STREAM_TARGETS = [pytest.param("cuda", marks=needs_cuda),
                  pytest.param("xpu", marks=pytest.mark.skipif(not HAS_XPU, reason="needs an XPU"))]


@pytest.mark.parametrize("device", STREAM_TARGETS)
def test_spec_decode_launches_alternating_between_two_streams_stay_right(device):
    """300 launches alternating between two new streams, each stream on pools of its own, must each leave
    exactly the reference's bytes and counts."""
    from test_spec_decode import Relaunch, busy_step
    api = getattr(torch, device)
    rng = random.Random(59)
    runs = []
    for stream in (api.Stream(), api.Stream()):
        with api.stream(stream):
            runs.append((Relaunch(busy_step(rng), device), stream))
    api.synchronize()
    for launch in range(300):
        run, stream = runs[launch % 2]
        with api.stream(stream):
            run.launch()
        if launch < 4 or launch % 75 < 2 or launch >= 298:
            stream.synchronize()
            run.check(launch)


@needs_cuda
def test_compile_reduce_overhead_keeps_every_copy():
    rng = random.Random()
    batch = random_batch(rng, "cuda", [4096, 100, 70000])
    static = batch.tables()

    @torch.compile(mode="reduce-overhead")
    def step(src, dst, sizes, x):
        xpu_state_copy.batch_memcpy(src, dst, sizes)
        return x * 2

    for _ in range(3):
        batch = random_batch(rng, "cuda", [4096, 100, 70000])
        expected = batch.expected()
        out = step(*batch.tables(), torch.ones(4, device="cuda"))
        torch.cuda.synchronize()
        assert out.tolist() == [2.0] * 4
        assert_matches(batch, expected)
    del static


@needs_two
def test_tensors_on_device_1_copy_on_device_1_while_device_0_is_current():
    torch.cuda.set_device(0)
    rng = random.Random()
    batch = random_batch(rng, "cuda:1", [rng.choice([1, 4096, 1 << 20]) for _ in range(30)], overlap_every=4)
    expected = batch.expected()
    tables = batch.tables()
    assert all(t.device == torch.device("cuda:1") for t in tables)
    assert xpu_state_copy.backend(tables[0].device) == "cuda"
    xpu_state_copy.batch_memcpy(*tables)
    torch.cuda.synchronize(1)
    assert torch.cuda.current_device() == 0
    assert_matches(batch, expected)


@needs_two
def test_tables_on_another_device_than_the_data_are_rejected():
    pools = [torch.randn(4, 8, device="cuda:1")]
    ids = torch.tensor([0], device="cuda:0")
    with pytest.raises(RuntimeError, match=r"src_blocks is on cuda:0 but states\[0\] is on cuda:1"):
        xpu_state_copy.copy_states_(pools, ["whole"], ids, ids, ids)
    data = torch.zeros(64, dtype=torch.uint8, device="cuda:1")
    src = xpu_state_copy.pointer_table([data[:8]])
    with pytest.raises(RuntimeError, match=r"dst_ptrs is on cuda:0 but src_ptrs is on cuda:1"):
        xpu_state_copy.batch_memcpy(src, src.to("cuda:0"), torch.tensor([8], device="cuda:1"))
    with pytest.raises(xpu_state_copy.UnsafeBatch, match="outside every bound tensor"):
        xpu_state_copy.batch_memcpy(src, src, torch.tensor([8], device="cuda:1"),
                                    bounds=[torch.zeros(8, device="cuda:0")])
