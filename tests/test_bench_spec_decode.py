"""The bench's spec-decode step: its scenario crosses block boundaries as described, its check catches
wrong pools and wrong counts, and every method it times (ours, batch_memcpy over the same spans, the Triton
peer of vLLM's fused design) passes that check before it is timed."""
import os

import pytest
import torch

from conftest import synchronize
from test_bench import _devices, _interpreter_runs_peers, _real_op, _run, bench
from benchmarks import spec_decode  # noqa: E402 - test_bench put this tree's benchmarks/ in place

SMALL = spec_decode.SpecDecodeWorkload("small", requests=6, layers=2, conv_bytes=3 * 64, temporal_bytes=512,
                                       block_size=8, seed=3)


def _checked(calls, buffers):
    buffers.poison()
    for call in calls:
        call()
    synchronize(buffers.device)
    return buffers.check()


def test_scenario_crosses_half_the_requests_within_the_accepted_tokens():
    wl = spec_decode.SpecDecodeWorkload("t", requests=16, block_size=64, seed=5)
    crossing = 0
    for r, (drafts, accepted, computed, m, bias) in enumerate(wl.plan()):
        assert 1 <= drafts <= wl.max_drafts and 1 <= accepted <= drafts + 1
        running = computed + 1  # scheduled = drafts + 1
        aligned = (running + accepted - 1) // wl.block_size * wl.block_size
        assert (aligned >= running) == (bias is not None) == (r % 2 == 0)
        if bias is not None:
            crossing += 1
            assert aligned == m * wl.block_size and bias == aligned - running
    assert crossing == 8
    token = wl.conv_bytes // 3
    assert wl.total_bytes == sum(36 * (2**20 + wl.conv_bytes - p[4] * token) for p in wl.plan() if p[4] is not None)


def test_check_catches_missing_copies_and_wrong_counts():
    buffers = spec_decode.SpecDecodeBuffers(SMALL, "cpu", rotations=2)
    buffers.fill()
    assert "bytes wrong" in _checked([], buffers)

    def temporal_only():
        for conv_src, whole_src, dst, bias in buffers.copies:
            buffers.temporal[:, dst] = buffers.temporal[:, whole_src]
        for out in buffers.outs:
            out.copy_(buffers.accepted)
    assert "conv pools" in _checked([temporal_only], buffers)

    def right_pools_wrong_counts():
        buffers.conv.copy_(buffers.expected[0])
        buffers.temporal.copy_(buffers.expected[1])
    assert "num_accepted_out" in _checked([right_pools_wrong_counts], buffers)


def _op_and_buffers(device):
    op = _real_op()
    if op is None:
        pytest.fail("xpu_state_copy is not built: the bench's methods of our own need the compiled op")
    buffers = spec_decode.SpecDecodeBuffers(SMALL, device, rotations=2)
    buffers.fill()
    return op, buffers


@pytest.mark.parametrize("device", _devices())
def test_ours_passes_the_check(device):
    op, buffers = _op_and_buffers(device)
    assert _checked(spec_decode._ours(op, buffers), buffers) is None


@pytest.mark.parametrize("device", _devices())
def test_batch_memcpy_of_the_same_spans_passes_the_pools_check(device):
    op, buffers = _op_and_buffers(device)
    target = spec_decode.PoolsOnly(buffers)
    calls = spec_decode._tables(op, buffers)
    assert len(calls) == 2
    assert _checked(calls, target) is None
    # The same check still catches a set left uncopied.
    assert "bytes wrong" in _checked(calls[:1], target)


@pytest.mark.parametrize("device", _devices())
def test_triton_fused_peer_passes_the_check(device, monkeypatch):
    if device == "cpu":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        if not _interpreter_runs_peers(monkeypatch):
            pytest.skip("no Triton whose interpreter runs the peers (pip install triton)")
    elif bench["triton_peers"].triton_version() is None:
        pytest.skip("Triton is not installed")
    else:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    buffers = spec_decode.SpecDecodeBuffers(SMALL, device, rotations=2)
    buffers.fill()
    assert _checked(spec_decode._triton_fused(buffers), buffers) is None
    # Misaligned by one byte: the peer copies bytewise and must still be right.
    odd = spec_decode.SpecDecodeWorkload("odd", requests=4, layers=2, conv_bytes=3 * 21, temporal_bytes=509,
                                         block_size=8, seed=1)
    buffers = spec_decode.SpecDecodeBuffers(odd, device, rotations=1)
    buffers.fill()
    assert _checked(spec_decode._triton_fused(buffers), buffers) is None


def test_cli_runs_the_spec_decode_workload(tmp_path, monkeypatch):
    if _real_op() is None:
        pytest.fail("xpu_state_copy is not built")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    rc, result = _run(tmp_path, "--device", "cpu", "--workloads", "spec_decode", "--spec", "2x4K", "--quick",
                      "--triton", "off")
    assert rc == 0
    w = next(w for w in result["workloads"] if w["name"] == "spec_decode")
    methods = {m["key"]: m for m in w["methods"]}
    assert set(methods) == {"contiguous", "ours", "tables"}
    for key in ("ours", "tables"):
        assert methods[key]["status"] == "ok" and methods[key]["ratio"] > 0
    assert w["total_bytes"] == spec_decode.named_workloads()["spec_decode"].scaled(1 / 64).total_bytes
    assert os.path.exists(tmp_path / "bench.json")


def test_a_baseline_build_and_span_methods_are_checked_like_ours():
    """run_workload times a second build's op (the baseline) and pointer-table methods over the same spans as
    `tables` (the CUDA peers, on CUDA): each passes the same check before it is timed, and one that copies
    part of a span is reported FAILED."""
    op = _real_op()
    if op is None:
        pytest.fail("xpu_state_copy is not built")
    peers = bench["peers"]

    def half_of_each_span(sets, device):
        return [lambda s=s, d=d: [dst[:dst.numel() // 2].copy_(src[:src.numel() // 2]) for src, dst in zip(s, d)]
                for s, d in sets]
    span_methods = [peers.Method("foreach_copy_", "torch._foreach_copy_", peers._foreach_copy),
                    peers.Method("half", "half of each span", half_of_each_span)]
    builds = [("ours", "ours", op, None), ("baseline", "baseline", op, None),
              ("baseline_gone", "gone", None, "import xsc_gone failed: ModuleNotFoundError")]
    clock = bench["timing"].Clock("cpu")
    result = spec_decode.run_workload(
        SMALL, builds, False, None, torch.device("cpu"), 2,
        lambda candidates: bench["run"]._measure(candidates, clock, 2, 1, lambda message: None), span_methods)
    status = {m["key"]: m["status"] for m in result["methods"]}
    assert status == {"contiguous": "ok", "ours": "ok", "tables": "ok", "baseline": "ok", "baseline_gone": "FAILED",
                      "foreach_copy_": "ok", "half": "FAILED"}
    labels = {m["key"]: m["label"] for m in result["methods"]}
    assert labels["baseline"] == "baseline: mamba_spec_decode_postprocess_"
    assert labels["foreach_copy_"] == "torch._foreach_copy_, the same spans"
