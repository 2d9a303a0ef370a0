"""Building a device's SYCL kernels before its first copy, in a background thread.

A process builds (sycl-jit) or loads (sycl-aot) the kernels of a device the first time it copies there,
and that copy waits for them. An engine worker on an Intel GPU spends far longer loading its model than the
build takes, so the engine plugins start the build as soon as the worker imports the module they patch
(plugin_switch.build_kernels_when_imported): the build runs while the model loads, and the first request
finds the kernels ready. A copy that comes while the build is still running waits for that build instead
of starting another (the launcher holds one lock across a build).

A failed background build is logged once, as a warning naming the device and the error, and nothing of it
is kept: the first copy on that device builds again and raises whatever that build raises.
XPU_STATE_COPY_PREBUILD=0 turns the background build off.
"""
import logging
import os
import threading
import time

import torch

from . import _loader

ENV_SWITCH = "XPU_STATE_COPY_PREBUILD"
logger = logging.getLogger("xpu_state_copy")
_lock = threading.Lock()
_thread = None


def prepare(device):
    """Builds the SYCL kernels of `device` now, in this thread; returns True, or False when the device's
    backend builds nothing at run time (native CPU, CUDA). `device`: an XPU device, or the CPU while
    XPU_STATE_COPY_BACKEND=sycl sends CPU tensors to the SYCL CPU device. Raises BackendUnavailable when
    no backend serves the device here, and whatever the build raises."""
    device = torch.device(device)
    module = _loader.sycl_kernels_module(device)
    if module is None:
        return False
    module.prepare_kernels(str(device))  # releases the GIL while it builds
    return True


def _devices_to_prepare(first=None):
    """Every XPU device this process sees, XPU device `first` (an index) first, for a worker usually
    copies on its current device (the others' builds are quick once the first has filled SYCL's persistent
    cache); none without XPU."""
    if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
        return []
    indices = sorted(range(torch.xpu.device_count()), key=lambda i: i != first)
    return [torch.device("xpu", i) for i in indices]


def _current_xpu_index():
    """The calling thread's current XPU device if torch has set XPU up already, else None: setting it up
    here would hold the caller (an engine's import) for as long as that takes."""
    xpu = getattr(torch, "xpu", None)
    return xpu.current_device() if xpu is not None and xpu.is_initialized() else None


def _build(devices, log, first):
    for device in devices if devices is not None else _devices_to_prepare(first):
        start = time.monotonic()
        try:
            if prepare(device):
                log.info("xpu_state_copy: SYCL kernels for %s built in the background in %.1f s", device,
                         time.monotonic() - start)
        except Exception as error:  # kept for the first copy to meet again, never swallowed
            log.warning("xpu_state_copy: building the SYCL kernels for %s in the background failed (%s: %s); "
                        "the first copy there builds them again and raises what that build raises",
                        device, type(error).__name__, error)


def switched_off():
    return os.environ.get(ENV_SWITCH, "").strip().lower() in ("0", "false", "no", "off")


def start(devices=None, log=None):
    """Starts the background build of `devices` (default: every XPU device, the caller's current one
    first, listed in the thread) and returns its thread; None when XPU_STATE_COPY_PREBUILD=0. One per
    process: later calls return the first thread. Not a daemon: a process ending during the build waits
    for it rather than tearing the SYCL runtime down under it."""
    global _thread
    if switched_off():
        return None
    with _lock:
        if _thread is None:
            first = _current_xpu_index() if devices is None else None
            _thread = threading.Thread(target=_build, args=(devices, log or logger, first),
                                       name="xpu_state_copy-prebuild")
            _thread.start()
        return _thread


def wait(timeout=None):
    """Waits for the background build, if one was started; returns whether none is still running."""
    thread = _thread
    if thread is not None:
        thread.join(timeout)
    return thread is None or not thread.is_alive()
