"""First use: how long a fresh process takes from its start to its first verified copy on the SYCL CPU
device (the Intel OpenCL CPU device), and how much of that is building the kernels.

    python -m benchmarks.first_copy [--runs 2] [--json FILE]        (from the source tree)
    python -m xpu_state_copy.benchmarks.first_copy [...]             (installed)

Four configurations: kernels built from the SYCL source (XPU_STATE_COPY_DEVICE_IMAGE=off) or from the
shipped SPIR-V image (=on), with SYCL's persistent cache off (SYCL_CACHE_PERSISTENT=0) or on
(SYCL_CACHE_PERSISTENT=1 on a new, empty SYCL_CACHE_DIR). Every run is a new interpreter, because a process
builds a device's kernels once. With the cache on, a second process then starts on the folder the first
one left: it should load the kernels instead of building them, so its column shows whether one process
fills the cache. Prints a markdown table of seconds and the machine's load average before and after, since
compile times on a shared machine say little without it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# The child: time from its start to its first verified copy, and how its kernels were built. A copy of
# random blocks through copy_states_, checked byte for byte against the same copy done by torch.
CHILD = r"""
import json, os, time
start = time.monotonic()
import torch
import xpu_state_copy
from xpu_state_copy import _loader, device_image
torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
pool = torch.randint(-2**31, 2**31 - 1, (6, 4099), dtype=torch.int32)
# Two requests on four distinct blocks: a block both read and written would be a race, not a test.
blocks = torch.randperm(6).tolist()
src, dst = blocks[:2], blocks[2:4]
expected = pool.clone()
expected[dst] = pool[src]
xpu_state_copy.copy_states_([pool], ["whole"], torch.tensor(src), torch.tensor(dst))
print(json.dumps({"seconds": time.monotonic() - start, "correct": bool(torch.equal(pool, expected)),
                  "builds": _loader._sycl_module.kernel_builds(), "status": device_image.status()}))
"""

# (label, XPU_STATE_COPY_DEVICE_IMAGE, SYCL_CACHE_PERSISTENT)
CONFIGURATIONS = [("the source", "off", "0"), ("the image", "on", "0"),
                  ("the source", "off", "1"), ("the image", "on", "1")]


def run_child(timeout=900, **env):
    """(result dict, stderr) of one fresh interpreter running CHILD on the SYCL CPU device; raises if it
    failed. `env` is added to this process's environment."""
    environment = dict(os.environ, XPU_STATE_COPY_BACKEND="sycl", **env)
    run = subprocess.run([sys.executable, "-c", CHILD], env=environment, capture_output=True, text=True,
                         timeout=timeout)
    if run.returncode != 0:
        raise RuntimeError(f"the first-copy child exited with {run.returncode}: {run.stderr[-3000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1]), run.stderr


def measure(image, cache):
    """One run: a fresh process on an empty cache folder, and with the cache on, a second one after it.
    Returns {"first": result, "next": result or None}."""
    with tempfile.TemporaryDirectory(prefix="xsc-first-copy-") as cache_dir:
        env = {"XPU_STATE_COPY_DEVICE_IMAGE": image, "SYCL_CACHE_PERSISTENT": cache, "SYCL_CACHE_DIR": cache_dir}
        results = [run_child(**env)[0] for _ in range(2 if cache == "1" else 1)]
    for result in results:
        if not result["correct"]:
            raise RuntimeError(f"the first copy was wrong (image={image}, cache={cache}): {result}")
    return {"first": results[0], "next": results[1] if len(results) > 1 else None}


def _built(result):
    """'12.3 s' of the kernel build, with its input when it is not the one asked for."""
    builds = result["builds"]
    if len(builds) != 1:
        return f"{len(builds)} builds"
    return f"{builds[0]['seconds']:.2f} s ({builds[0]['input']})"


def table(rows):
    """rows: [(label, cache, [measure(...), ...])] -> markdown."""
    lines = ["| kernels built from | SYCL_CACHE_PERSISTENT | start to first copy | of which the kernel build "
             "| next process, same cache: first copy; build |", "|---|---|---|---|---|"]
    for label, cache, runs in rows:
        first = ", ".join(f"{r['first']['seconds']:.2f} s" for r in runs)
        built = ", ".join(_built(r["first"]) for r in runs)
        after = ", ".join(f"{r['next']['seconds']:.2f} s; {_built(r['next'])}" for r in runs if r["next"]) or "-"
        state = "1, empty folder" if cache == "1" else "0"
        lines.append(f"| {label} | {state} | {first} | {built} | {after} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2, help="fresh processes per configuration (default 2)")
    parser.add_argument("--json", help="also write every child's result to this file")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    load_before = os.getloadavg()
    rows = [(label, cache, [measure(image, cache) for _ in range(args.runs)])
            for label, image, cache in CONFIGURATIONS]
    load_after = os.getloadavg()
    print(table(rows))
    print(f"\n{os.cpu_count()} CPUs; load average (1, 5, 15 min) before: "
          f"{', '.join(f'{x:.2f}' for x in load_before)}; after: {', '.join(f'{x:.2f}' for x in load_after)}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"rows": rows, "load_before": load_before, "load_after": load_after}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
