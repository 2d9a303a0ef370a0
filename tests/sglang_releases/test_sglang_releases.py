"""The SGLang plugin against real SGLang releases, on CPU (CI: the newest, sglang_envs.NEWEST).

Each run is a subprocess in that release's environment (scenarios.py): our plugin is loaded the way the
release loads plugins (its own load_plugins() and our installed entry point from 0.5.11, register() before),
a real MambaPool is built with random states, and copy_from (and fork_from where the release has it) is
compared byte for byte with SGLang's own method. A release that cannot be installed here is skipped with
pip's reason; XPU_STATE_COPY_REQUIRE_SGLANG=1 (scripts/test.sh) fails instead.
XPU_STATE_COPY_SGLANG_VERSIONS=all runs every release with copy_from (0.5.4 on), or name some: 0.5.4,0.5.16
"""
import json
import os
import pathlib

import pytest

import sglang_envs
from conftest import SYCL_ORIGIN, SYCL_REASON

SCENARIOS = pathlib.Path(__file__).with_name("scenarios.py")
REQUIRE = os.environ.get("XPU_STATE_COPY_REQUIRE_SGLANG") == "1"
STATES_PER_POOL = 3 * 2  # scenarios.make_pool: 3 layers, one conv tensor and the temporal one


def _versions():
    chosen = os.environ.get("XPU_STATE_COPY_SGLANG_VERSIONS", "").strip()
    if chosen == "all":
        return sglang_envs.RELEASES
    return [v.strip() for v in chosen.split(",") if v.strip()] or [sglang_envs.NEWEST]


def _run(version, switch, backend="cpu"):
    """(the scenario's JSON, its log) with the plugin switched on ("1") or off ("0")."""
    if backend == "sycl" and SYCL_ORIGIN is None and os.environ.get("XPU_STATE_COPY_REQUIRE_SYCL") != "1":
        pytest.skip(f"no SYCL backend: {SYCL_REASON}")
    env = {"XPU_STATE_COPY_SGLANG": switch, "XPU_STATE_COPY_BACKEND": "sycl" if backend == "sycl" else None}
    try:
        done = sglang_envs.run_in_sglang(version, [str(SCENARIOS), version], env, timeout=600)
    except sglang_envs.EnvUnavailable as why:
        message = f"SGLang {version}: {why}"
        if REQUIRE:
            pytest.fail(f"XPU_STATE_COPY_REQUIRE_SGLANG=1 but {message}")
        pytest.skip(message)
    assert done.returncode == 0, f"scenarios failed on SGLang {version}:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.parametrize("backend", ["cpu", "sycl"])
@pytest.mark.parametrize("version", _versions())
def test_copy_from_is_one_launch_and_matches_sglang(version, backend):
    result, log = _run(version, "1", backend)
    assert result["patched"], f"the plugin did not replace MambaPool.copy_from of SGLang {version}:\n{log[-3000:]}"
    assert "now copies in one launch" in log
    # SGLang loads plugins from entry points from 0.5.11 on; before, register() is called by hand.
    with_plugins = tuple(int(part) for part in version.split(".")) >= (0, 5, 11)
    assert result["loaded_by"] == ("sglang.srt.plugins.load_plugins()" if with_plugins else "register()"), result
    assert result["backend"] == ("cpu" if backend == "cpu" else SYCL_ORIGIN), result
    assert result["copy_ok"], f"copy_from differs from SGLang's own on {version}"
    assert result["copy_launches"] == 1 and result["states_per_launch"] == [STATES_PER_POOL], result
    assert result["chain_ok"] and result["chain_launches"] == 0, result  # a chain goes to SGLang's method
    assert "handed to SGLang for a destination slot that another copy reads" in log
    if result["fork_ok"] is not None:  # releases with fork_from
        assert result["fork_ok"] and result["fork_launches"] == 1, result
    if result["fallback"] is not None:  # a ReplaySSM pool: SGLang's own method, which also resets the cursor
        assert result["fallback"] == {"ok": True, "served": 0, "write_pos_reset": True}, result
        assert "left to SGLang for this pool: the pool uses replayssm_write_pos" in log


def test_switched_off_the_plugin_leaves_sglang_alone():
    result, log = _run(sglang_envs.NEWEST, "0")
    assert not result["patched"] and result["copy_launches"] == 0, result
    assert result["copy_ok"]  # SGLang's own method against itself: the scenario's check can pass
    assert "xpu_state_copy: " not in log  # none of the plugin's lines (SGLang itself lists the entry point)


def test_the_plugin_names_the_newest_release_these_tests_verify():
    from xpu_state_copy.sglang import plugin as sglang_plugin

    assert sglang_plugin.VERIFIED == (sglang_envs.RELEASES[0], sglang_envs.NEWEST)
