"""`xpu-state-copy selftest`: copy a realistic Mamba-like batch on the best device, verify every byte.

The batch is what one prefix-caching step of a Qwen3-Next-sized hybrid model moves: for each of L layers a
conv state of 48 KiB and a temporal (SSM) state of 1 MiB, each in a per-layer pool of blocks, block src ->
block dst in every pool.
"""
import os
import statistics
import time

import torch

from .. import ops
from .._loader import backend, sycl_status

CONV_SHAPE = (3, 8192)  # tokens x channels, bf16: 48 KiB
TEMPORAL_SHAPE = (16, 128, 256)  # heads x head_dim x state, bf16: 1 MiB


def best_target():
    """'xpu', 'cuda', 'sycl-cpu' or 'cpu': the most capable place this machine can run the copy."""
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        return "xpu"
    if torch.cuda.is_available():
        return "cuda"
    if sycl_status()[0] is not None:
        return "sycl-cpu"
    return "cpu"


def device_of(target: str) -> torch.device:
    """The torch device for a target name; 'sycl-cpu' also selects the SYCL kernel for CPU tensors."""
    if target == "sycl-cpu":
        os.environ["XPU_STATE_COPY_BACKEND"] = "sycl"
        return torch.device("cpu")
    if target == "cpu":
        os.environ["XPU_STATE_COPY_BACKEND"] = "cpu"
    return torch.device(target)


def _synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "xpu":
        torch.xpu.synchronize(device)


def describe(device: torch.device, target: str) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "xpu":
        return torch.xpu.get_device_name(device)
    if target == "sycl-cpu":
        from .. import _loader
        return f"SYCL CPU device: {_loader._sycl_module.cpu_device_name()}"
    return f"host CPU, {torch.get_num_threads()} threads"


def run_selftest(layers=36, blocks=3, src_block=1, dst_block=2, repeats=20, target=None, out=print) -> dict:
    target = target or best_target()
    device = device_of(target)
    pools = [torch.randn(blocks, *CONV_SHAPE, device=device, dtype=torch.bfloat16) for _ in range(layers)]
    pools += [torch.randn(blocks, *TEMPORAL_SHAPE, device=device, dtype=torch.bfloat16) for _ in range(layers)]
    src = ops.pointer_table([p[src_block] for p in pools])
    dst = ops.pointer_table([p[dst_block] for p in pools])
    sizes = torch.tensor([p[0].numel() * p.element_size() for p in pools], dtype=torch.int32, device=device)
    for p in pools:  # poison the destination blocks
        p[dst_block].view(torch.int16).fill_(-21846)
    expected = [p.clone() for p in pools]
    for e in expected:
        e[dst_block] = e[src_block]

    ops.batch_memcpy(src, dst, sizes)
    _synchronize(device)
    bad = [i for i, (p, e) in enumerate(zip(pools, expected)) if not torch.equal(p.view(torch.int16), e.view(torch.int16))]

    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        ops.batch_memcpy(src, dst, sizes)
        _synchronize(device)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    total = int(sizes.sum().item())
    result = {
        "backend": backend(device), "device": describe(device, target), "target": target,
        "entries": len(pools), "bytes": total, "mismatched_states": bad,
        "median_ms": median * 1e3, "gbps_read_plus_write": 2 * total / median / 1e9,
    }
    out(f"xpu_state_copy selftest: {len(pools)} states ({layers} x 48 KiB conv + {layers} x 1 MiB temporal, "
        f"pools of {blocks} blocks), {total / 2**20:.1f} MiB")
    out(f"  backend: {result['backend']}   device: {result['device']}")
    out(f"  verified: {'every byte OK' if not bad else f'MISMATCH in states {bad}'}")
    out(f"  time: {result['median_ms']:.3f} ms median of {repeats}   bandwidth: "
        f"{result['gbps_read_plus_write']:.1f} GB/s (read + write)")
    return result


def add_arguments(parser):
    parser.add_argument("--device", choices=["xpu", "cuda", "sycl-cpu", "cpu"], default=None,
                        help="where to run (default: the best available)")
    parser.add_argument("--layers", type=int, default=36)
    parser.add_argument("--repeats", type=int, default=20)


def run(args) -> int:
    result = run_selftest(layers=args.layers, repeats=args.repeats, target=args.device)
    return 1 if result["mismatched_states"] else 0
