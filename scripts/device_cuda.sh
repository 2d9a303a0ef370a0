#!/usr/bin/env bash
# Everything we measure on an NVIDIA GPU, in one go: the kernel tuning sweep, the extension built offline
# against the machine's torch, the whole test suite on CUDA tensors, and the benchmark against its peers.
# Results go to $OUT (default build/device). Stages: STAGES="sweep timeline build test bench" (default: all
# but timeline). TIMELINE_DEFINES="XSC_SMALL_BATCH=0 ..." times one launch per listed -D set ("-": none),
# with each program of TIMELINES (default cuda_timeline; also cuda_spec_timeline). TIMELINE_BASELINE=DIR
# (an older source tree) also builds each from DIR's sources and runs the two in turns, TIMELINE_ROUNDS
# times (default 3): old against new from one call, e.g. TIMELINE_DEFINES=SPEC_TIMES_ONLY.
# Stage entry_tiles runs benchmarks/tuning/cuda_entry_tiles.cu once per ENTRY_TILES="tiles:min_blocks:loads ...";
# stage oracle runs benchmarks/tuning/cuda_oracle.cu (ORACLE_WORKLOADS="step,tiny_p ..." picks workloads).
# BASELINE=DIR (an older source tree): stage build also builds it, into build/baseline-site with this tree's
# benchmarks, and stage bench_baseline benches it (BASELINE_BENCH_ARGS) next to this build (stage bench_again,
# the same arguments) for before/after numbers from one call. The tuning instruments: benchmarks/tuning/.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build/device}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)  # absolute: the benches run from /tmp
STAGES=${STAGES:-"sweep build test bench"}
TIMELINE_DEFINES=${TIMELINE_DEFINES:-"-"}
mkdir -p "$OUT"
PY=${PY:-python3}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvcc_plain=(nvcc -std=c++17 -O3 -arch=sm_90)
nvcc_bench=("${nvcc_plain[@]}" -Icsrc/core -Icsrc/cuda)  # the torch-free benchmark programs
if has sweep; then
  echo "== sweep"; bash benchmarks/tuning/cuda_sweep.sh build/cuda_sweep 2>&1 | tee "$OUT/sweep.txt"
fi
if has timeline; then
  echo "== timeline"; mkdir -p build
  for program in ${TIMELINES:-cuda_timeline}; do
    for d in ${TIMELINE_DEFINES:--}; do
      flags=()
      [ "$d" = "-" ] || for f in ${d//,/ }; do flags+=("-D$f"); done
      bin="build/${program}_$(echo "$d" | tr ',=' '_-')"
      "${nvcc_bench[@]}" "${flags[@]}" "benchmarks/tuning/$program.cu" -o "$bin" || continue
      if [ -z "${TIMELINE_BASELINE:-}" ]; then
        echo "-- $program $d"; "$bin"; continue
      fi
      old=$TIMELINE_BASELINE
      "${nvcc_plain[@]}" -I"$old/csrc/core" -I"$old/csrc/cuda" "${flags[@]}" "$old/benchmarks/tuning/$program.cu" \
        -o "${bin}_baseline" || continue
      for round in $(seq "${TIMELINE_ROUNDS:-3}"); do
        echo "-- $program $d, baseline, round $round"; "${bin}_baseline"
        echo "-- $program $d, round $round"; "$bin"
      done
    done
  done 2>&1 | tee "$OUT/timeline.txt"
fi
if has entry_tiles; then
  echo "== entry_tiles"; mkdir -p build
  for v in ${ENTRY_TILES:-"16:4:4"}; do
    IFS=: read -r tiles minb loads <<<"$v"
    minb=${minb:-4} loads=${loads:-4}
    bin="build/entry_tiles_${tiles}_${minb}_${loads}"
    "${nvcc_bench[@]}" -DET_TILES="$tiles" -DET_MIN_BLOCKS="$minb" -DET_UNROLL16="$loads" \
      benchmarks/tuning/cuda_entry_tiles.cu -o "$bin" && "$bin"
  done 2>&1 | tee "$OUT/entry_tiles.txt"
fi
if has oracle; then
  echo "== oracle"; mkdir -p build
  "${nvcc_bench[@]}" benchmarks/tuning/cuda_oracle.cu -o build/oracle && build/oracle 2>&1 | tee "$OUT/oracle.txt"
fi
pip_build() {  # pip_build SOURCE LOG [pip args...]
  local src=$1 log=$2; shift 2
  TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16} \
    "$PY" -m pip install --no-build-isolation --no-deps --no-index -q "$@" "$src" > "$log" 2>&1 \
    || { tail -40 "$log"; return 1; }
}
if has build; then
  echo "== build"
  if [ -n "${BASELINE:-}" ]; then
    rm -rf build/baseline-site
    pip_build "$BASELINE" "$OUT/baseline_build.log" --target build/baseline-site &
    baseline_pid=$!
  fi
  pip_build . "$OUT/build.log" || exit 1
  (cd /tmp && "$PY" -c "import xpu_state_copy as x; print('backend(cuda):', x.backend('cuda'))")
  if [ -n "${BASELINE:-}" ]; then
    wait "$baseline_pid" || exit 1
    rm -rf build/baseline-site/xpu_state_copy/benchmarks && cp -r benchmarks build/baseline-site/xpu_state_copy/
    (cd /tmp && PYTHONPATH="$OLDPWD/build/baseline-site" "$PY" -c \
      "import xpu_state_copy as x; print('baseline from', x.__file__, x.backend('cuda'))")
  fi
fi
if has test; then
  echo "== test"
  "$PY" -m pytest -q -ra -p no:cacheprovider tests ${PYTEST_K:+-k "$PYTEST_K"} ${PYTEST_IGNORE:+--ignore "$PYTEST_IGNORE"} > "$OUT/pytest.txt" 2>&1
  tail -25 "$OUT/pytest.txt"
fi
bench() {  # bench NAME [PYTHONPATH] -- args
  local name=$1 path=$2; shift 2
  echo "== $name"
  (cd /tmp && PYTHONPATH="$path" "$PY" -m xpu_state_copy bench --device cuda --out "$OUT/$name" "$@") \
    2>"$OUT/${name}_progress.txt" | tee "$OUT/$name.txt"
}
# shellcheck disable=SC2086  # the *BENCH_ARGS are lists of arguments
{
  has bench && bench bench "" ${BENCH_ARGS:-}
  has bench_baseline && bench bench_baseline "$PWD/build/baseline-site" ${BASELINE_BENCH_ARGS:-}
  has bench_again && bench bench_again "" ${BASELINE_BENCH_ARGS:-}
}
true
