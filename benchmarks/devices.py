"""Which device a run uses, and what it is."""
import os
import platform

import torch

BACKEND_ENV = "XPU_STATE_COPY_BACKEND"
DEFAULT_L2 = 50 * 2**20   # H100/H200 L2, when the driver does not say
DEFAULT_LLC = 32 * 2**20  # a typical server CPU slice of last-level cache


def _xpu_available():
    return hasattr(torch, "xpu") and torch.xpu.is_available()


def _backend(op, device):
    if op is None:
        return "unavailable"
    try:
        return str(op.backend(device))
    except Exception as exc:  # noqa: BLE001
        return f"unknown ({type(exc).__name__})"


def _try_sycl_cpu(op):
    """The SYCL CPU device runs on CPU tensors when the op is told to use SYCL
    before its first call.  Returns the backend name, or None (and undoes the
    setting) when that backend is not there."""
    if op is None:
        return None
    previous = os.environ.get(BACKEND_ENV)
    os.environ[BACKEND_ENV] = "sycl"
    backend = _backend(op, torch.device("cpu"))
    if backend.lower().startswith("sycl"):
        return backend
    if previous is None:
        os.environ.pop(BACKEND_ENV, None)
    else:
        os.environ[BACKEND_ENV] = previous
    return None


def resolve_device(name, op):
    """(label, torch.device, backend name) for --device; ValueError if the asked
    device is not usable."""
    name = (name or "auto").lower()
    if name == "auto":
        if _xpu_available():
            name = "xpu"
        elif torch.cuda.is_available():
            name = "cuda"
        else:
            backend = _try_sycl_cpu(op)
            if backend:
                return "sycl-cpu", torch.device("cpu"), backend
            name = "cpu"
    if name == "sycl-cpu":
        backend = _try_sycl_cpu(op)
        if not backend:
            raise ValueError("the SYCL CPU backend is not available (backend() says "
                             f"{_backend(op, torch.device('cpu'))!r})")
        return "sycl-cpu", torch.device("cpu"), backend
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("CUDA is not available in this torch")
    if dev.type == "xpu" and not _xpu_available():
        raise ValueError("XPU is not available in this torch")
    if dev.type not in ("cuda", "xpu", "cpu"):
        raise ValueError(f"unsupported device {name!r}")
    if dev.type != "cpu" and dev.index is None:
        dev = torch.device(dev.type, getattr(torch, dev.type).current_device())
    return name, dev, _backend(op, dev)


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_device(dev):
    """Name and last-level cache size (used to size buffer rotation)."""
    if dev.type in ("cuda", "xpu"):
        props = getattr(torch, dev.type).get_device_properties(dev)
        cache = getattr(props, "L2_cache_size", 0) or DEFAULT_L2
        return {"name": props.name, "cache_bytes": int(cache)}
    return {"name": f"{_cpu_name()}, {os.cpu_count()} threads", "cache_bytes": DEFAULT_LLC}
