#!/usr/bin/env bash
# Builds benchmarks/cuda_sweep.cu once per tuning variant and runs each (CUDA machine with nvcc).
# Usage: benchmarks/cuda_sweep.sh [OUTDIR]   VARIANTS="chunk:unroll:threads:minblocks ..." overrides the list.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/cuda_sweep}
mkdir -p "$out"
VARIANTS=${VARIANTS:-"16384:4:512:1 16384:4:512:2 16384:8:512:1 8192:4:512:1 32768:4:512:1 16384:4:256:2 16384:4:1024:1"}
for v in $VARIANTS; do
  IFS=: read -r chunk unroll threads minb <<<"$v"
  bin="$out/sweep_${chunk}_${unroll}_${threads}_${minb}"
  nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc/core -Icsrc/cuda -DXSC_CHUNK_BYTES="$chunk" -DXSC_UNROLL="$unroll" \
       -DXSC_CUDA_THREADS="$threads" -DXSC_CUDA_MIN_BLOCKS="$minb" benchmarks/cuda_sweep.cu -o "$bin" &
done
wait
for v in $VARIANTS; do
  IFS=: read -r chunk unroll threads minb <<<"$v"
  "$out/sweep_${chunk}_${unroll}_${threads}_${minb}"
done
