"""`xpu-state-copy bench`: command-line arguments and the run itself."""
import argparse
import datetime
import gc
import importlib
import os
import platform
import sys
import time

import torch

from . import cuda_peers, peers, report, spec_decode, triton_peers, verify
from .devices import describe_device, resolve_device
from .timing import Clock, summarize
from .workloads import DEFAULT_WORKLOADS, Term, Workload, allocate, named_workloads, parse_bytes, \
    parse_spec, rotation_count, scaled

HOST_COST_ENTRIES = 1152  # 16 requests x 72 states, the size issue 4 sets a target for


def add_arguments(parser):
    parser.add_argument("--device", default="auto",
                        help="auto (default: xpu, cuda, sycl-cpu, cpu, first available), "
                             "xpu[:N], cuda[:N], sycl-cpu or cpu")
    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                        help=f"comma-separated named workloads (default: {DEFAULT_WORKLOADS}) "
                             "or 'none'")
    parser.add_argument("--copies", type=int, help="custom workload: number of entries ...")
    parser.add_argument("--bytes", help="... of this size each (e.g. 4096, 48K, 1M)")
    parser.add_argument("--spec", action="append", default=[],
                        help="mixed workload, e.g. 36x48K,36x1M: COUNT pools of SIZE blocks, "
                             "one copy per pool per request (repeatable)")
    parser.add_argument("--requests", type=int, default=1, help="requests per --spec workload")
    parser.add_argument("--methods", help="comma-separated subset of: copy_states (states "
                                          "workloads only), ours, copy_, foreach_copy_, "
                                          "stacked_index (states workloads only), "
                                          "triton_bytewise, triton_tiled, tables and "
                                          "triton_fused (spec_decode only), cub_batched and "
                                          "memcpy_batch_async (CUDA), baseline and "
                                          "baseline_copy_states (with --baseline)")
    parser.add_argument("--baseline", metavar="MODULE",
                        help="also time an older build of the op, importable as MODULE "
                             "(scripts/baseline_tree.py renames an older source tree so that its "
                             "build loads beside this one)")
    parser.add_argument("--triton", choices=("auto", "on", "off"), default="auto",
                        help="Triton peers: auto = on GPUs when Triton imports; on the CPU "
                             "only with TRITON_INTERPRET=1 (slow, for testing)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer repetitions, and smaller blocks on CPU devices")
    parser.add_argument("--scale", type=float,
                        help="multiply block sizes by this (default 1 on GPUs, 1/16 on the "
                             "CPU, 1/64 with --quick); entry counts stay")
    parser.add_argument("--reps", type=int, help="timed repetitions per method")
    parser.add_argument("--warmup", type=int, help="untimed calls before timing")
    parser.add_argument("--cache-bytes", type=parse_bytes,
                        help="last-level cache size used to decide buffer rotation "
                             "(default: the GPU's L2, 32M on CPUs)")
    parser.add_argument("--host-calls", type=int, help="calls for the host-side cost (0: skip)")
    parser.add_argument("--threads", type=int,
                        help="torch CPU threads (default: torch's choice); 1 avoids thread "
                             "wake-up stalls in copy_ on a busy machine")
    parser.add_argument("--out", default="bench-out", help="directory for bench.json/.png")
    return parser


class Progress:
    def __init__(self):
        self.start = time.perf_counter()

    def __call__(self, msg):
        print(f"[bench {time.perf_counter() - self.start:6.1f}s] {msg}", file=sys.stderr,
              flush=True)


def _load_op(name="xpu_state_copy"):
    try:
        return importlib.import_module(name), None
    except Exception as exc:  # noqa: BLE001 - peers still run; the build's methods report FAILED
        return None, f"import {name} failed: {type(exc).__name__}: {exc}"


def _load_baseline(name, op):
    """(module, import error) of the --baseline build, or None without one."""
    if not name:
        return None
    baseline, error = _load_op(name)
    if baseline is not None and op is not None and getattr(baseline, "__file__", 0) == getattr(op, "__file__", 1):
        return None, f"--baseline {name} is this build itself ({op.__file__}), not an older one"
    return baseline, error


def _workloads(args, scale):
    """Named workloads shrink by the device's default scale; sizes typed on the
    command line are kept unless --scale itself was given."""
    named = {**named_workloads(), **spec_decode.named_workloads()}
    chosen = []
    for name in filter(None, args.workloads.split(",")):
        if name == "none":
            continue
        if name not in named:
            raise ValueError(f"unknown workload {name!r}; known: {', '.join(named)}")
        wl = named[name]
        chosen.append(wl.scaled(scale) if isinstance(wl, spec_decode.SpecDecodeWorkload) else scaled(wl, scale))
    if (args.copies is None) != (args.bytes is None):
        raise ValueError("--copies and --bytes go together")
    custom = []
    if args.copies is not None:
        size = parse_bytes(args.bytes)
        custom.append(Workload(f"{args.copies}x{args.bytes}", [Term(1, size, args.copies)]))
    for spec in args.spec:
        name = spec if args.requests == 1 else f"{spec}*{args.requests}"
        custom.append(Workload(name, parse_spec(spec, args.requests)))
    chosen += [w if args.scale is None else scaled(w, scale) for w in custom]
    if not chosen:
        raise ValueError("no workload selected")
    return chosen


def _defaults(args, on_gpu):
    scale = args.scale if args.scale is not None else (1.0 if on_gpu else (1 / 64 if args.quick else 1 / 16))
    reps = args.reps or ((30 if args.quick else 100) if on_gpu else (5 if args.quick else 10))
    warmup = args.warmup if args.warmup is not None else (3 if args.quick or not on_gpu else 10)
    host_calls = args.host_calls if args.host_calls is not None else (200 if on_gpu else 40)
    return scale, reps, warmup, host_calls


def _measure(candidates, clock, reps, warmup, log):
    """Result entries of one workload's methods, in order. Each candidate is a
    finished entry (n/a, or failed to set up) or (key, label, calls, target):
    every one of those is verified first, and those that pass are timed taking
    turns (Clock.time_in_turns)."""
    entries, timed = [], []
    for c in candidates:
        if isinstance(c, dict):
            log(f"  {c['key']}: {c['status']} ({c['error']})")
            entries.append(c)
            continue
        key, label, calls, target = c
        log(f"  verifying {key}")
        error = verify.verify(calls, target, clock.sync)
        if error:
            log(f"  {key} FAILED verification: {error}")
            entries.append({"key": key, "label": label, "status": "FAILED", "error": error})
        else:
            entries.append({"key": key, "label": label, "status": "ok"})
            timed.append((entries[-1], calls))
    if timed:
        log(f"  timing {', '.join(e['key'] for e, _ in timed)} in turns ({reps} reps)")
        for (entry, _), samples in zip(timed, clock.time_in_turns([c for _, c in timed], reps, warmup)):
            s = summarize(samples)
            entry.update({"median_ms": s["median_s"] * 1e3, "p10_ms": s["p10_s"] * 1e3,
                          "p90_ms": s["p90_s"] * 1e3, "reps": s["samples"]})
    return entries


def _run_spec_decode(wl, builds, span_methods, with_triton, wanted, dev, clock, cache_bytes, reps, warmup, log):
    rotations = rotation_count(wl, cache_bytes)
    log(f"{wl.name}: {wl.entries} entries, {wl.total_bytes / 2**20:.1f} MiB move, {rotations} buffer set(s)")
    result = spec_decode.run_workload(
        wl, builds, with_triton, wanted, dev, rotations,
        lambda candidates: _measure(candidates, clock, reps, warmup, log), span_methods)
    report.fill_ratios(result)
    return result


def _run_workload(wl, methods, dev, clock, cache_bytes, reps, warmup, log):
    rotations = rotation_count(wl, cache_bytes)
    log(f"{wl.name}: {wl.entries} entries, {wl.total_bytes / 2**20:.1f} MiB, "
        f"{rotations} buffer set(s)")
    result = {"name": wl.name, "description": wl.describe(), "entries": wl.entries,
              "total_bytes": wl.total_bytes, "rotations": rotations, "methods": []}
    if wl.states and any(m.key == peers.COPY_STATES for m in methods):
        result["primary"] = peers.COPY_STATES  # "ours x" compares every method with copy_states_
    # The roofline's buffers are freed before the workload's are allocated (a GPU of a few GiB holds one
    # set at a time), so it is timed alone, before the methods.
    roof = peers.Roofline(wl.total_bytes, rotations, dev)
    result["methods"] += _measure([(roof.key, roof.label, roof.calls, roof)], clock, reps, warmup, log)
    del roof
    buffers = allocate(wl, dev, rotations)
    target = verify.TableCheck(buffers)
    sets = [buffers.entry_views(k) for k in range(rotations)]
    candidates = []
    for m in methods:
        if m.build_states is not None and not wl.states:
            continue  # it copies states, not arbitrary pointer tables
        build = (lambda m=m: m.build_states(buffers, dev)) if m.build_states is not None else (
            lambda m=m: m.build(sets, dev))
        candidates.append(peers.candidate(m.key, m.label, build, target))
    result["methods"] += _measure(candidates, clock, reps, warmup, log)
    report.fill_ratios(result)
    return result


def _host_cost(methods, dev, clock, calls, log):
    wl = Workload("host-cost", [Term(72, 4096, HOST_COST_ENTRIES // 72)])
    sets = [allocate(wl, dev, 1).entry_views(0)]
    out = {"entries": wl.entries, "methods": {}}
    if dev.type == "cpu":
        out["note"] = "; on the CPU this includes the copy itself (4 KiB entries)"
    for m in methods:
        if m.key == "copy_" or m.build_states is not None:
            continue  # copy_: 1152 launches, its cost is in the table already; state methods need states
        if m.key.startswith("triton") and dev.type == "cpu":
            continue  # interpreted on the CPU: minutes per call, and meaningless
        log(f"host cost of {m.key} ({calls} calls)")
        try:
            s = clock.host_cost(m.build(sets, dev)[0], calls=calls)
            out["methods"][m.key] = {"median_us": s["median_s"] * 1e6,
                                     "p10_us": s["p10_s"] * 1e6, "p90_us": s["p90_s"] * 1e6}
        except Exception as exc:  # noqa: BLE001
            out["methods"][m.key] = {"status": "FAILED", "error": f"{type(exc).__name__}: {exc}"[:300]}
    return out


def run(args):
    log = Progress()
    op, op_error = _load_op()
    try:
        label, dev, backend = resolve_device(args.device, op)
    except ValueError as exc:
        print(f"xpu-state-copy bench: {exc}", file=sys.stderr)
        return 2
    on_gpu = dev.type in ("cuda", "xpu")
    if args.threads:
        torch.set_num_threads(args.threads)
    scale, reps, warmup, host_calls = _defaults(args, on_gpu)
    try:
        workloads = _workloads(args, scale)
    except ValueError as exc:
        print(f"xpu-state-copy bench: {exc}", file=sys.stderr)
        return 2
    with_triton = {"on": True, "off": False}.get(args.triton, triton_peers.usable_on(dev.type))
    wanted = set(args.methods.split(",")) if args.methods else None
    baseline = _load_baseline(args.baseline, op)
    cuda_methods, cuda_note = cuda_peers.bench_methods(dev, wanted, log)
    if cuda_note:
        log(cuda_note)
    methods = peers.table_methods(op, with_triton, op_error, baseline, cuda_methods)
    if wanted:
        methods = [m for m in methods if m.key in wanted]
    builds = [(peers.OURS, "ours", op, op_error)] + ([(peers.BASELINE, "baseline", *baseline)] if baseline else [])
    clock = Clock(dev)
    cache = args.cache_bytes or describe_device(dev)["cache_bytes"]
    torch.manual_seed(0)
    result = {"meta": {
        "device_label": label, "device": str(dev), "device_name": describe_device(dev)["name"],
        "backend": backend, "torch": torch.__version__, "triton": triton_peers.triton_version(),
        "python": platform.python_version(), "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "scale": scale,
        "reps": reps, "warmup": warmup, "cache_bytes": cache,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv[1:], "notes": [cuda_note] if cuda_note else []}, "workloads": []}
    if baseline:
        result["meta"]["baseline"] = {"module": args.baseline, "file": getattr(baseline[0], "__file__", None),
                                      "error": baseline[1]}
    for wl in workloads:
        if isinstance(wl, spec_decode.SpecDecodeWorkload):
            result["workloads"].append(_run_spec_decode(wl, builds, cuda_methods, with_triton, wanted, dev, clock,
                                                        cache, reps, warmup, log))
        else:
            result["workloads"].append(_run_workload(wl, methods, dev, clock, cache, reps, warmup, log))
        gc.collect()
        if on_gpu:
            getattr(torch, dev.type).empty_cache()
    if host_calls > 0:
        result["host_cost"] = _host_cost(methods, dev, clock, host_calls, log)
    print(report.format_report(result))
    os.makedirs(args.out, exist_ok=True)
    paths = [report.write_json(result, args.out), report.write_png(result, args.out)]
    print("\nwrote " + ", ".join(p for p in paths if p))
    if paths[1] is None:
        print(report.PNG_HINT)
    failed = [f"{w['name']}/{m['key']}" for w in result["workloads"] for m in w["methods"]
              if m["status"] not in ("ok", "n/a")]
    if failed:
        print("FAILED verification: " + ", ".join(failed), file=sys.stderr)
    return 1 if failed else 0


def main(argv=None):
    parser = add_arguments(argparse.ArgumentParser(prog="xpu-state-copy bench",
                                                   description=__doc__))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
