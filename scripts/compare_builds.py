"""Time several builds of the op side by side, on the same workloads and buffers, in turns: how a kernel
change is judged on the twin before it goes in (the bench's --baseline compares two builds; this any number).

Each build is a source tree renamed by scripts/baseline_tree.py and installed (pip --target) into a folder of
its own; pass NAME=FOLDER for each. Every workload prints one line per method: its ratio to one contiguous
copy of the same bytes (the bench's roofline) and its median time with the p10 - p90 spread.

Usage: python scripts/compare_builds.py NAME=FOLDER [NAME=FOLDER ...] [--workloads a,b] [--reps N]
       [--spec 36x24K,36x512K --requests 2] [--triton]
"""
import argparse
import importlib
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks import peers, run as bench, spec_decode, triton_peers  # noqa: E402
from benchmarks.devices import describe_device  # noqa: E402
from benchmarks.timing import Clock  # noqa: E402
from benchmarks.workloads import DEFAULT_WORKLOADS  # noqa: E402


def load_builds(pairs):
    builds = []
    for pair in pairs:
        name, _, folder = pair.partition("=")
        sys.path.insert(0, os.path.abspath(folder))
        builds.append((name, importlib.import_module(name)))
    return builds


def methods_of(builds, with_triton):
    methods = []
    for name, module in builds:
        methods.append(peers.Method(name, f"{name}: batch_memcpy", peers._ours(module)))
        methods.append(peers.Method(f"{name}:cs", f"{name}: copy_states_", None, peers._copy_states(module)))
    if with_triton:
        methods.append(peers.Method("triton_tiled", "Triton tiled", peers._triton(triton_peers.tiled_call, 8)))
    return methods


def print_result(result):
    """One line per method: its ratio to the roofline (report.fill_ratios, which the bench's runs call), its
    median and spread."""
    print(f"{result['name']}: {result['entries']} entries, {result['total_bytes'] / 2**20:.1f} MiB")
    for m in result["methods"]:
        key = m["key"]
        if m["status"] != "ok":
            print(f"  {key:24s} {m['status']}: {m.get('error', '')}")
            continue
        print(f"  {key:24s} {m.get('ratio', float('nan')):6.3f}  {m['median_ms'] * 1e3:9.1f} us "
              f"({m['p10_ms'] * 1e3:.1f} - {m['p90_ms'] * 1e3:.1f})")
    sys.stdout.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs="+", help="NAME=FOLDER of each renamed, installed build")
    parser.add_argument("--workloads", default=DEFAULT_WORKLOADS)
    parser.add_argument("--spec", action="append", default=[])
    parser.add_argument("--requests", type=int, default=1)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--triton", action="store_true")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    dev = torch.device(args.device)
    builds = load_builds(args.builds)
    methods = methods_of(builds, args.triton)
    ns = argparse.Namespace(workloads=args.workloads, copies=None, bytes=None, spec=args.spec,
                            requests=args.requests, scale=None)
    clock, cache = Clock(dev), describe_device(dev)["cache_bytes"]
    print(describe_device(dev)["name"], "torch", torch.__version__)
    torch.manual_seed(0)
    for wl in bench._workloads(ns, 1.0):
        if isinstance(wl, spec_decode.SpecDecodeWorkload):
            result = bench._run_spec_decode(wl, [(name, name, module, None) for name, module in builds], (),
                                            args.triton, None, dev, clock, cache, args.reps, args.warmup,
                                            lambda message: None)
        else:
            result = bench._run_workload(wl, methods, dev, clock, cache, args.reps, args.warmup,
                                         lambda message: None)
        print_result(result)
        if dev.type == "cuda":
            torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
