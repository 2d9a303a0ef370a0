"""The bench's --baseline: an older build of the op (scripts/baseline_tree.py renames its tree so that it
loads beside this one) is verified and timed in the same run as ours, in turns, and a wrong, missing or
identical baseline is reported FAILED, not timed. Here the older build is a stand-in module on the CPU;
scripts/device_cuda.sh (BASELINE=DIR) runs the real one on a GPU. Also the summary table they share."""
import importlib
import pathlib
import sys

import pytest

from test_bench import _real_op, _run, _stub_op, bench


def _baseline_run(tmp_path, monkeypatch, baseline):
    """A run with an older build given as --baseline (a stub module standing in for it)."""
    if _real_op() is None:
        monkeypatch.setitem(sys.modules, "xpu_state_copy", _stub_op())
    if baseline is not None:
        monkeypatch.setitem(sys.modules, "xsc_old_build", baseline)
    return _run(tmp_path, "--device", "cpu", "--triton", "off", "--baseline", "xsc_old_build")


def test_a_baseline_build_is_verified_and_timed_beside_ours(tmp_path, monkeypatch, capsys):
    rc, result = _baseline_run(tmp_path, monkeypatch, _stub_op())
    assert rc == 0 and result["meta"]["baseline"]["module"] == "xsc_old_build"
    for w in result["workloads"]:
        keys = [m["key"] for m in w["methods"]]
        assert keys[:3] == ["contiguous", "ours", "baseline"]  # beside ours, before the peers
        baseline = w["methods"][2]
        assert baseline["status"] == "ok" and baseline["ratio"] > 0 and "ours_speedup" in baseline
    assert "baseline" in result["host_cost"]["methods"]
    out = capsys.readouterr().out
    assert "baseline: batch_memcpy" in out and "baseline: xsc_old_build from" in out


@pytest.mark.parametrize("case", ["broken", "missing"])
def test_a_wrong_or_missing_baseline_is_reported_failed(tmp_path, monkeypatch, case):
    rc, result = _baseline_run(tmp_path, monkeypatch, _stub_op(broken=True) if case == "broken" else None)
    assert rc == 1
    for w in result["workloads"]:
        methods = {m["key"]: m for m in w["methods"]}
        assert methods["baseline"]["status"] == "FAILED" and "median_ms" not in methods["baseline"]
        assert methods["ours"]["status"] == "ok"
        reason = "bytes wrong" if case == "broken" else "import xsc_old_build failed: ModuleNotFoundError"
        assert reason in methods["baseline"]["error"]


def test_this_build_is_refused_as_its_own_baseline(tmp_path, monkeypatch):
    if _real_op() is None:
        monkeypatch.setitem(sys.modules, "xpu_state_copy", _stub_op())
    op = importlib.import_module("xpu_state_copy")
    monkeypatch.setitem(sys.modules, "xsc_old_build", op)
    if not hasattr(op, "__file__"):
        monkeypatch.setattr(op, "__file__", "/site-packages/xpu_state_copy/__init__.py", raising=False)
    rc, result = _run(tmp_path, "--device", "cpu", "--triton", "off", "--baseline", "xsc_old_build")
    assert rc == 1
    assert all("is this build itself" in {m["key"]: m for m in w["methods"]}["baseline"]["error"]
               for w in result["workloads"])


def test_summary_has_one_column_per_method_in_table_order():
    """Methods that only some workloads have (copy_states_, the spec-decode tables) stand beside the method
    they follow there, not at the end."""
    def workload(name, keys):
        return {"name": name, "methods": [{"key": k, "status": "ok", "ratio": 0.5} for k in keys]}
    result = {"workloads": [workload("step", ["contiguous", "ours", "baseline", "copy_", "cub_batched"]),
                            workload("states", ["contiguous", "copy_states", "ours", "baseline_copy_states",
                                                "baseline", "copy_"])]}
    lines = bench["report"].format_summary(result).splitlines()
    assert lines[1].split() == ["workload", "contiguous", "copy_states", "ours", "baseline_copy_states",
                                "baseline", "copy_", "cub_batched"]
    assert lines[2].split() == ["step", "0.500", "0.500", "0.500", "0.500", "0.500"]
    assert len(lines[3].split()) == 7 and len(lines[2]) <= len(lines[1])


def test_compare_builds_times_every_build_side_by_side(tmp_path, monkeypatch, capsys):
    """scripts/compare_builds.py: each named build gets its own lines, verified against the workload's bytes
    (a build that copies half of every entry is reported FAILED, not timed), with a ratio to the roofline."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "scripts"))
    try:
        compare_builds = importlib.import_module("compare_builds")
    finally:
        sys.path.pop(0)
    good = _real_op() or _stub_op()
    monkeypatch.setitem(sys.modules, "xsc_good_build", good)
    monkeypatch.setitem(sys.modules, "xsc_half_build", _stub_op(broken=True))
    monkeypatch.setattr(sys, "path", list(sys.path))  # the folders it adds go with the test
    compare_builds.main([f"xsc_good_build={tmp_path}", f"xsc_half_build={tmp_path}", "--device", "cpu",
                         "--workloads", "tiny", "--reps", "2", "--warmup", "1"])
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert float(lines["contiguous"].split()[1]) == 1.0
    assert float(lines["xsc_good_build"].split()[1]) > 0
    assert "FAILED" in lines["xsc_half_build"]
