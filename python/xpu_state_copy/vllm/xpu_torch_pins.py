"""The torch each vLLM release's XPU build pins, and which xpu_state_copy wheel fits an environment.

A vLLM-XPU image carries the torch its release's ``requirements/xpu.txt`` pins, which is not the torch its
CUDA wheel's metadata asks for (0.33.0: XPU 2.14.0; 0.34.0: XPU 2.15.0, CUDA 2.14.0). Our compiled modules
must match the image's torch, so doctor names the pin, the installed torch and the one our build was made
for. tests/vllm_releases/test_xpu_torch_pins.py checks this table against the pinned sdists' xpu.txt files.
"""
from typing import Optional

# vLLM release -> the torch release its requirements/xpu.txt pins (read from each release's sdist).
XPU_TORCH_PINS = {
    "0.22.1": "2.11.0", "0.23.0": "2.11.0",
    "0.24.0": "2.12.0", "0.25.0": "2.12.0", "0.25.1": "2.12.0", "0.26.0": "2.12.0",
    "0.27.0": "2.13.0", "0.27.1": "2.13.0", "0.28.0": "2.13.0", "0.29.0": "2.13.0", "0.30.0": "2.13.0",
    "0.31.0": "2.14.0", "0.32.0": "2.14.0", "0.33.0": "2.14.0",
    "0.34.0": "2.15.0",
}
# The name wheels.yml gives the sycl-jit wheel it builds for one torch release and Python.
WHEEL_ARTIFACT = "wheel-sycl-jit-torch{torch}-xpu-py{python}"


def release(version: Optional[str]) -> Optional[str]:
    """'2.15.0+xpu' -> '2.15.0', '0.30.0+xpu' -> '0.30.0': a local tag names a build of the same release."""
    return None if version is None else str(version).split("+", 1)[0]


def pinned_torch(vllm_version: Optional[str]) -> Optional[str]:
    """The torch release vLLM `vllm_version`'s XPU build pins; None for a release not in the table."""
    return XPU_TORCH_PINS.get(release(vllm_version))


def wheel_advice(vllm_version, installed_torch, built_for, python) -> dict:
    """What doctor prints about torch: the pin, the installed torch, the one this build was made for, and
    the one-line fix when they differ (None when they agree)."""
    pinned = pinned_torch(vllm_version)
    installed, built = release(installed_torch), release(built_for)
    wanted = pinned or installed
    fix = None
    if pinned is not None and installed != pinned:
        fix = (f'pip install "torch=={pinned}+xpu" from PyTorch\'s XPU wheel index (vLLM {release(vllm_version)}\'s '
               f"XPU build runs on it), then xpu_state_copy's wheel "
               f"{WHEEL_ARTIFACT.format(torch=pinned, python=python)}")
    elif built is not None and built != wanted:
        fix = (f"pip install --force-reinstall --no-deps xpu_state_copy's wheel "
               f"{WHEEL_ARTIFACT.format(torch=wanted, python=python)} (this one was built for torch {built})")
    return {"vllm": vllm_version, "vllm_xpu_pins": pinned, "installed": installed_torch, "built_for": built_for,
            "fix": fix}


def advice_lines(advice: dict) -> list:
    """doctor's text lines for wheel_advice()'s result."""
    if advice["vllm"] is None:
        pin = "no vLLM installed"
    elif advice["vllm_xpu_pins"] is None:
        pin = f"not known for vLLM {advice['vllm']} (see its requirements/xpu.txt)"
    else:
        pin = f"{advice['vllm_xpu_pins']} (vLLM {release(advice['vllm'])}'s XPU build)"
    return [f"torch pinned         {pin}", f"torch installed      {advice['installed']}",
            f"torch built for      {advice['built_for'] or 'unknown (no build record)'}",
            f"  fix: {advice['fix']}" if advice["fix"] else "  torch: no mismatch"]
