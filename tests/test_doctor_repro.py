"""`xpu-state-copy doctor` and `repro` on this machine, and the doctor's verdict on made-up findings."""
import argparse
import json

import pytest
import torch

from xpu_state_copy.tools import doctor, repro

OVERFLOW = "ValueError: Overflow when unpacking long long"


def parse(module, argv):
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args(argv)


def test_doctor_json_reports_a_working_copy_here(capsys):
    code = doctor.run(parse(doctor, ["--json"]))
    report = json.loads(capsys.readouterr().out)
    assert report["torch"]["version"] == torch.__version__
    assert report["probe"]["selftest_ok"] and report["probe"]["pointer_table_exact"]
    assert report["backends"]["per_device"]["cpu"] in ("cpu", "sycl-jit", "sycl-aot")
    assert "plugin_entry_point" in report["vllm"] and "plugin_activation" in report["vllm"]
    assert report["sglang"]["plugin_entry_point"] == "xpu_state_copy.sglang.plugin:register"
    assert code == (1 if report["problems"] else 0)


def test_doctor_text_names_every_section(capsys):
    doctor.run(parse(doctor, []))
    out = capsys.readouterr().out
    for heading in ("VLLM_TARGET_DEVICE", "torch", "backend cpu", "vLLM", "plugin:", "SGLang", "probe on"):
        assert heading in out


def affected(plugin_active, unrecognised=()):
    return {"probe": {"selftest_ok": True, "address_has_bit_63": True},
            "vllm": {"version": "0.28.0", "plugin_entry_point": "xpu_state_copy.vllm.plugin:register",
                     "plugin_allowed": True, "plugin_active": plugin_active, "plugin_activation": "test",
                     "layout": {"has_unsafe_pointer_writes": True, "unrecognised": list(unrecognised)}}}


def test_high_addresses_with_unsafe_vllm_and_no_plugin_is_a_problem():
    assert len(doctor.problems(affected(plugin_active=False))) == 1
    assert doctor.problems(affected(plugin_active=True)) == []
    assert len(doctor.problems(affected(plugin_active=True, unrecognised=["odd layout"]))) == 1


def test_low_addresses_or_safe_vllm_is_not_a_problem():
    report = affected(plugin_active=False)
    report["probe"]["address_has_bit_63"] = False
    assert doctor.problems(report) == []
    report = affected(plugin_active=False)
    report["vllm"]["layout"]["has_unsafe_pointer_writes"] = False
    assert doctor.problems(report) == []


def test_failed_selftest_is_a_problem_and_exit_status_says_so(monkeypatch, capsys):
    report = affected(plugin_active=True)
    report["probe"] = {"error": "RuntimeError: no device"}
    assert doctor.problems(report) == ["self-test copy failed: RuntimeError: no device"]
    monkeypatch.setattr(doctor, "collect", lambda args: {**report, "problems": doctor.problems(report)})
    assert doctor.run(parse(doctor, ["--json"])) == 1
    assert json.loads(capsys.readouterr().out)["problems"]


@pytest.mark.parametrize("address, raises", [((1 << 63) - 1, False), (1 << 63, True),
                                             (repro.REPORTED_ADDRESS, True)])
def test_vllms_store_fails_exactly_from_bit_63(address, raises):
    error = repro.store_like_vllm(address)
    assert (error == OVERFLOW) if raises else error is None
    assert repro.store_our_way(address) == address


def test_repro_reproduces_and_fixes_on_cpu(capsys):
    steps = repro.reproduce(torch.device("cpu"))
    assert steps["vllm_store_error"] == OVERFLOW and steps["reproduced"]
    assert steps["copy"]["destinations_exact"] and steps["copy"]["bytes_match"] and steps["fixed"]
    assert repro.run(parse(repro, ["--device", "cpu"])) == 0
    assert "reproduced the crash and the fix works" in capsys.readouterr().out


def test_doctor_names_the_wheel_for_the_torch_vllms_xpu_build_pins():
    from xpu_state_copy.vllm.xpu_torch_pins import wheel_advice

    off_pin = wheel_advice("0.34.0", "2.14.0+cpu", "2.14.0", "3.12")
    assert off_pin["vllm_xpu_pins"] == "2.15.0" and '"torch==2.15.0+xpu"' in off_pin["fix"]
    assert "wheel-sycl-jit-torch2.15.0-xpu-py3.12" in off_pin["fix"]
    stale_build = wheel_advice("0.23.0", "2.11.0+xpu", "2.13.0+cpu", "3.11")
    assert "wheel-sycl-jit-torch2.11.0-xpu-py3.11" in stale_build["fix"] and "built for torch 2.13.0" in stale_build["fix"]
    assert wheel_advice("0.28.0", "2.13.0+xpu", "2.13.0+xpu", "3.12")["fix"] is None
    unknown = wheel_advice("0.99.0", "2.13.0", "2.12.0", "3.12")
    assert unknown["vllm_xpu_pins"] is None and "torch2.13.0" in unknown["fix"]
    assert wheel_advice(None, "2.13.0", "2.13.0", "3.12")["fix"] is None


def test_doctor_prints_the_torch_pin_lines(capsys):
    doctor.run(parse(doctor, []))
    out = capsys.readouterr().out
    for heading in ("torch pinned", "torch installed      " + torch.__version__, "torch built for"):
        assert heading in out
