// Experiment, torch-free: the shared copy routine (copy_routine.h) under the simplest schedule, at a higher
// occupancy than the batch kernel's. One warp per (entry, tile): tile t of entry e copies units
// [t * U / T, (t + 1) * U / T) of its U units, on a grid of n * T warps that the hardware hands out as
// warps finish (not a persistent grid). It needs no scan, so its registers are the copy routine's own; it
// does not balance bytes over entries of different sizes (a 256 MiB entry among small ones gets 1/n of
// the warps), which is why the op does not use it. It measures how much occupancy is worth on the
// batches where it is fair: step and tiny.
//   nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc/core -Icsrc/cuda -DET_TILES=16 -DET_MIN_BLOCKS=8 \
//        benchmarks/tuning/cuda_entry_tiles.cu -o entry_tiles && ./entry_tiles
#include <string>

#include "cuda_bench_common.cuh"

#ifndef ET_TILES
#define ET_TILES 16  // tiles per entry
#endif
#ifndef ET_MIN_BLOCKS
#define ET_MIN_BLOCKS 8  // 128-wide blocks per SM the registers must allow: 8 -> 64 registers
#endif
#ifndef ET_UNROLL16
#define ET_UNROLL16 4  // 16-byte loads in flight per work-item
#endif
constexpr int kBlock = 128;

// Rows and overlapping ranges (never in these workloads) go through a call, so that their registers are
// not allocated for the plain path.
template <class G>
__device__ __noinline__ void general_unit(G& g, xsc::Span s, long long unit) {
  xsc::copy_unit(g, s, unit);
}

__global__ void __launch_bounds__(kBlock, ET_MIN_BLOCKS)
    entry_tiles(const xsc::u64* src, const xsc::u64* dst, const void* sizes, long long n, long long tiles) {
  const xsc::PointerTableSource source{src, dst, sizes, 1, n};
  xsc_cuda::CudaGroup<ET_UNROLL16> g{nullptr, nullptr};
  const long long w = (long long)blockIdx.x * (kBlock / 32) + threadIdx.x / 32;
  const long long e = w / tiles, t = w % tiles;
  if (e >= n) return;
  const xsc::Span s = source.span(e);
  const long long units = xsc::units_of(s.rows, s.row_bytes);
  for (long long u = t * units / tiles; u < (t + 1) * units / tiles; ++u) {
    const xsc::Job job = xsc::job_of(s, e, (xsc::u64)u);
    if (job.len > 0) xsc::sg_copy_piece(g, job.src, job.dst, job.len, false);
    else if (job.len == xsc::kGeneralUnit) general_unit(g, s, u);
  }
}

int main() {
  for (const Workload& w : workloads()) {
    if (std::string(w.name) != "step" && std::string(w.name) != "tiny") continue;
    long long total = 0;
    for (long long s : w.sizes) total += s;
    BatchBuffers buf(w, 4);
    const int sets = (int)buf.src.size();
    const size_t n = buf.n;
    const long long tiles = std::string(w.name) == "tiny" ? 1 : ET_TILES;
    const long long blocks = ((long long)n * tiles + kBlock / 32 - 1) / (kBlock / 32);
    auto launch = [&](int k) {
      entry_tiles<<<(unsigned)blocks, kBlock>>>(buf.tables[k], buf.tables[k] + n, buf.sizes[k], (long long)n, tiles);
    };
    long long bad = 0;
    const float ours = checked_median_ms(buf, w.sizes, launch, &bad);
    const float roof = median_ms(
        [&](int k) { CHECK(cudaMemcpyAsync(buf.dst[k], buf.src[k], total, cudaMemcpyDeviceToDevice)); }, sets);
    std::printf("  %-5s tiles %3lld  loads %d  blocks of %d, >= %d per SM: %8.4f ms  memcpy %8.4f ms  ratio %.3f  %s\n",
                w.name, tiles, ET_UNROLL16, kBlock, ET_MIN_BLOCKS, ours, roof, roof / ours,
                bad ? "WRONG BYTES" : "verified");
  }
  return 0;
}
