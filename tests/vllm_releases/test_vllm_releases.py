"""The plugin against real vLLM releases (CI: 0.23.0, 0.28.0, 0.33.0 and the newest verified; it covers
0.22.1 to vllm_envs.NEWEST_VERIFIED), on CPU. A release on the index newer than that is held to the promise for
a layout the plugin does not know: it warns, naming the release and what it did not recognise, and changes
nothing (skipped, saying so, while the index has no such release).

Each release runs twice in a subprocess (scenarios.py): plugin off (XPU_STATE_COPY_VLLM=0) and on (=1),
both times loaded through vLLM's own load_general_plugins() and our installed entry point. A release that
cannot be installed here is skipped with pip's reason; XPU_STATE_COPY_REQUIRE_VLLM=1 (CI) fails instead.
Override the releases with XPU_STATE_COPY_VLLM_VERSIONS=0.23.0,0.29.0,...
"""
import importlib.metadata
import json
import os
import pathlib
import re
import sysconfig

import pytest

import vllm_envs

SCENARIOS = pathlib.Path(__file__).with_name("scenarios.py")
OVERFLOW = "ValueError: Overflow when unpacking long long"  # the error of the original report


def _release(version):
    return tuple(int(part) for part in version.split(".")[:2])


def _chosen():
    chosen = os.environ.get("XPU_STATE_COPY_VLLM_VERSIONS")
    if chosen:
        return [v.strip() for v in chosen.split(",") if v.strip()]
    # 0.23.0: int64 copy tables; 0.28.0: raw stores in the fused context; 0.33.0: the last with the V1 copy path
    return ["0.23.0", "0.28.0", "0.33.0", vllm_envs.NEWEST_VERIFIED, vllm_envs.newest_vllm()]


def _newer(version):
    return _release(version) > _release(vllm_envs.NEWEST_VERIFIED)


def _versions():
    """The releases every check runs on: those the plugin was verified against."""
    return list(dict.fromkeys(v for v in _chosen() if not _newer(v)))


def _unverified():
    """Releases newer than the newest verified one (the index's newest, once vLLM moves on)."""
    return list(dict.fromkeys(v for v in _chosen() if _newer(v)))


def _unverified_or_why_none():
    """_unverified() as test parameters, or one skipped parameter that says why there is none."""
    if _unverified():
        return _unverified()
    if os.environ.get("XPU_STATE_COPY_VLLM_VERSIONS"):
        why = f"XPU_STATE_COPY_VLLM_VERSIONS names no release newer than {vllm_envs.NEWEST_VERIFIED}"
    else:
        newest, error = vllm_envs.newest_on_index()
        why = (f"the index's newest vLLM is {newest}, none newer than the verified {vllm_envs.NEWEST_VERIFIED}"
               if newest else f"cannot ask the index for vLLM's newest release: {error}")
    return [pytest.param(None, marks=pytest.mark.skip(reason=why), id="none-newer")]


def expected_fused(version):
    """The MambaSpecDecodeGPUContext methods the plugin serves on `version`, in the order it names them."""
    fused = ["run_fused_postprocess"] if _release(version) < (0, 34) else []  # the V1 runner's, gone in 0.34
    fused += ["run_fused_precopy", "run_fused_postprocess_align"] if _release(version) >= (0, 25) else []
    return fused + (["compute_aligned_state_indices"] if _release(version) >= (0, 29) else [])


def _our_entry_point():
    try:
        dist = importlib.metadata.distribution("xpu-state-copy")
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((ep.value for ep in dist.entry_points
                 if ep.group == "vllm.general_plugins" and ep.name == "xpu_state_copy"), "")


def _unavailable(reason):
    if os.environ.get("XPU_STATE_COPY_REQUIRE_VLLM") == "1":
        pytest.fail(f"vLLM environment required but unavailable: {reason}")
    pytest.skip(reason)


class Runs:
    def __init__(self, version, off, on, on_output):
        self.version, self.off, self.on, self.on_output = version, off, on, on_output
        self.affected = (0, 22) <= _release(version) <= (0, 28)  # raw data_ptr() into int64 tables
        self.int64_copy_tables = (0, 22) <= _release(version) <= (0, 23)
        self.v1_copy_path = _release(version) < (0, 34)  # batch_memcpy, MambaCopyBuffers & co.


def _no_v1_copy_path(runs, scenario):
    """On a release without the V1 copy path, both runs must say so; then the test has nothing to compare."""
    if runs.v1_copy_path:
        return
    assert runs.off[scenario] == runs.on[scenario] == {"no_v1_copy_path": True}
    pytest.skip(f"vLLM {runs.version} has no V1 copy path (MambaCopyBuffers, batch_memcpy) to run {scenario} on")


def _run(version, plugin):
    done = vllm_envs.run_in_vllm(version, [str(SCENARIOS), plugin, "populate", "collect_high", "copy", "doctor"])
    assert done.returncode == 0, f"scenarios ({plugin}) failed on vLLM {version}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


@pytest.fixture(scope="module", params=_versions())
def runs(request):
    entry_point = _our_entry_point()
    if entry_point is None:
        pytest.skip("xpu_state_copy is not installed as a distribution (pip install . first)")
    assert entry_point == "xpu_state_copy.vllm.plugin:register", "vllm.general_plugins entry point missing"
    try:
        off, _ = _run(request.param, "off")
        on, on_output = _run(request.param, "on")
    except vllm_envs.EnvUnavailable as why:
        _unavailable(f"vLLM {request.param}: {why}")
    for result in (off, on):
        for scenario in ("populate", "collect_high", "copy", "doctor"):
            assert "crash" not in result[scenario], result[scenario]["crash"]
    return Runs(request.param, off, on, on_output)


def test_the_release_under_test_is_the_one_installed(runs):
    assert runs.off["vllm_version"] == runs.on["vllm_version"] == runs.version


def test_unpatched_vllm_fails_the_way_the_report_says_only_on_affected_releases(runs):
    populate = runs.off["populate"]
    if runs.affected:
        assert populate.get("error") == OVERFLOW
    else:
        assert "error" not in populate
        assert populate["state_addrs"] == populate["expected_state_addrs"]


def test_plugin_stores_addresses_with_bit_63_exactly(runs):
    populate = runs.on["populate"]
    assert "error" not in populate, populate.get("error")
    assert all(address >= 1 << 63 for address in populate["expected_state_addrs"])
    assert populate["state_addrs"] == populate["expected_state_addrs"]
    assert populate["block_table_addr"] == populate["expected_block_table_addr"]
    assert populate["table_dtypes"] == ["torch.int64", "torch.int64"]  # vLLM's tables, not replacements


def test_copy_tables_hold_high_addresses_with_the_plugin(runs):
    _no_v1_copy_path(runs, "collect_high")
    collected = runs.on["collect_high"]
    assert collected["table_dtype"] == "torch.uint64"
    assert collected["dst_addrs"] == collected["expected_dst_addrs"]
    if runs.int64_copy_tables:
        assert runs.off["collect_high"]["table_dtype"] == "torch.int64"
        assert runs.off["collect_high"]["error"].startswith("OverflowError")


def test_plugin_copies_the_same_bytes_as_vllms_own_kernel(runs):
    _no_v1_copy_path(runs, "copy")
    ours, theirs = runs.on["copy"], runs.off["copy"]
    assert ours["routed"] and not theirs["routed"]
    assert ours["entries"] == theirs["entries"] == 12
    assert theirs["after"] != theirs["before"], "vLLM's kernel copied nothing: the comparison would be empty"
    assert ours["after"] == theirs["after"]


def test_a_wrapped_do_mamba_copy_block_and_validate_mode_keep_the_copies_ours(runs):
    """As an engine may run it: a profiler's wrapper without __wrapped__ put on do_mamba_copy_block before the
    plugin patched, and XPU_STATE_COPY_VALIDATE=1 over a forward context holding an attention layer."""
    _no_v1_copy_path(runs, "copy")
    done = vllm_envs.run_in_vllm(runs.version, [str(SCENARIOS), "on", "copy"],
                                 extra_env={"SCENARIO_WRAP_COPY_BLOCK": "1", "XPU_STATE_COPY_VALIDATE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    copy = json.loads(done.stdout.strip().splitlines()[-1])["copy"]
    assert "crash" not in copy, copy["crash"]
    assert copy["routed"] and copy["wrapper_calls"] == 1
    assert copy["after"] == runs.off["copy"]["after"]
    output = done.stdout + done.stderr
    assert "does not recognise" not in output and "do_mamba_copy_block is replaced" not in output, output[-3000:]
    assert "validate mode cannot tell" not in output, output[-3000:]


def test_plugin_patches_only_what_the_release_gets_wrong(runs):
    # Every release: the fused spec-decode copies served by our ops, their plan taken at initialisation.
    expected = {"MambaSpecDecodeGPUContext.initialize_from_forward_context"}
    expected |= {"batch_memcpy"} if runs.v1_copy_path else set()
    expected |= {f"MambaSpecDecodeGPUContext.{name}" for name in expected_fused(runs.version)}
    if runs.affected and _release(runs.version) >= (0, 28):  # the addresses are written by a helper there
        expected.add("MambaSpecDecodeGPUContext._populate_metadata")
    if runs.int64_copy_tables:
        expected.add("MambaCopyBuffers.create")
    assert set(runs.on["patched"]) == expected
    assert runs.off["patched"] == []  # XPU_STATE_COPY_VLLM=0 turns it off
    assert runs.on["reapplied"] == []  # a second application changes nothing


def test_plugin_logs_one_line_through_vllms_logger(runs):
    lines = [line for line in runs.on_output.splitlines() if "xpu_state_copy: patched vLLM" in line]
    assert len(lines) == 1, lines
    assert runs.version in lines[0] and "XPU_STATE_COPY_VLLM=0 disables" in lines[0]
    assert ("bit 63" in lines[0]) == runs.affected
    copies = [name for name in expected_fused(runs.version) if name.startswith("run_fused_")]
    assert f"{', '.join(copies)} -> xpu_state_copy.mamba_spec_decode_" in lines[0]
    assert ("compute_aligned_state_indices -> gathers" in lines[0]) == (_release(runs.version) >= (0, 29))
    assert ("batch_memcpy -> xpu_state_copy.batch_memcpy" in lines[0]) == runs.v1_copy_path


def test_doctor_sees_the_unsafe_writes_and_the_plugin(runs):
    off, on = runs.off["doctor"]["vllm"], runs.on["doctor"]["vllm"]
    assert off["version"] == runs.version
    assert off["layout"]["has_unsafe_pointer_writes"] == runs.affected
    assert on["plugin_entry_point"] == "xpu_state_copy.vllm.plugin:register"
    assert (off["plugin_active"], on["plugin_active"]) == (False, True)
    assert on["would_patch"] == off["would_patch"]
    aligned_indices = _release(runs.version) >= (0, 29)
    assert len(on["would_patch"]) == 1 + runs.v1_copy_path + runs.affected + runs.int64_copy_tables + aligned_indices
    assert runs.off["doctor"]["problems"] == []  # CPU addresses never have bit 63 set


def _own_packages():
    """Top-level entries of torch, numpy and setuptools and of everything they require (extras aside)."""
    entries, seen, todo = set(), set(), ["torch", "numpy", "setuptools"]
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        entries.update(f.parts[0] for f in dist.files or []
                       if not f.parts[0].startswith(("..", "__pycache__")))  # .dist-info too: metadata
        todo += [re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0] for r in dist.requires or [] if "extra ==" not in r]
    return entries


@pytest.mark.parametrize("version", _versions() + _unverified())
def test_release_environment_brings_every_package_mamba_utils_imports(version, tmp_path):
    """mamba_utils imports with the interpreter's site-packages off (python -S) and only torch, numpy,
    setuptools and their own requirements offered next to the release's environment: so the environment
    must bring every other package vLLM imports there."""
    site = pathlib.Path(sysconfig.get_paths()["purelib"])
    for entry in _own_packages():
        if (site / entry).exists():
            (tmp_path / entry).symlink_to(site / entry)
    code = f"import sys; sys.path.append({str(tmp_path)!r}); import vllm.v1.worker.mamba_utils; print('imported')"
    try:
        done = vllm_envs.run_in_vllm(version, ["-S", "-c", code])
    except vllm_envs.EnvUnavailable as why:
        _unavailable(f"vLLM {version}: {why}")
    assert done.returncode == 0 and done.stdout.strip().endswith("imported"), done.stderr[-3000:]


def test_the_plugin_names_the_newest_release_these_tests_verify():
    """The plugin's warning on an unknown layout cites VERIFIED; the release tests verify up to NEWEST_VERIFIED."""
    from xpu_state_copy.vllm import plugin as vllm_plugin

    assert vllm_plugin.VERIFIED[1] == vllm_envs.NEWEST_VERIFIED


@pytest.mark.parametrize("version", _unverified_or_why_none())
def test_plugin_leaves_a_newer_release_alone_and_says_so(version):
    results = {}
    for plugin in ("off", "on"):
        try:
            done = vllm_envs.run_in_vllm(version, [str(SCENARIOS), plugin, "doctor"])
        except vllm_envs.EnvUnavailable as why:
            _unavailable(f"vLLM {version}: {why}")
        assert done.returncode == 0, f"scenarios ({plugin}) failed on vLLM {version}:\n{done.stderr[-3000:]}"
        results[plugin] = (json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr)
    for plugin, (result, _) in results.items():
        assert result["vllm_version"] == version
        assert "crash" not in result["doctor"], f"doctor crashed with the plugin {plugin}: {result['doctor']}"
    on, output = results["on"]
    if on["planned"]:  # recognised after all: then it is time to verify it and raise NEWEST_VERIFIED
        pytest.fail(f"the plugin would change vLLM {version} ({on['planned']}), which no test here verifies; "
                    f"run the release tests on it and raise vllm_envs.NEWEST_VERIFIED")
    assert on["patched"] == [] and on["reapplied"] == []
    warned = [line for line in output.splitlines() if "xpu_state_copy" in line and version in line
              and "not recognise" in line]
    assert warned, f"no warning that the plugin does not recognise vLLM {version}:\n{output[-3000:]}"
    # It names the releases it was verified on: the same newest one as these tests.
    assert any(f" - {vllm_envs.NEWEST_VERIFIED})" in line for line in warned), warned
