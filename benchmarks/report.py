"""Turn measurements into the printed table, the JSON file and the PNG chart."""
import json
import os

from .peers import OURS, ROOFLINE
from .workloads import format_bytes


def fill_ratios(workload_result):
    """GB/s (bytes read + bytes written), ratio to the roofline, and how many
    times faster our op is than each method."""
    methods = workload_result["methods"]
    by_key = {m["key"]: m for m in methods}
    roof = by_key.get(ROOFLINE)
    ours = by_key.get(workload_result.get("primary", OURS))
    moved = 2 * workload_result["total_bytes"]
    for m in methods:
        if m["status"] != "ok":
            continue
        m["gbps"] = moved / (m["median_ms"] / 1e3) / 1e9
        if roof and roof["status"] == "ok":
            m["ratio"] = roof["median_ms"] / m["median_ms"]
        if ours and ours["status"] == "ok" and m is not ours:
            m["ours_speedup"] = m["median_ms"] / ours["median_ms"]


def _fmt(value, spec):
    """Format a number, or a right-aligned '-' of the same width when absent."""
    if value is not None:
        return format(value, spec)
    width = int(spec.split(".")[0] or 0)
    return "-".rjust(width)


def format_workload(w):
    head = (f"{w['name']}: {w['entries']} entries, {format_bytes(w['total_bytes'])} "
            f"({w['description']}), {w['rotations']} buffer set(s)")
    width = max([38] + [len(m["label"]) + 2 for m in w["methods"]])
    lines = [head,
             f"  {'method':<{width}}{'ms':>10}{'p10':>10}{'p90':>10}{'GB/s':>9}{'ratio':>8}{'ours x':>9}"]
    for m in w["methods"]:
        if m["status"] != "ok":
            lines.append(f"  {m['label']:<{width}}{m['status']}: {m.get('error', '')}")
            continue
        lines.append(
            f"  {m['label']:<{width}}{m['median_ms']:>10.4f}{m['p10_ms']:>10.4f}{m['p90_ms']:>10.4f}"
            f"{_fmt(m.get('gbps'), '9.1f')}{_fmt(m.get('ratio'), '8.3f')}"
            f"{_fmt(m.get('ours_speedup'), '9.2f')}")
    return "\n".join(lines)


def format_summary(result):
    """One line per workload, one column per method of any workload (its key): every method's ratio,
    as problem.md's table."""
    keys = []
    for w in result["workloads"]:  # a key first seen in a later workload goes right after its predecessor there
        previous = None
        for m in w["methods"]:
            if m["key"] not in keys:
                keys.insert(keys.index(previous) + 1 if previous in keys else len(keys), m["key"])
            previous = m["key"]
    widths = {k: max(9, len(k) + 2) for k in keys}
    lines = ["ratio to roofline (1.0 = one contiguous copy of the same bytes)",
             "  " + f"{'workload':<12}" + "".join(f"{k:>{widths[k]}}" for k in keys)]
    for w in result["workloads"]:
        by_key = {m["key"]: m for m in w["methods"]}
        cells = []
        for k in keys:
            m, width = by_key.get(k), widths[k]
            if m is None:
                cells.append(" " * width)
            elif m["status"] != "ok":
                cells.append(f"{m['status']:>{width}}")
            else:
                cells.append(_fmt(m.get("ratio"), f"{width}.3f"))
        lines.append("  " + f"{w['name']:<12}" + "".join(cells))
    return "\n".join(lines)


def format_host_cost(hc):
    if not hc:
        return ""
    lines = [f"host-side cost of one call with {hc['entries']} entries "
             f"(host timer, device not drained){hc.get('note', '')}"]
    for key, m in hc["methods"].items():
        if m.get("status", "ok") != "ok":
            lines.append(f"  {key:<20}{m['status']}: {m.get('error', '')}")
        else:
            lines.append(f"  {key:<20}median {m['median_us']:9.1f} us   "
                         f"p10 {m['p10_us']:9.1f}   p90 {m['p90_us']:9.1f}")
    return "\n".join(lines)


def format_report(result):
    meta = result["meta"]
    parts = [f"xpu-state-copy bench on {meta['device_label']} ({meta['device_name']}), "
             f"backend {meta['backend']}, torch {meta['torch']}, triton {meta['triton'] or 'absent'}"]
    baseline = meta.get("baseline")
    if baseline:
        parts.append(f"baseline: {baseline['module']} from {baseline['file'] or baseline['error']}")
    parts += meta.get("notes", [])
    if meta.get("scale", 1) < 1:
        parts.append(f"NOTE: block sizes scaled by {meta['scale']:g} for this device "
                     "(entry counts unchanged); numbers are not comparable to full-size runs.")
    parts += [format_workload(w) for w in result["workloads"]]
    parts.append(format_summary(result))
    host = format_host_cost(result.get("host_cost"))
    if host:
        parts.append(host)
    return "\n\n".join(parts)


def write_json(result, out_dir):
    path = os.path.join(out_dir, "bench.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
    return path


PNG_HINT = "no bench.png: matplotlib is not installed (pip install 'xpu-state-copy[bench]' or pip install matplotlib)"


def write_png(result, out_dir):
    """Grouped bars: ratio to roofline per workload and method (log scale, since
    peers range from 0.001 to 1).  Returns the path, or None without matplotlib
    (an optional dependency: the `bench` extra)."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = result["workloads"]
    keys = []
    for w in workloads:
        keys += [m["key"] for m in w["methods"] if m["key"] not in keys]
    width = 0.8 / max(1, len(keys))
    fig, ax = plt.subplots(figsize=(max(6, 2.2 * len(workloads)), 4.5))
    for j, key in enumerate(keys):
        xs, ys = [], []
        for i, w in enumerate(workloads):
            m = next((m for m in w["methods"] if m["key"] == key), None)
            if m and m.get("ratio"):
                xs.append(i + (j - (len(keys) - 1) / 2) * width)
                ys.append(m["ratio"])
        ax.bar(xs, ys, width, label=key)
    ax.set_xticks(range(len(workloads)), [w["name"] for w in workloads])
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("ratio to one contiguous copy (1.0 = roofline)")
    meta = result["meta"]
    ax.set_title(f"xpu_state_copy bench, {meta['device_label']} ({meta['device_name']})", fontsize=10)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    path = os.path.join(out_dir, "bench.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
