#!/usr/bin/env bash
# One command for a fresh machine: a virtualenv (.venv), torch, the SYCL runtime and its OpenCL CPU device,
# the build, then the self-test on the best available device.
#   VENV=path         where the virtualenv goes (default: .venv in the repository)
#   TORCH_SPEC=...    the torch to install (default: torch==2.13.0, the version vLLM pins for XPU)
#   SYCL_RT_VERSION   intel-sycl-rt / intel-opencl-rt version (default 2026.2.0)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
SYCL_RT_VERSION=${SYCL_RT_VERSION:-2026.2.0}

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip setuptools wheel
"$PY" -m pip install -q "$TORCH_SPEC"
"$PY" -m pip install -q "intel-sycl-rt==$SYCL_RT_VERSION" "intel-opencl-rt==$SYCL_RT_VERSION" \
    ninja "cmake>=3.18" pytest hypothesis numpy expecttest matplotlib
"$PY" -m pip install -q --no-build-isolation .
"$PY" -m xpu_state_copy selftest
