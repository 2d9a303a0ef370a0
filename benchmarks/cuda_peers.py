"""The batched copies NVIDIA ships, as bench peers on CUDA devices: cub::DeviceMemcpy::Batched and
cudaMemcpyBatchAsync (cuda_peers.cu, beside this file).

The extension is compiled with torch.utils.cpp_extension the first time a process asks for it, into a
cache folder (XPU_STATE_COPY_BENCH_CACHE, default ~/.cache/xpu_state_copy/bench/...) that later processes
reuse: the source is copied there first, so the bench run from a source tree and from an installed package
share one build. `python -m benchmarks.cuda_peers` builds it ahead of a bench. Where torch has no CUDA or
nvcc or ninja is missing, the bench leaves these peers out and says why in one sentence.
"""
import os
import pathlib
import sys

import torch

from .peers import Method, NotApplicable, host_pointer_table, size_table

SOURCE = pathlib.Path(__file__).with_name("cuda_peers.cu")
NAME = "xsc_bench_cuda_peers"
CUB = "cub_batched"
BATCH_ASYNC = "memcpy_batch_async"
KEYS = (CUB, BATCH_ASYNC)
CACHE_ENV = "XPU_STATE_COPY_BENCH_CACHE"


class Unavailable(Exception):
    """The peers cannot be built here; the message is one sentence saying why and what to install."""


def cache_dir():
    """One folder per Python and torch build: the module links against both."""
    root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "xpu_state_copy", "bench")
    tag = f"cuda-peers-py{sys.version_info[0]}{sys.version_info[1]}-torch{torch.__version__}"
    return pathlib.Path(root) / tag.replace("+", "_")


def why_unavailable():
    """None when the extension can be built here, else the reason."""
    from torch.utils import cpp_extension
    if torch.version.cuda is None:
        return f"torch {torch.__version__} has no CUDA"
    home = cpp_extension.CUDA_HOME
    if home is None or not (pathlib.Path(home) / "bin" / "nvcc").exists():
        return "nvcc (the CUDA toolkit) was not found: install it, or set CUDA_HOME to its folder"
    if not cpp_extension.is_ninja_available():
        return "ninja is needed to build them (pip install ninja)"
    if not SOURCE.exists():
        return f"their source {SOURCE.name} is not installed beside the bench ({SOURCE.parent})"
    return None


_loaded = {}  # NAME -> the module, or the Unavailable it raised: built (or found failing) once per process


def load():
    """The compiled extension; Unavailable when it cannot be built here."""
    if NAME not in _loaded:
        try:
            _loaded[NAME] = _build()
        except Unavailable as exc:
            _loaded[NAME] = exc
    if isinstance(_loaded[NAME], Unavailable):
        raise _loaded[NAME]
    return _loaded[NAME]


def _build():
    reason = why_unavailable()
    if reason:
        raise Unavailable(reason)
    from torch.utils import cpp_extension
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / SOURCE.name
    text = SOURCE.read_bytes()
    if not source.exists() or source.read_bytes() != text:  # unchanged: ninja keeps the earlier build
        staged = source.with_suffix(f".{os.getpid()}.tmp")
        staged.write_bytes(text)
        os.replace(staged, source)
    arch_set = "TORCH_CUDA_ARCH_LIST" not in os.environ and torch.cuda.is_available()
    if arch_set:  # the visible GPU's architecture, as torch would pick, without its warning
        os.environ["TORCH_CUDA_ARCH_LIST"] = "%d.%d" % torch.cuda.get_device_capability()
    try:
        return cpp_extension.load(NAME, [str(source)], build_directory=str(folder), extra_cuda_cflags=["-O3"],
                                  verbose=False)
    except Exception as exc:  # noqa: BLE001 - compiler output is long; the reason is its first error
        lines = str(exc).splitlines() or [""]
        first = next((line.strip() for line in lines if "error:" in line.lower()), lines[0])
        raise Unavailable(f"building {source} failed ({type(exc).__name__}: {first[:300]})") from None
    finally:
        if arch_set:
            del os.environ["TORCH_CUDA_ARCH_LIST"]


def bench_methods(device, wanted=None, log=lambda message: None):
    """(methods, note) for a run on `device`: the two peers on a CUDA device, else none; note is the one
    sentence saying why they are left out where they cannot be built. `wanted` (--methods) without
    either key does not build them at all."""
    if device.type != "cuda" or (wanted is not None and not set(KEYS) & set(wanted)):
        return [], None
    log(f"loading the CUDA peers (compiled on first use into {cache_dir()})")
    try:
        ext = load()
    except Unavailable as exc:
        return [], f"CUB and cudaMemcpyBatchAsync peers left out: {exc}."
    return [Method(CUB, "CUB DeviceMemcpy::Batched", _cub_batched(ext)),
            Method(BATCH_ASYNC, "cudaMemcpyBatchAsync, side stream", _memcpy_batch_async(ext))], None


def _cub_batched(ext):
    """Device tables as batch_memcpy gets them, sizes widened to int64 once; CUB's temporary storage is
    allocated here, outside the timing, and shared by the rotation sets (one stream runs them in order)."""
    def build(sets, device):
        calls, temp = [], None
        for srcs, dsts in sets:
            src, dst = host_pointer_table(srcs, device), host_pointer_table(dsts, device)
            sizes = size_table(srcs, device).to(torch.int64)
            if temp is None:
                temp = torch.empty(max(1, ext.cub_temp_bytes(src)), dtype=torch.uint8, device=device)
            calls.append(lambda s=src, d=dst, n=sizes, t=temp: ext.cub_batched(t, s, d, n))
        return calls
    return build


def _memcpy_batch_async(ext):
    """Host arrays of addresses and sizes, built once; each call runs on a side stream ordered between
    the caller's stream's earlier and later work (on_side_stream)."""
    def build(sets, device):
        if not ext.memcpy_batch_available():
            raise NotApplicable("cudaMemcpyBatchAsync needs CUDA 12.8 or newer")
        side = torch.cuda.Stream(device)
        calls = []
        for srcs, dsts in sets:
            arrays = (host_pointer_table(srcs, "cpu"), host_pointer_table(dsts, "cpu"),
                      size_table(srcs, "cpu").to(torch.int64))
            calls.append(on_side_stream(
                side, lambda a=arrays: ext.memcpy_batch_async(*a, side.cuda_stream, device.index)))
        return calls
    return build


def on_side_stream(side, issue, cuda=torch.cuda):
    """A call that runs issue() (work enqueued on `side`) as if it were on the caller's current stream:
    `side` first waits for what is queued there (the timer's start event), and the current stream then
    waits for `side`, so its next event (the timer's end) is recorded after the batch has finished."""
    queued, finished = cuda.Event(), cuda.Event()

    def call():
        current = cuda.current_stream(side.device)
        queued.record(current)
        side.wait_event(queued)
        issue()
        finished.record(side)
        current.wait_event(finished)
    return call


if __name__ == "__main__":  # build ahead of a bench: python -m benchmarks.cuda_peers
    try:
        print(f"CUDA peers built: {load().__file__}")
    except Unavailable as exc:
        sys.exit(f"CUDA peers not built: {exc}")
