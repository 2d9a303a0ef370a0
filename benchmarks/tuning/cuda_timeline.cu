// Where the time of one launch goes, per sub-group (warp): %globaltimer at kernel entry, after the scan,
// when its first job is known, after its first and last unit, and its unit count, through the XSC_MARK
// hook of batch_schedule.h. Also the same for a flat copy of the same bytes with the same grid, and the
// gap between a one-thread kernel before and after each launch. With several tiles (more than 4096
// entries), "scanned" and "first job known" are those of the last tile that was scanned; a batch whose
// every tile a group vote skips (4096 one-unit entries) records neither. Torch-free; on a CUDA GPU:
//   nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc/core -Icsrc/cuda benchmarks/tuning/cuda_timeline.cu -o timeline && ./timeline
#include <algorithm>
#include <string>

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Per warp: [0] entry, [1] scanned, [2] first job known, [3] first unit done, [4] last unit done, [5] units.
constexpr int kSlots = 8;
__device__ unsigned long long* g_marks;

// Units done so far per warp of the block, in shared memory: the marks only store to global memory, so that
// recording them adds no round trip to memory.
__shared__ unsigned units_done[32];

__device__ __forceinline__ void mark(int point, unsigned long long after) {
  asm volatile("" ::"l"(after));  // the time is read once `after` is known
  if (threadIdx.x % 32 != 0) return;
  const int warp = threadIdx.x / 32;
  unsigned long long* m = g_marks + (size_t)(blockIdx.x * (blockDim.x / 32) + warp) * kSlots;
  const unsigned long long now = global_ns();
  if (point == 0) units_done[warp] = 0;
  if (point == 3) {  // kMarkUnitDone
    const unsigned done = ++units_done[warp];
    if (done == 1) m[3] = now;
    m[4] = now;
    m[5] = done;
  } else {
    m[point] = now;
  }
}
#define XSC_MARK(point, after) mark((int)(point), (unsigned long long)(after))

#include "cuda_bench_common.cuh"

__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    marked_batch(const xsc::u64* src, const xsc::u64* dst, const void* sizes, xsc::i64 n) {
  mark(0, 0);
  extern __shared__ xsc::u64 table[];
  __shared__ xsc::i64 warp_sums[xsc_cuda::kThreads / 32];
  xsc_cuda::CudaGroup<> g{table, warp_sums};
  xsc::run_batch(g, xsc::PointerTableSource{src, dst, sizes, 1, n});
}

__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    marked_flat(const xsc::Word16* src, xsc::Word16* dst, long long words) {
  mark(0, 0);
  flat_copy_body(src, dst, words);
  mark(3, 0);
}

__global__ void stamp(unsigned long long* at) { *at = global_ns(); }
static void row(const char* what, std::vector<double> v) {
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  auto q = [&](double f) { return v[(size_t)(f * (v.size() - 1))]; };
  std::printf("    %-26s min %6.2f  p10 %6.2f  p50 %6.2f  p90 %6.2f  max %6.2f us\n", what, q(0), q(.1), q(.5), q(.9), q(1));
}

int main() {
  int blocks = 0;
  CHECK(xsc_cuda::prepare_launch(marked_batch, 0, &blocks));
  const int per_block = xsc_cuda::kThreads / 32, warps = blocks * per_block;
  unsigned long long *marks, *stamps;
  CHECK(cudaMalloc(&marks, (size_t)warps * kSlots * 8));
  CHECK(cudaMalloc(&stamps, 16));
  CHECK(cudaMemcpyToSymbol(g_marks, &marks, sizeof(marks)));
  for (const Workload& w : workloads()) {
    if (std::string(w.name) == "mixed") continue;  // one huge entry: nothing to see at the start
    const int sets = 4;  // rotated so that the tables and data are not all in L2, as in the benchmarks
    BatchBuffers buf(w, sets);
    const size_t n = buf.n;
    const long long total = buf.total;
    const auto &src = buf.src, &dst = buf.dst;
    const auto& tables = buf.tables;
    const auto& sizes = buf.sizes;
    for (int flat = 0; flat < 2; ++flat) {
      // Six launches back to back behind a spin; the last one is recorded, between two stamps. Three rounds,
      // the last one kept: the first launches of a program run at idle clocks.
      for (int round = 0; round < 3; ++round) {
        spin<<<1, 1>>>(1000000);
        for (int i = 0; i < 6; ++i) {
          const int k = i % sets;
          if (i == 5) {
            CHECK(cudaMemsetAsync(marks, 0, (size_t)warps * kSlots * 8));
            stamp<<<1, 1>>>(stamps);
          }
          if (flat) marked_flat<<<blocks, xsc_cuda::kThreads>>>((const xsc::Word16*)src[k], (xsc::Word16*)dst[k], total / 16);
          else marked_batch<<<blocks, xsc_cuda::kThreads, xsc_cuda::kTableBytes>>>(tables[k], tables[k] + n, sizes[k], (long long)n);
          CHECK(cudaGetLastError());
          if (i == 5) stamp<<<1, 1>>>(stamps + 1);
        }
        CHECK(cudaDeviceSynchronize());
      }
      std::vector<unsigned long long> m((size_t)warps * kSlots);
      unsigned long long st[2];
      CHECK(cudaMemcpy(m.data(), marks, m.size() * 8, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(st, stamps, 16, cudaMemcpyDeviceToHost));
      unsigned long long t0 = ~0ull, t_end = 0;
      for (int i = 0; i < warps; ++i) t0 = std::min(t0, m[i * kSlots]), t_end = std::max(t_end, m[i * kSlots + 4]);
      std::printf("%s, %s: %zu entries, %.1f MiB; stamp -> first warp %.2f us, last warp -> stamp %.2f us\n", w.name,
                  flat ? "flat copy" : "batch kernel", n, total / 1048576.0, (t0 - st[0]) / 1e3, (st[1] - t_end) / 1e3);
      const char* names[] = {"entry", "scanned", "first job known", "first unit done", "last unit done"};
      for (int p = 0; p < 5; ++p) {
        std::vector<double> v;
        for (int i = 0; i < warps; ++i)
          if (m[i * kSlots + p]) v.push_back((m[i * kSlots + p] - t0) / 1e3);
        row(names[p], v);
      }
      std::vector<double> block_done, block_spread;
      for (int b = 0; b < blocks; ++b) {
        unsigned long long lo = ~0ull, hi = 0;
        for (int k = 0; k < per_block; ++k) {
          const unsigned long long d = m[(b * per_block + k) * kSlots + 4];
          if (d) lo = std::min(lo, d), hi = std::max(hi, d);
        }
        if (hi) block_done.push_back((hi - t0) / 1e3), block_spread.push_back((hi - lo) / 1e3);
      }
      row("block done", block_done);
      row("block: last - first warp", block_spread);
      if (!flat) {
        std::vector<int> count(64, 0);
        for (int i = 0; i < warps; ++i) count[std::min<unsigned long long>(m[i * kSlots + 5], 63)]++;
        std::printf("    units per warp (units:warps)");
        for (int u = 0; u < 64; ++u)
          if (count[u]) std::printf(" %d:%d", u, count[u]);
        std::printf("\n");
      }
    }
  }
  return 0;
}
