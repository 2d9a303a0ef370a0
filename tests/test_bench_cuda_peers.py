"""The bench's CUDA peers (benchmarks/cuda_peers.cu: CUB's DeviceMemcpy::Batched and cudaMemcpyBatchAsync).

Here, without a GPU: their source compiles with nvcc against this torch's headers (as test_cuda_compile.py
compiles the twin), a machine that cannot build them gets one sentence instead of a traceback, and the side
stream cudaMemcpyBatchAsync runs on is ordered between the caller's timing events. On a CUDA machine
(scripts/device_cuda.sh's test stage): both copy every byte of a batch, the side stream's batch is done once
the caller's stream is, and the bench lists both.
"""
import pathlib
import shutil
import subprocess
import sysconfig

import pytest
import torch
from torch.utils import cpp_extension

from test_bench import ROOT, _run, bench
from test_cuda_compile import ARCH, STAND_IN
from test_xpu_compile import cxx_standard
from benchmarks import cuda_peers  # noqa: E402 - test_bench put this tree's benchmarks/ in place

CHECK_DIR = ROOT / "build" / "bench-cuda-peers-check"


def _nvcc():
    found = shutil.which("nvcc")
    if found is None and cpp_extension.CUDA_HOME:
        candidate = pathlib.Path(cpp_extension.CUDA_HOME, "bin", "nvcc")
        found = str(candidate) if candidate.exists() else None
    return found


def test_source_compiles_with_nvcc():
    nvcc = _nvcc()
    if nvcc is None:
        pytest.skip("the compile check needs nvcc (the CUDA toolkit)")
    stand_in = CHECK_DIR / "include" / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    stand_in.parent.mkdir(parents=True, exist_ok=True)
    stand_in.write_text(STAND_IN)
    includes = [CHECK_DIR / "include"] + cpp_extension.include_paths() + [sysconfig.get_paths()["include"]]
    args = [nvcc, f"-std={cxx_standard()}", f"-arch={ARCH}", "-O3", "-c", "-o", str(CHECK_DIR / "cuda_peers.o"),
            f"-DTORCH_EXTENSION_NAME={cuda_peers.NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    args += [f"-I{path}" for path in includes] + [str(cuda_peers.SOURCE)]
    run = subprocess.run(args, capture_output=True, text=True)
    errors = "\n".join(line for line in (run.stdout + run.stderr).splitlines() if "error" in line)
    assert run.returncode == 0, errors[-3000:] or run.stderr[-3000:]


@pytest.fixture
def fresh(monkeypatch):
    """No extension loaded (or found failing) by an earlier test of this process."""
    monkeypatch.setattr(cuda_peers, "_loaded", {})
    return monkeypatch


def _one_sentence(note):
    assert note is not None and "\n" not in note and "Traceback" not in note, note
    assert note.startswith("CUB and cudaMemcpyBatchAsync peers left out: ") and note.endswith("."), note


@pytest.mark.parametrize("missing", ["torch's CUDA", "nvcc", "ninja"])
def test_a_machine_that_cannot_build_them_gets_one_sentence(fresh, missing, tmp_path):
    fresh.setattr(torch.version, "cuda", None if missing == "torch's CUDA" else "13.0")
    toolkit = tmp_path / "cuda"
    (toolkit / "bin").mkdir(parents=True)
    if missing != "nvcc":
        (toolkit / "bin" / "nvcc").write_text("")
    fresh.setattr(cpp_extension, "CUDA_HOME", str(toolkit))
    fresh.setattr(cpp_extension, "is_ninja_available", lambda: missing != "ninja")
    fresh.setattr(cpp_extension, "load", lambda *a, **k: pytest.fail("must not try to build"))
    methods, note = cuda_peers.bench_methods(torch.device("cuda", 0))
    assert methods == []
    _one_sentence(note)
    assert {"torch's CUDA": "has no CUDA", "nvcc": "CUDA_HOME", "ninja": "pip install ninja"}[missing] in note


def test_a_failed_build_is_one_sentence_naming_the_first_error(fresh, tmp_path):
    fresh.setattr(cuda_peers, "why_unavailable", lambda: None)
    fresh.setattr(cuda_peers, "cache_dir", lambda: tmp_path / "cache")
    log = "Error building extension 'xsc_bench_cuda_peers'\n[1/2] nvcc ...\ncuda_peers.cu(12): error: bad thing\n..."

    def failing_load(*args, **kwargs):
        raise RuntimeError(log)
    fresh.setattr(cpp_extension, "load", failing_load)
    methods, note = cuda_peers.bench_methods(torch.device("cuda", 0))
    assert methods == []
    _one_sentence(note)
    assert "cuda_peers.cu(12): error: bad thing" in note
    # The failure is kept: a second ask in the same process does not build again.
    fresh.setattr(cpp_extension, "load", lambda *a, **k: pytest.fail("built twice"))
    with pytest.raises(cuda_peers.Unavailable):
        cuda_peers.load()
    assert (tmp_path / "cache" / "cuda_peers.cu").read_bytes() == cuda_peers.SOURCE.read_bytes()


def test_other_devices_and_other_methods_do_not_build_them(fresh):
    fresh.setattr(cuda_peers, "load", lambda: pytest.fail("must not build"))
    assert cuda_peers.bench_methods(torch.device("cpu")) == ([], None)
    assert cuda_peers.bench_methods(torch.device("cuda", 0), wanted={"ours", "copy_"}) == ([], None)


class _Recorder:
    """A stand-in for torch.cuda's events and streams that writes down what is enqueued where."""

    def __init__(self):
        self.log = []
        recorder = self

        class Event:
            def record(self, stream):
                recorder.log.append(("record", self, stream))

        class Stream:
            device = "cuda:0"

            def __init__(self, name):
                self.name = name

            def wait_event(self, event):
                recorder.log.append(("wait", self, event))

        self.Event, self.current = Event, Stream("current")
        self.side = Stream("side")

    def current_stream(self, device):
        return self.current


def test_the_side_stream_batch_lies_between_the_callers_events():
    """cudaMemcpyBatchAsync refuses the legacy default stream, where the bench times. The side stream must
    wait for what the caller queued (the start event), and the caller's stream for the batch, so that the
    end event is recorded after the copies, in every call."""
    cuda = _Recorder()
    call = cuda_peers.on_side_stream(cuda.side, lambda: cuda.log.append(("batch", cuda.side)), cuda=cuda)
    for _ in range(2):
        cuda.log.clear()
        call()
        (op1, queued, on1), (op2, side1, ev1), batch, (op3, finished, on3), (op4, current, ev4) = cuda.log
        assert (op1, on1, op2, side1, ev1) == ("record", cuda.current, "wait", cuda.side, queued)
        assert batch == ("batch", cuda.side)
        assert (op3, on3, op4, current, ev4) == ("record", cuda.side, "wait", cuda.current, finished)
        assert queued is not finished


def _cuda_or_skip():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device (scripts/device_cuda.sh runs this on a GPU)")
    reason = cuda_peers.why_unavailable()
    if reason:
        pytest.skip(f"the CUDA peers cannot be built here: {reason}")
    return torch.device("cuda", torch.cuda.current_device())


@pytest.mark.parametrize("key", cuda_peers.KEYS)
def test_each_peer_copies_every_byte_and_nothing_else(key):
    device = _cuda_or_skip()
    method = {m.key: m for m in cuda_peers.bench_methods(device)[0]}[key]
    wl = bench["workloads"]
    # Odd sizes at odd offsets, and a few 4 MiB entries so that a batch left running on the side stream
    # would still be copying when the caller's stream is synchronized.
    workload = wl.Workload("t", [wl.Term(3, 4 * wl.MiB, 2), wl.Term(1, 12345, 300)])
    buffers = wl.allocate(workload, device, rotations=2)
    target = bench["verify"].TableCheck(buffers)
    calls = method.build([buffers.entry_views(k) for k in range(2)], device)
    target.poison()
    torch.cuda.synchronize(device)
    for call in calls:
        call()
    torch.cuda.current_stream(device).synchronize()  # only the caller's stream: it must have waited
    assert target.check() is None


def test_the_bench_lists_both_peers_on_cuda(tmp_path):
    device = _cuda_or_skip()
    rc, result = _run(tmp_path, "--device", str(device), "--triton", "off")
    assert rc == 0 and result["meta"]["notes"] == []
    for w in result["workloads"]:
        methods = {m["key"]: m for m in w["methods"]}
        for key in cuda_peers.KEYS:
            assert methods[key]["status"] == "ok" and methods[key]["ratio"] > 0, methods[key]
