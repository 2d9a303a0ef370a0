#!/usr/bin/env bash
# The whole test suite (or the test files given): pytest (every target this machine has, the XPU compile
# checks, the kernels compiled by Intel's GPU compiler, the workflow lint) and the C++ tests of the torch-free
# core (ctest, on the SYCL CPU device). Run scripts/setup.sh first: the suite tests the wheel it installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
[ -x "$PY" ] || { echo "no $VENV: run scripts/setup.sh first" >&2; exit 2; }
VENV_BIN=$(cd "$VENV/bin" && pwd)
export PATH="$VENV_BIN:$PATH"
# The SYCL CPU backend is part of what is tested here: its absence fails the run instead of skipping.
export XPU_STATE_COPY_REQUIRE_SYCL=${XPU_STATE_COPY_REQUIRE_SYCL:-1}
# Likewise the workflow and shell lint (actionlint, shellcheck: setup.sh installs them).
export XPU_STATE_COPY_REQUIRE_LINT=${XPU_STATE_COPY_REQUIRE_LINT:-1}
# Likewise the IGC compile check (ocloc, which setup.sh unpacks from Debian's packages).
export XPU_STATE_COPY_REQUIRE_OCLOC=${XPU_STATE_COPY_REQUIRE_OCLOC:-1}
# Likewise the tests against real vLLM releases (installed from PyPI into .cache/vllm-envs on first use).
export XPU_STATE_COPY_REQUIRE_VLLM=${XPU_STATE_COPY_REQUIRE_VLLM:-1}
# And against real SGLang releases (into .cache/sglang-envs).
export XPU_STATE_COPY_REQUIRE_SGLANG=${XPU_STATE_COPY_REQUIRE_SGLANG:-1}

PREFIX=$("$PY" -c 'import sys; print(sys.prefix)')
cmake -S . -B build/cmake -G Ninja -DSYCL_ROOT="$PREFIX" -DPython3_EXECUTABLE="$PY" >/dev/null
cmake --build build/cmake
(cd build/cmake && ctest --output-on-failure)

# Run from tests/ so the installed package, not the source tree, is what gets imported. pytest runs the test
# paths given among the arguments (tests/test_x.py ...), else the whole of tests/.
whole=tests
previous=
for arg in "$@"; do
    case "$previous" in --ignore | --ignore-glob | --deselect | -k | -m | -p | -o | --junitxml) ;;
        *) case "$arg" in tests/*) whole= ;; esac ;;
    esac
    previous=$arg
done
"$PY" -m pytest -ra "$@" ${whole:+"$whole"}
