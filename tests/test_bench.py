"""The benchmark is tested for correctness, not speed: every method must be
verified before it is timed, a wrong method must be reported as FAILED, and the
JSON and PNG must be written."""
import ctypes
import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load_bench():
    """Load benchmarks/ from this tree without putting the tree on sys.path
    (which could shadow the installed, compiled xpu_state_copy)."""
    if "benchmarks" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "benchmarks", ROOT / "benchmarks" / "__init__.py",
            submodule_search_locations=[str(ROOT / "benchmarks")])
        module = importlib.util.module_from_spec(spec)
        sys.modules["benchmarks"] = module
        spec.loader.exec_module(module)
    return {name: importlib.import_module(f"benchmarks.{name}")
            for name in ("run", "workloads", "verify", "peers", "triton_peers", "timing", "cuda_peers", "report")}


bench = _load_bench()


def _stub_op(broken=False):
    """CPU stand-in with the op's API, used where the compiled op is not built.
    broken=True copies only the first half of every entry."""
    op = types.ModuleType("xpu_state_copy")

    def pointer_table(tensors):
        addrs = np.array([t.data_ptr() for t in tensors], dtype=np.uint64)
        return torch.from_numpy(addrs).to(tensors[0].device)

    def batch_memcpy(src, dst, sizes):
        for s, d, n in zip(src.numpy().tolist(), dst.numpy().tolist(), sizes.tolist()):
            ctypes.memmove(d, s, n // 2 if broken else n)

    op.pointer_table, op.batch_memcpy = pointer_table, batch_memcpy
    op.backend = lambda device: "stub"
    return op


def _real_op():
    try:
        op = importlib.import_module("xpu_state_copy")
    except ImportError:
        return None
    return op if hasattr(op, "batch_memcpy") and hasattr(op, "pointer_table") else None


def _devices():
    devs = ["cpu"]
    if torch.cuda.is_available():
        devs.append("cuda")
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        devs.append("xpu")
    return devs


def _run(tmp_path, *extra):
    parser = bench["run"].add_arguments(__import__("argparse").ArgumentParser())
    args = parser.parse_args(["--workloads", "none", "--copies", "16", "--bytes", "4K",
                              "--spec", "3x4K,2x12K", "--requests", "2", "--reps", "3",
                              "--warmup", "1", "--host-calls", "4", "--threads", "1",
                              "--out", str(tmp_path), *extra])
    rc = bench["run"].run(args)
    return rc, json.loads((tmp_path / "bench.json").read_text())


def _interpreter_runs_peers(monkeypatch):
    """Older Triton interpreters (3.6) cannot loop up to a size loaded from
    memory, which both peers do; there the peers are checked on GPUs only."""
    if bench["triton_peers"].triton_version() is None:
        return False
    src = torch.arange(64, dtype=torch.uint8)
    dst = torch.zeros_like(src)
    tables = [bench["peers"].host_pointer_table([t], "cpu") for t in (src, dst)]
    try:
        bench["triton_peers"].bytewise_call(*tables, torch.tensor([64], dtype=torch.int32))()
    except Exception:  # noqa: BLE001 - the interpreter's own limitation
        return False
    return torch.equal(src, dst)


@pytest.fixture
def op(monkeypatch, request):
    real = _real_op()
    if real is None:
        if request.param != "cpu":
            pytest.skip("xpu_state_copy is not built; GPU runs need the compiled op")
        monkeypatch.setitem(sys.modules, "xpu_state_copy", _stub_op())
    return request.param


@pytest.mark.parametrize("op", _devices(), indirect=True)
def test_bench_verifies_and_reports_every_method(op, tmp_path, monkeypatch, capsys):
    device = op
    if device == "cpu":
        monkeypatch.setenv("TRITON_INTERPRET", "1")  # Triton peers on CPU tensors
        with_triton = _interpreter_runs_peers(monkeypatch)
    else:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # compiled, as timed
        with_triton = bench["triton_peers"].triton_version() is not None
    rc, result = _run(tmp_path, "--device", device, "--triton", "on" if with_triton else "off")
    expected = {"contiguous", "ours", "copy_", "foreach_copy_"}
    if with_triton:
        expected |= {"triton_bytewise", "triton_tiled"}
    cuda_peers = bench["cuda_peers"]
    if device == "cuda" and cuda_peers.why_unavailable() is None:
        expected |= set(cuda_peers.KEYS)  # test_bench_cuda_peers.py checks them on their own
    elif device == "cuda":  # left out, with one sentence saying why
        assert [n for n in result["meta"]["notes"] if cuda_peers.why_unavailable() in n]
    assert rc == 0
    assert [w["name"] for w in result["workloads"]] == ["16x4K", "3x4K,2x12K*2"]
    for w in result["workloads"]:
        methods = {m["key"]: m for m in w["methods"]}
        assert set(methods) == expected
        for m in methods.values():
            assert m["status"] == "ok", m
            assert m["median_ms"] > 0 and m["gbps"] > 0 and m["ratio"] > 0
        assert "ours_speedup" in methods["copy_"]
    assert result["workloads"][1]["entries"] == 10
    assert result["workloads"][1]["total_bytes"] == 2 * (3 * 4096 + 2 * 12288)
    assert "ours" in result["host_cost"]["methods"]
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "one contiguous copy (roofline)" in out and "ratio to roofline" in out


def test_broken_op_is_reported_failed_and_not_timed(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "xpu_state_copy", _stub_op(broken=True))
    rc, result = _run(tmp_path, "--device", "cpu", "--triton", "off")
    assert rc == 1
    for w in result["workloads"]:
        methods = {m["key"]: m for m in w["methods"]}
        assert methods["ours"]["status"] == "FAILED"
        assert "bytes wrong" in methods["ours"]["error"]
        assert "median_ms" not in methods["ours"]
        assert methods["foreach_copy_"]["status"] == "ok"


def test_methods_are_timed_in_turns_and_each_gets_every_repetition():
    """A device that runs slow for a while must slow every method alike: the methods take
    turns, a chunk of repetitions each, after every method's warm-up."""
    order = []
    methods = [[lambda k=k, s=s: order.append((k, s)) for s in range(2)] for k in "abc"]
    samples = bench["timing"].Clock("cpu").time_in_turns(methods, reps=23, warmup=3)
    assert [len(s) for s in samples] == [23, 23, 23]
    assert all(t >= 0 for s in samples for t in s)
    chunk = bench["timing"].CHUNK
    warm = [(k, i % 2) for k in "abc" for i in range(3)]
    timed = [(k, i % 2) for first in range(0, 23, chunk) for k in "abc" for i in range(first, min(23, first + chunk))]
    assert order == warm + timed


def _buffers():
    wl = bench["workloads"].Workload("t", bench["workloads"].parse_spec("3x4K,2x8K", 2))
    buffers = bench["workloads"].allocate(wl, "cpu", rotations=2)
    return buffers, [buffers.entry_views(k) for k in range(2)]


def test_verify_catches_stray_write_and_exceptions():
    buffers, sets = _buffers()
    target = bench["verify"].TableCheck(buffers)
    check = bench["verify"].verify

    def right(srcs, dsts):
        return lambda: torch._foreach_copy_(dsts, srcs)

    def stray(srcs, dsts):
        def call():
            torch._foreach_copy_(dsts, srcs)
            srcs[0][7] ^= 1  # a correct copy plus one write outside the destinations
        return call

    def raises():
        raise RuntimeError("boom")

    sync = lambda: None  # noqa: E731 - CPU
    assert check([right(*s) for s in sets], target, sync) is None
    assert "1 bytes wrong in 1 blocks" in check([stray(*sets[0]), right(*sets[1])], target, sync)
    assert "boom" in check([raises], target, sync)
    # Running only one of the two rotation sets leaves the other's blocks wrong.
    assert check([right(*sets[0])], target, sync) is not None


def test_workload_shapes():
    wl = bench["workloads"]
    named = wl.named_workloads()
    assert named["step"].entries == 72
    assert named["step"].total_bytes == 36 * 48 * 1024 + 36 * 2**20
    assert named["step16"].entries == 1152
    assert named["tiny"].entries == 4096 and named["tiny"].total_bytes == 16 * 2**20
    assert named["mixed"].entries == 1001
    assert wl.parse_bytes("48K") == 49152 and wl.parse_bytes("1M") == 2**20
    small = wl.scaled(named["mixed"], 1 / 64)
    assert small.entries == 1001 and small.terms[0].block_bytes == 4 * 2**20
    assert wl.rotation_count(named["step"], 50 * 2**20) == 3
    with pytest.raises(ValueError):
        wl.parse_spec("36-48K")


def test_entry_blocks_are_distinct():
    buffers, sets = _buffers()
    ptrs = [v.data_ptr() for srcs, dsts in sets for v in srcs + dsts]
    assert len(ptrs) == len(set(ptrs)) == 2 * 2 * (3 + 2) * 2


def test_without_matplotlib_json_and_table_are_written_and_the_png_explained(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "xpu_state_copy", _stub_op())
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    rc, result = _run(tmp_path, "--device", "cpu", "--triton", "off")
    assert rc == 0 and len(result["workloads"]) == 2
    assert not (tmp_path / "bench.png").exists()
    out = capsys.readouterr().out
    assert "ratio to roofline" in out
    hint = [line for line in out.splitlines() if "no bench.png" in line]
    assert len(hint) == 1 and "xpu-state-copy[bench]" in hint[0]


def test_odd_and_states_workload_shapes():
    wl = bench["workloads"]
    named = wl.named_workloads()
    assert named["odd"].entries == 2000 and named["odd"].total_bytes == 2000 * 12345
    assert wl.scaled(named["odd"], 1 / 64).terms[0].block_bytes == 12345  # odd sizes stay odd
    assert named["states"].total_bytes == named["step"].total_bytes
    assert named["states_s1"].total_bytes == 36 * 32 * 1024 + 36 * 2**20  # one 16 KiB token fewer
    assert named["states16_s1"].entries == 1152 and named["states64"].entries == 64 * 72
    small = wl.scaled(named["states_s1"], 1 / 64)
    assert small.terms[0].block_bytes % 3 == 0 and small.terms[0].shift_bytes == small.terms[0].block_bytes // 3
    buffers = wl.allocate(small, "cpu", rotations=2)
    src, dst = buffers.block_ids(1)
    srcs, dsts = buffers.entry_views(1)
    # One block id per request in every pool, the conv views shifted by one token.
    pool = buffers.backing[0][5]
    assert srcs[5].data_ptr() == pool[int(src[0])].data_ptr() + small.terms[0].shift_bytes
    assert dsts[40].data_ptr() == buffers.backing[1][4][int(dst[0])].data_ptr()


def test_states_workload_times_copy_states_beside_the_pointer_table_methods(tmp_path, capsys):
    if _real_op() is None or not hasattr(_real_op(), "copy_states_"):
        pytest.skip("xpu_state_copy is not built: copy_states_ needs the compiled op")
    parser = bench["run"].add_arguments(__import__("argparse").ArgumentParser())
    args = parser.parse_args(["--device", "cpu", "--workloads", "states_s1,states16", "--scale", "0.015625",
                              "--methods", "copy_states,ours,foreach_copy_,stacked_index", "--reps", "2",
                              "--warmup", "1",
                              "--host-calls", "0", "--threads", "1", "--out", str(tmp_path)])
    assert bench["run"].run(args) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    for w in result["workloads"]:
        methods = {m["key"]: m for m in w["methods"]}
        assert list(methods) == ["contiguous", "copy_states", "ours", "foreach_copy_", "stacked_index"]
        # SGLang's indexed copy moves whole slots: verified like the others, not offered a shifted conv.
        shifted = w["name"] == "states_s1"
        assert methods.pop("stacked_index")["status"] == ("n/a" if shifted else "ok"), w
        assert all(m["status"] == "ok" for m in methods.values()), methods
        assert w["primary"] == "copy_states" and "ours_speedup" in methods["ours"]
