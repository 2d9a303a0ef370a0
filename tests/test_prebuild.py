"""The kernels' background build (prebuild.py, started by the engine plugins through plugin_switch): it
builds them before the first copy, so that copy builds nothing; a copy that comes during the build waits
for it instead of building again; a failed build is logged once and the first copy builds again.

The builds run in child processes, each with its own SYCL runtime (a process builds a device's kernels
once), on the SYCL CPU device standing in for the XPU device (CPU tensors with XPU_STATE_COPY_BACKEND=sycl)
and on the XPU device where there is one. kernel_builds() counts the builds a process made.
"""
import json
import logging
import os
import subprocess
import sys

import pytest
import torch

from conftest import HAS_XPU, NO_XPU
from xpu_state_copy import _loader, import_hook, plugin_switch, prebuild
from xpu_state_copy.sglang import plugin as sglang_plugin
from xpu_state_copy.vllm import plugin as vllm_plugin
from xpu_state_copy.vllm.compat import MAMBA_UTILS

# kernel_builds() counts the builds of the sycl-jit provider; an icpx build (sycl-aot) keeps no such record.
needs_sycl_jit = pytest.mark.skipif(
    _loader._C.built_with_sycl_aot or (_loader._sycl_module is None
                                       and os.environ.get("XPU_STATE_COPY_REQUIRE_SYCL") != "1"),
    reason="no sycl-jit backend, whose kernel_builds() counts the builds")

# argv: device ("cpu": the SYCL CPU device as a stand-in XPU; "xpu"), then what the background build does:
# "wait" (the test waits for it before copying), "race" (copies at once) or "fail" (its build raises).
CHILD = r"""
import json, logging, sys
import torch
from xpu_state_copy import _loader, copy_states_, plugin_switch, prebuild

device, mode = sys.argv[1], sys.argv[2]
records = []
log = logging.getLogger("stand_in_engine")
log.addHandler(type("Keep", (logging.Handler,), {"emit": lambda self, r: records.append(r)})())
log.setLevel(logging.INFO)
builds = _loader._sycl_module.kernel_builds
if device == "cpu":
    prebuild._devices_to_prepare = lambda first: [torch.device("cpu")]  # the SYCL CPU device stands in
if mode == "fail":
    def fail(device):
        raise RuntimeError("simulated build failure")
    _loader._sycl_module.prepare_kernels = fail
plugin_switch.build_kernels_when_imported(lambda: (True, "test"), "stand_in_worker", log)
seen = {"before_import": len(builds()), "devices": torch.xpu.device_count() if device == "xpu" else 1}
import stand_in_worker  # noqa: E402  the module an engine's worker imports: the build starts here
if mode != "race":
    prebuild.wait()
    seen["after_build"] = len(builds())
torch.manual_seed(int.from_bytes(__import__("os").urandom(4), "little"))
pool = torch.randint(-2**31, 2**31 - 1, (6, 4099), dtype=torch.int32, device=device)
blocks = torch.randperm(6).tolist()  # two requests on four distinct blocks
src, dst = blocks[:2], blocks[2:4]
expected = pool.clone()
expected[dst] = pool[src]
copy_states_([pool], ["whole"], torch.tensor(src, device=device), torch.tensor(dst, device=device))
if device == "xpu":
    torch.xpu.synchronize()
prebuild.wait()
seen.update(after_copy=len(builds()), correct=bool(torch.equal(pool, expected)),
            logged=[(r.levelname, r.getMessage()) for r in records])
print(json.dumps(seen))
"""

DEVICES = [pytest.param("cpu", id="sycl-cpu"),
           pytest.param("xpu", id="xpu", marks=pytest.mark.skipif(not HAS_XPU, reason=NO_XPU))]


def run_child(tmp_path, device, mode):
    (tmp_path / "stand_in_worker.py").write_text("# stands in for the module an engine plugin patches\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    env.pop(prebuild.ENV_SWITCH, None)
    if device == "cpu":
        env["XPU_STATE_COPY_BACKEND"] = "sycl"
    run = subprocess.run([sys.executable, "-c", CHILD, device, mode], env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@needs_sycl_jit
@pytest.mark.parametrize("device", DEVICES)
def test_the_background_build_readies_the_kernels_and_the_first_copy_builds_nothing(tmp_path, device):
    seen = run_child(tmp_path, device, "wait")
    assert seen["before_import"] == 0, "the build must wait for the module's import"
    assert seen["after_build"] == seen["devices"] and seen["after_copy"] == seen["devices"], seen
    assert seen["correct"]
    assert [level for level, _ in seen["logged"]] == ["INFO"] * seen["devices"], seen["logged"]
    assert all("built in the background" in message for _, message in seen["logged"])


@needs_sycl_jit
def test_a_copy_during_the_background_build_waits_for_it_instead_of_building_again(tmp_path):
    seen = run_child(tmp_path, "cpu", "race")
    assert seen["after_copy"] == 1 and seen["correct"], seen


@needs_sycl_jit
def test_a_failed_background_build_is_logged_once_and_the_first_copy_builds_again(tmp_path):
    seen = run_child(tmp_path, "cpu", "fail")
    assert seen["after_build"] == 0, seen
    warnings = [message for level, message in seen["logged"] if level == "WARNING"]
    assert len(warnings) == 1 and len(seen["logged"]) == 1, seen["logged"]
    assert "simulated build failure" in warnings[0] and "builds them again" in warnings[0]
    assert seen["after_copy"] == 1 and seen["correct"], seen


@pytest.mark.parametrize("plugin, module_name", [(vllm_plugin, MAMBA_UTILS),
                                                 (sglang_plugin, sglang_plugin.MEMORY_POOL)])
def test_each_plugin_starts_the_build_when_its_module_is_imported(monkeypatch, plugin, module_name):
    calls = []
    monkeypatch.setattr(plugin_switch, "build_kernels_when_imported", lambda *args: calls.append(args))
    monkeypatch.setenv(plugin.ENV_SWITCH, "0")  # nothing else of register() runs
    plugin.register()
    assert calls == [(plugin.activation, module_name, plugin.logger)]


@pytest.mark.parametrize("setting, active", [("0", True), ("", False)])
def test_no_build_starts_when_switched_off_or_inactive(monkeypatch, meta_path_without_hooks, setting, active):
    monkeypatch.setenv(prebuild.ENV_SWITCH, setting)
    started = []
    monkeypatch.setattr(prebuild, "start", lambda **kwargs: started.append(kwargs))
    plugin_switch.build_kernels_when_imported(lambda: (active, "test"), "json", logging.getLogger("test"))
    plugin_switch.build_kernels_when_imported(lambda: (active, "test"), "not_imported_yet", logging.getLogger("t"))
    assert started == [] and not any(isinstance(f, import_hook.AfterImport) for f in sys.meta_path)


def test_the_build_starts_at_once_for_an_imported_module_and_hooks_one_not_yet_imported(
        monkeypatch, meta_path_without_hooks):
    monkeypatch.delenv(prebuild.ENV_SWITCH, raising=False)
    started = []
    monkeypatch.setattr(prebuild, "start", lambda **kwargs: started.append(kwargs["log"].name))
    plugin_switch.build_kernels_when_imported(lambda: (True, "test"), "json", logging.getLogger("first"))
    assert started == ["first"]
    for _ in range(2):  # engines may register a plugin twice: one hook, one call in it
        plugin_switch.build_kernels_when_imported(lambda: (True, "test"), "later", logging.getLogger("second"))
    hooks = [f for f in sys.meta_path if isinstance(f, import_hook.AfterImport)]
    assert [h.name for h in hooks] == ["later"] and len(hooks[0].calls) == 1 and started == ["first"]


def test_the_xpu_devices_are_prepared_current_first_without_setting_xpu_up(monkeypatch):
    fake = type("FakeXpu", (), {"is_available": staticmethod(lambda: True),
                                "device_count": staticmethod(lambda: 3),
                                "is_initialized": staticmethod(lambda: False),
                                "current_device": staticmethod(lambda: pytest.fail("would set XPU up"))})
    monkeypatch.setattr(torch, "xpu", fake, raising=False)
    assert prebuild._current_xpu_index() is None
    assert prebuild._devices_to_prepare(None) == [torch.device("xpu", i) for i in (0, 1, 2)]
    assert prebuild._devices_to_prepare(1) == [torch.device("xpu", i) for i in (1, 0, 2)]
    monkeypatch.setattr(fake, "is_initialized", staticmethod(lambda: True))
    monkeypatch.setattr(fake, "current_device", staticmethod(lambda: 2))
    assert prebuild._current_xpu_index() == 2


def test_a_device_whose_backend_builds_nothing_is_not_prepared(monkeypatch):
    monkeypatch.delenv("XPU_STATE_COPY_BACKEND", raising=False)
    assert prebuild.prepare("cpu") is False


@needs_sycl_jit
def test_the_native_entry_names_a_device_it_cannot_prepare():
    for bad in ("cuda:0",) + (() if HAS_XPU else ("xpu:0",)):
        with pytest.raises(RuntimeError, match=f"got '{bad}'"):
            _loader._sycl_module.prepare_kernels(bad)
