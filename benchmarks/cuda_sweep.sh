#!/usr/bin/env bash
# Builds benchmarks/cuda_sweep.cu once per tuning variant and runs each (CUDA machine with nvcc).
# Usage: benchmarks/cuda_sweep.sh [OUTDIR]   VARIANTS="chunk:unroll:threads:minblocks:items ..." overrides the list.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/cuda_sweep}
mkdir -p "$out"
VARIANTS=${VARIANTS:-"8192:4:512:1:8 4096:4:512:1:8 8192:4:512:1:4 4096:8:512:1:8"}
for v in $VARIANTS; do
  IFS=: read -r chunk unroll threads minb items <<<"$v"
  bin="$out/sweep_${chunk}_${unroll}_${threads}_${minb}_${items}"
  nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc/core -Icsrc/cuda -DXSC_CHUNK_BYTES="$chunk" -DXSC_UNROLL="$unroll" \
       -DXSC_CUDA_THREADS="$threads" -DXSC_CUDA_MIN_BLOCKS="$minb" -DXSC_ITEMS="$items" benchmarks/cuda_sweep.cu -o "$bin" &
done
wait
for v in $VARIANTS; do
  IFS=: read -r chunk unroll threads minb items <<<"$v"
  "$out/sweep_${chunk}_${unroll}_${threads}_${minb}_${items}"
done
