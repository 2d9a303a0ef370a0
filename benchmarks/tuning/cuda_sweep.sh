#!/usr/bin/env bash
# Builds benchmarks/tuning/cuda_sweep.cu once per tuning variant and runs each (CUDA machine with nvcc).
# Usage: benchmarks/tuning/cuda_sweep.sh [OUTDIR]
#   VARIANTS="chunk:unroll:threads:minblocks:items[:NAME=VALUE,NAME=VALUE] ..." overrides the list; the
#   optional last field passes more -D flags, e.g. 8192:4:512:1:8:XSC_SMALL_BATCH=0; in it, I=DIR searches
#   DIR for the kernel headers before csrc/core (an older copy of them, timed in the same call).
#   SWEEP_STEPS="build run" (default): SWEEP_STEPS=build only builds, SWEEP_STEPS=run runs what was built.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-build/cuda_sweep}
mkdir -p "$out"
VARIANTS=${VARIANTS:-"8192:4:512:1:8 8192:4:512:1:8:XSC_SMALL_BATCH=0 8192:4:512:1:8:XSC_SMALL_PARTS=4"}
bin_of() { echo "$out/sweep_$(echo "$1" | tr ':,/=' '___-')"; }
# A variant listed twice (to see run-to-run spread) is built once.
steps=" ${SWEEP_STEPS:-build run} "
builds=()
[[ $steps == *" build "* ]] && for v in $(printf '%s\n' $VARIANTS | sort -u); do
  IFS=: read -r chunk unroll threads minb items extra <<<"$v"
  defines=() includes=()
  for d in ${extra//,/ }; do
    if [[ $d == I=* ]]; then includes+=("-I${d#I=}"); else defines+=("-D$d"); fi
  done
  nvcc -std=c++17 -O3 -arch=sm_90 "${includes[@]}" -Icsrc/core -Icsrc/cuda \
       -DXSC_CHUNK_BYTES="$chunk" -DXSC_UNROLL="$unroll" -DXSC_CUDA_THREADS="$threads" \
       -DXSC_CUDA_MIN_BLOCKS="$minb" -DXSC_ITEMS="$items" "${defines[@]}" \
       ${SWEEP_NVCC_FLAGS:-} benchmarks/tuning/cuda_sweep.cu -o "$(bin_of "$v")" > "$(bin_of "$v").log" 2>&1 &
  builds+=($!)
done
# A variant that does not build stops the sweep; each build's compiler output is in its binary's .log.
for b in "${builds[@]}"; do wait "$b" || { tail -n 30 "$out"/*.log; exit 1; }; done
[[ $steps == *" run "* ]] || exit 0
# Each run under a time limit, so that a variant which hangs is reported and the others still run.
for v in $VARIANTS; do
  echo "== $v"
  timeout "${SWEEP_TIMEOUT:-120}" "$(bin_of "$v")" || echo "!! $v failed or timed out (exit $?)"
done
