#!/usr/bin/env bash
# Everything we measure on an NVIDIA GPU, in one go: the extension built offline against the machine's
# torch, the whole test suite on CUDA tensors, and the benchmark against its peers (CUB's batched memcpy and
# cudaMemcpyBatchAsync among them). Results go to $OUT (default build/device).
# Stages: STAGES="build test bench" (the default). PYTEST_K (an expression) and PYTEST_IGNORE (paths,
# space-separated; the release tests under tests/*_releases try to download wheels, so leave them out on a
# machine without a package registry) narrow the suite; BENCH_ARGS go to the bench (e.g. "--reps 40").
# BASELINE=DIR (an older source tree, e.g. `git archive <commit>` unpacked into .baseline/): stage build
# also builds it, renamed to the package xsc_baseline by scripts/baseline_tree.py so that it loads beside
# this build, into build/baseline-site; stage bench then times both in one process, in turns
# (--baseline xsc_baseline), so old and new share one table and one device state.
# Stage build also compiles the bench's CUDA peers (benchmarks/cuda_peers.cu) into their cache folder.
# VARIANTS="NAME=DIR ..." (source trees, e.g. a change and a variant of it): stage build also builds each,
# renamed to the package NAME, into build/variants/NAME; stage compare (not in the default STAGES) times this
# build and every variant side by side on COMPARE_ARGS' workloads (scripts/compare_builds.py).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build/device}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)  # absolute: the bench runs from /tmp
STAGES=${STAGES:-"build test bench"}
PY=${PY:-python3}
# Kept under build/ so that a later call on the same machine reuses the peers' build.
XPU_STATE_COPY_BENCH_CACHE=${XPU_STATE_COPY_BENCH_CACHE:-$PWD/build/bench-cache}
export XPU_STATE_COPY_BENCH_CACHE
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
has() { [[ " $STAGES " == *" $1 "* ]]; }
took() { echo "-- $1: $((SECONDS - $2)) s"; }
pip_build() {  # pip_build SOURCE LOG [pip args...]
  local src=$1 log=$2; shift 2
  TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16} \
    "$PY" -m pip install --no-build-isolation --no-deps --no-index -q "$@" "$src" > "$log" 2>&1 \
    || { tail -40 "$log"; return 1; }
}
if has build; then
  echo "== build"; start=$SECONDS
  if [ -n "${BASELINE:-}" ]; then
    rm -rf build/baseline-site
    { "$PY" scripts/baseline_tree.py "$BASELINE" build/baseline-src \
        && pip_build build/baseline-src "$OUT/baseline_build.log" --target build/baseline-site; } &
    baseline_pid=$!
  fi
  variant_pids=()
  for variant in ${VARIANTS:-}; do
    name=${variant%%=*} tree=${variant#*=}
    { rm -rf "build/variants/$name" \
        && "$PY" scripts/baseline_tree.py "$tree" "build/variant-src/$name" "$name" \
        && pip_build "build/variant-src/$name" "$OUT/variant_$name.log" --target "build/variants/$name"; } &
    variant_pids+=($!)
  done
  "$PY" -m benchmarks.cuda_peers > "$OUT/cuda_peers_build.txt" 2>&1 &
  peers_pid=$!
  pip_build . "$OUT/build.log" || exit 1
  (cd /tmp && "$PY" -c "import xpu_state_copy as x; print('backend(cuda):', x.backend('cuda'))")
  if [ -n "${BASELINE:-}" ]; then
    wait "$baseline_pid" || exit 1
    (cd /tmp && PYTHONPATH="$OLDPWD/build/baseline-site" "$PY" -c \
      "import xsc_baseline as x; print('baseline from', x.__file__, x.backend('cuda'))")
  fi
  for pid in ${variant_pids[@]+"${variant_pids[@]}"}; do wait "$pid" || exit 1; done
  wait "$peers_pid"; tail -3 "$OUT/cuda_peers_build.txt"
  took build "$start"
fi
if has test; then
  echo "== test"; start=$SECONDS
  ignored=()
  for path in ${PYTEST_IGNORE:-}; do ignored+=(--ignore "$path"); done
  "$PY" -m pytest -q -ra -p no:cacheprovider tests ${PYTEST_K:+-k "$PYTEST_K"} ${ignored[@]+"${ignored[@]}"} \
    > "$OUT/pytest.txt" 2>&1
  tail -25 "$OUT/pytest.txt"
  took test "$start"
fi
if has bench; then
  echo "== bench"; start=$SECONDS
  site="" baseline=()
  if [ -n "${BASELINE:-}" ]; then site="$PWD/build/baseline-site" baseline=(--baseline xsc_baseline); fi
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of arguments
  (cd /tmp && PYTHONPATH="$site" "$PY" -m xpu_state_copy bench --device cuda --out "$OUT/bench" \
    ${baseline[@]+"${baseline[@]}"} ${BENCH_ARGS:-}) 2>"$OUT/bench_progress.txt" | tee "$OUT/bench.txt"
  took bench "$start"
fi
if has compare; then
  echo "== compare"; start=$SECONDS
  builds=(xpu_state_copy=.)
  for variant in ${VARIANTS:-}; do builds+=("${variant%%=*}=$PWD/build/variants/${variant%%=*}"); done
  # shellcheck disable=SC2086  # COMPARE_ARGS is a list of arguments
  (cd /tmp && "$PY" "$OLDPWD/scripts/compare_builds.py" "${builds[@]}" ${COMPARE_ARGS:-}) 2>"$OUT/compare_progress.txt" \
    | tee "$OUT/compare.txt"
  took compare "$start"
fi
true
