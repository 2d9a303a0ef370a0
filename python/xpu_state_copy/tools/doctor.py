"""Check this environment for vLLM's "Overflow when unpacking long long" crash on Intel GPUs.

Reports how xpu_state_copy was built (and whether for the torch installed here), the target device, torch
and its XPU build, XPU devices and driver/runtime versions, our copy backend per device, the installed vLLM
and whether its mamba_utils stores raw addresses into int64 tables, the torch its XPU build pins and which of
our wheels fits (vllm/xpu_torch_pins.py), whether our vLLM plugin is registered and
what it would patch, the same for SGLang, a live allocation's address, and a self-test copy. Exit status 1
when it finds an affected setup without the fix, a build made for another torch release, or a failed
self-test, else 0.
"""
import importlib
import importlib.metadata
import json
import os
import platform

import torch

RUNTIME_PACKAGES = ("intel-sycl-rt", "intel-opencl-rt", "intel-cmplr-lib-rt", "intel-cmplr-lib-ur", "umf",
                    "intel-pti", "vllm-xpu-kernels", "triton-xpu", "pytorch-triton-xpu")
HIGH_BIT = 1 << 63


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--skip-vllm-import", action="store_true",
                        help="do not import vLLM's mamba_utils (its version is still read from metadata)")


def _guard(function, *args):
    """Run one check; a check that fails becomes an 'error' entry instead of stopping the report."""
    try:
        return function(*args)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}"}


def _package_version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def check_torch():
    xpu = getattr(torch, "xpu", None)
    info = {"version": torch.__version__, "xpu_build": bool(xpu and xpu._is_compiled()),
            "xpu_runtime": getattr(torch.version, "xpu", None), "devices": []}
    if xpu is not None and xpu.is_available():
        for index in range(xpu.device_count()):
            props = xpu.get_device_properties(index)
            info["devices"].append({"index": index, "name": props.name,
                                    "driver_version": getattr(props, "driver_version", None),
                                    "platform": getattr(props, "platform_name", None)})
    return info


def check_build():
    from .. import _build

    return {"recorded": _build.build_info(), "torch_mismatch": _build.torch_mismatch()}


def check_runtimes():
    import ctypes.util

    return {"packages": {name: _package_version(name) for name in RUNTIME_PACKAGES},
            "level_zero_loader": ctypes.util.find_library("ze_loader"),
            "oneapi_root": os.environ.get("ONEAPI_ROOT") or os.environ.get("CMPLR_ROOT")}


def check_backends(devices):
    import xpu_state_copy

    origin, reason = xpu_state_copy.sycl_status()
    backends = {}
    for device in devices:
        backends[str(device)] = _guard(xpu_state_copy.backend, device)
    return {"per_device": backends, "sycl": origin, "sycl_reason": reason}


def check_device_image():
    """The shipped SPIR-V image, what XPU_STATE_COPY_DEVICE_IMAGE made of it, and how kernels were built."""
    from .. import _loader, device_image

    builds = _loader._sycl_module.kernel_builds() if _loader._sycl_module is not None else []
    return {"shipped": device_image.shipped_info(), "status": device_image.status(), "builds": builds}


def _plugin(version, group, allow_list_variable, activation):
    """An engine plugin's state: our entry point in `group`, whether the engine's allow-list variable (when
    set, the engine loads only the plugins it names) lets it load, and whether it would act."""
    info = {"version": version, "plugin_entry_point": None, "plugin_allowed": True}
    info["plugin_active"], info["plugin_activation"] = activation()
    for ep in importlib.metadata.entry_points(group=group):
        if ep.name == "xpu_state_copy":
            info["plugin_entry_point"] = ep.value
    allowed = os.environ.get(allow_list_variable)
    if allowed is not None:
        info["plugin_allowed"] = "xpu_state_copy" in [p.strip() for p in allowed.split(",")]
    return info


def check_vllm(import_module):
    from ..vllm import plugin as vllm_plugin
    from ..vllm.compat import MAMBA_UTILS, inspect_mamba_utils, installed_vllm_version

    version = installed_vllm_version()
    info = _plugin(version, "vllm.general_plugins", "VLLM_PLUGINS", vllm_plugin.activation)
    if version is None or not import_module:
        return info
    module = importlib.import_module(MAMBA_UTILS)
    layout = inspect_mamba_utils(module, version)
    info["layout"] = layout.as_dict()
    info["would_patch"] = vllm_plugin.planned_changes(layout)
    return info


def check_sglang():
    """SGLang's version and our plugin for it; which copy_from it has, read from its source (not imported)."""
    from .. import plugin_switch
    from ..sglang import plugin as sglang_plugin

    version = plugin_switch.installed_version("sglang")
    info = _plugin(version, "sglang.srt.plugins", "SGLANG_PLUGINS", sglang_plugin.activation)
    if version is not None:
        info["copy_from"] = sglang_plugin.installed_copy_from()
    return info


def probe(device):
    """Allocate on `device`, report its address, copy a few entries (one an overlapping shift), and the grid
    each SYCL kernel is launched with there (None where no SYCL kernel serves the device)."""
    from .. import _loader, as_unsigned, batch_memcpy, pointer_table

    base = torch.arange(4096, dtype=torch.uint8, device=device)
    table = pointer_table([base])
    address = as_unsigned(int(table.view(torch.int64).cpu()[0]))
    expected = base.clone()
    expected[1000:2000] = base[0:1000]
    expected[3000:3900] = base[3100:4000]  # the left shift: the source overlaps the destination
    sources = pointer_table([base[0:1000], base[3100:4000]])
    destinations = pointer_table([base[1000:2000], base[3000:3900]])
    batch_memcpy(sources, destinations, torch.tensor([1000, 900], dtype=torch.int32, device=device))
    return {"device": str(device), "address": hex(address), "address_has_bit_63": address >= HIGH_BIT,
            "pointer_table_exact": address == base.data_ptr() % (1 << 64),
            "selftest_ok": bool(torch.equal(base.cpu(), expected.cpu())),
            "launches": _guard(_loader.kernel_launches, device)}


def check_torch_pins():
    """The torch the installed vLLM's XPU build pins, the torch here, the one this build was made for."""
    from .. import _build
    from ..vllm.compat import installed_vllm_version
    from ..vllm.xpu_torch_pins import wheel_advice

    recorded = _build.build_info()
    python = ".".join(platform.python_version_tuple()[:2])
    return wheel_advice(installed_vllm_version(), torch.__version__, recorded["torch"] if recorded else None, python)


def problems(report):
    """The findings that make this setup crash or copy wrongly; empty when it is fine."""
    found = []
    probe_result, vllm = report.get("probe", {}), report.get("vllm", {})
    if report.get("build", {}).get("torch_mismatch"):
        found.append(report["build"]["torch_mismatch"])
    if "error" in probe_result or not probe_result.get("selftest_ok", False):
        found.append(f"self-test copy failed: {probe_result.get('error', 'wrong bytes')}")
    high = bool(probe_result.get("address_has_bit_63"))
    unsafe = vllm.get("layout", {}).get("has_unsafe_pointer_writes", False)
    if high and unsafe:
        fixed = (vllm.get("plugin_entry_point") and vllm.get("plugin_allowed") and vllm.get("plugin_active")
                 and not vllm["layout"].get("unrecognised"))
        if not fixed:
            found.append(f"vLLM {vllm.get('version')} stores raw device addresses into int64 tables, addresses "
                         "here have bit 63 set, and the xpu_state_copy plugin will not patch it "
                         f"({vllm.get('plugin_activation')}; entry point {vllm.get('plugin_entry_point')}, "
                         f"allowed by VLLM_PLUGINS: {vllm.get('plugin_allowed')})")
    uncovered = vllm.get("layout", {}).get("uncovered_pointer_stores") or []
    if high and uncovered:
        found.append(f"vLLM {vllm.get('version')} stores raw device addresses where the xpu_state_copy plugin "
                     f"does not make them safe: {'; '.join(uncovered)}")
    return found


def collect(args):
    devices = [torch.device("cpu")]
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        devices += [torch.device("xpu", i) for i in range(torch.xpu.device_count())]
    current = devices[-1] if len(devices) == 1 else torch.device("xpu", torch.xpu.current_device())
    report = {"python": platform.python_version(), "vllm_target_device": os.environ.get("VLLM_TARGET_DEVICE"),
              "build": _guard(check_build), "torch": _guard(check_torch), "runtimes": _guard(check_runtimes),
              "backends": _guard(check_backends, devices),
              "vllm": _guard(check_vllm, not args.skip_vllm_import), "sglang": _guard(check_sglang),
              "probe": _guard(probe, current)}
    report["torch_pins"] = _guard(check_torch_pins)
    report["device_image"] = _guard(check_device_image)  # after the probe: it lists the builds the probe made
    report["problems"] = problems(report)
    return report


def _build_line(build):
    recorded = build.get("recorded")
    if not recorded:
        return f"built for            {build.get('error', 'unknown (no build record: not built by setup.py)')}"
    backends = recorded["backends"]
    names = [name for name in ("sycl-aot", "sycl-jit", "cuda", "cpu") if backends.get(name)]
    if backends.get("sycl-aot"):
        names[names.index("sycl-aot")] = f"sycl-aot ({backends['sycl-aot']['targets']})"
    return (f"built for            torch {recorded['torch']} (CXX11 ABI: {recorded['torch_cxx11_abi']}, "
            f"XPU build: {recorded['torch_xpu']}), backends: {', '.join(names)}")


def _text(report):
    from ..vllm.xpu_torch_pins import advice_lines

    torch_info, vllm, probe_result = report["torch"], report["vllm"], report["probe"]
    lines = [f"VLLM_TARGET_DEVICE   {report['vllm_target_device']}",
             f"torch                {torch_info.get('version')} (XPU build: {torch_info.get('xpu_build')}, "
             f"XPU runtime: {torch_info.get('xpu_runtime')})", _build_line(report.get("build", {}))]
    for device in torch_info.get("devices", []):
        lines.append(f"XPU {device['index']}                {device['name']} (driver {device['driver_version']})")
    runtimes = report["runtimes"]
    for name, version in runtimes.get("packages", {}).items():
        if version:
            lines.append(f"{name:<21}{version}")
    lines.append(f"Level Zero loader    {runtimes.get('level_zero_loader')}")
    for device, backend in report["backends"].get("per_device", {}).items():
        lines.append(f"backend {device:<13}{backend}")
    lines.append(f"vLLM                 {vllm.get('version') or 'not installed'}")
    pins = report.get("torch_pins")  # absent from a report made without the torch check
    if pins is not None:
        lines += advice_lines(pins) if "error" not in pins else [f"  torch pin check failed: {pins['error']}"]
    if "layout" in vllm:
        lines.append(f"  unsafe pointer writes: {vllm['layout']['has_unsafe_pointer_writes']}")
    lines.append(f"  plugin: entry point {vllm.get('plugin_entry_point')}, active: {vllm.get('plugin_active')} "
                 f"({vllm.get('plugin_activation')})")
    if vllm.get("would_patch") is not None:
        lines.append(f"  would patch: {'; '.join(vllm['would_patch']) or 'nothing'}")
    if "error" in vllm:
        lines.append(f"  vLLM check failed: {vllm['error']}")
    sglang = report.get("sglang", {})
    lines.append(f"SGLang               {sglang.get('version') or 'not installed'}")
    if "copy_from" in sglang:
        lines.append(f"  MambaPool.copy_from: {sglang['copy_from']}")
    lines.append(f"  plugin: entry point {sglang.get('plugin_entry_point')}, active: {sglang.get('plugin_active')} "
                 f"({sglang.get('plugin_activation')})")
    lines.append(f"probe on {probe_result.get('device')}: address {probe_result.get('address')} "
                 f"(bit 63 set: {probe_result.get('address_has_bit_63')}), self-test "
                 f"{'ok' if probe_result.get('selftest_ok') else 'FAILED ' + probe_result.get('error', '')}")
    launches = probe_result.get("launches")
    if isinstance(launches, dict):  # the query failed
        lines.append(f"  kernel grids: {launches.get('error')}")
    for launch in launches if isinstance(launches, list) else []:
        source = ("the runtime's resident-group count" if launch["resident_groups"] is not None else
                  f"the device: {launch['hw_threads'] or 'no'} hardware threads, {launch['compute_units']} compute units")
        lines.append(f"  {launch['kernel']}: {launch['groups']} work-groups of {launch['local']} (from {source})")
    image = report.get("device_image", {})
    shipped = image.get("shipped")
    sizes = ", ".join(f"{i['bytes']} B of SPIR-V with {loads} aligned loads" for loads, i in
                      sorted((shipped or {}).get("images", {}).items(), key=lambda item: int(item[0])))
    lines.append(f"device images        {sizes or 'none shipped'}; "
                 f"{image.get('status', {}).get('reason', image.get('error'))}")
    for build in image.get("builds", []):
        loads = f"{build['aligned_loads']} aligned loads" if build["aligned_loads"] else "a user's image"
        lines.append(f"  kernels for {build['device']}: {loads}, from {build['input']} in {build['seconds']:.2f} s"
                     + (f" ({build['note']})" if build["note"] else ""))
    lines += [f"PROBLEM: {p}" for p in report["problems"]] or ["no problem found"]
    return "\n".join(lines)


def run(args) -> int:
    report = collect(args)
    print(json.dumps(report, indent=2, default=str) if args.json else _text(report))
    return 1 if report["problems"] else 0
