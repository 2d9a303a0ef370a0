#!/usr/bin/env bash
# Everything we measure on an NVIDIA GPU, in one go: the kernel tuning sweep, the extension built offline
# against the machine's torch, the whole test suite on CUDA tensors, and the benchmark against its peers.
# Results go to $OUT (default build/device). Stages: STAGES="sweep timeline build test bench" (default: all
# but timeline). TIMELINE_DEFINES="XSC_SMALL_BATCH=0 ..." times one launch per listed -D set ("-": none).
# Stage entry_tiles runs benchmarks/cuda_entry_tiles.cu once per ENTRY_TILES="tiles:min_blocks:loads ...";
# stage oracle runs benchmarks/cuda_oracle.cu (ORACLE_WORKLOADS="step,tiny_p ..." picks workloads).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-build/device}
STAGES=${STAGES:-"sweep build test bench"}
TIMELINE_DEFINES=${TIMELINE_DEFINES:-"-"}
mkdir -p "$OUT"
PY=${PY:-python3}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvcc_bench=(nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc/core -Icsrc/cuda)  # the torch-free benchmark programs
if has sweep; then
  echo "== sweep"; bash benchmarks/cuda_sweep.sh build/cuda_sweep 2>&1 | tee "$OUT/sweep.txt"
fi
if has timeline; then
  echo "== timeline"; mkdir -p build
  for d in $TIMELINE_DEFINES; do
    flags=()
    [ "$d" = "-" ] || for f in ${d//,/ }; do flags+=("-D$f"); done
    bin="build/timeline_$(echo "$d" | tr ',=' '_-')"
    "${nvcc_bench[@]}" "${flags[@]}" benchmarks/cuda_timeline.cu -o "$bin" \
      && { echo "-- timeline $d"; "$bin"; }
  done 2>&1 | tee "$OUT/timeline.txt"
fi
if has entry_tiles; then
  echo "== entry_tiles"; mkdir -p build
  for v in ${ENTRY_TILES:-"16:4:4"}; do
    IFS=: read -r tiles minb loads <<<"$v"
    minb=${minb:-4} loads=${loads:-4}
    bin="build/entry_tiles_${tiles}_${minb}_${loads}"
    "${nvcc_bench[@]}" -DET_TILES="$tiles" -DET_MIN_BLOCKS="$minb" -DET_UNROLL16="$loads" \
      benchmarks/cuda_entry_tiles.cu -o "$bin" && "$bin"
  done 2>&1 | tee "$OUT/entry_tiles.txt"
fi
if has oracle; then
  echo "== oracle"; mkdir -p build
  "${nvcc_bench[@]}" benchmarks/cuda_oracle.cu -o build/oracle && build/oracle 2>&1 | tee "$OUT/oracle.txt"
fi
if has build; then
  echo "== build"
  TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} MAX_JOBS=${MAX_JOBS:-16} \
    "$PY" -m pip install --no-build-isolation --no-deps --no-index -q . > "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
  (cd /tmp && "$PY" -c "import xpu_state_copy as x; print('backend(cuda):', x.backend('cuda'))")
fi
if has test; then
  echo "== test"
  "$PY" -m pytest -q -ra -p no:cacheprovider tests ${PYTEST_K:+-k "$PYTEST_K"} ${PYTEST_IGNORE:+--ignore "$PYTEST_IGNORE"} > "$OUT/pytest.txt" 2>&1
  tail -25 "$OUT/pytest.txt"
fi
if has bench; then
  echo "== bench"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of arguments
  "$PY" -m xpu_state_copy bench --device cuda --out "$OUT/bench" ${BENCH_ARGS:-} 2>"$OUT/bench_progress.txt" \
    | tee "$OUT/bench.txt"
fi
