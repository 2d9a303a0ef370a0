// The timeline instruments' recorder (cuda_timeline.cu, cuda_spec_timeline.cu): %globaltimer per warp at
// the points the kernel body passes (batch_jobs.h's XSC_MARK hook), one launch recorded among several back
// to back, and a table of when the warps passed each point. Include it instead of cuda_bench_common.cuh:
// the hook must be defined before the kernel headers are read.
#pragma once
#include <cuda_runtime.h>

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Per warp: [0] entry, [1] scanned, [2] first job known, [3] first unit done, [4] last unit done, [5] units,
// [6] spec-decode records in local memory, [7] units counted (before the group scan).
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

__global__ void stamp(unsigned long long* at) { *at = global_ns(); }

// The flat copy of `words` 16-byte words, marked as one unit per warp.
__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    marked_flat(const xsc::Word16* src, xsc::Word16* dst, long long words) {
  mark(0, 0);
  flat_copy_body(src, dst, words);
  mark(3, 0);
}

inline void print_quantiles(const char* what, std::vector<double> v) {
  if (v.empty()) return;
  std::sort(v.begin(), v.end());
  auto q = [&](double f) { return v[(size_t)(f * (v.size() - 1))]; };
  std::printf("    %-26s min %6.2f  p10 %6.2f  p50 %6.2f  p90 %6.2f  max %6.2f us\n", what, q(0), q(.1), q(.5), q(.9),
              q(1));
}

// Records one launch of `blocks` blocks of `threads` (at most max_warps warps in all) and prints when its
// warps passed each point, from the first warp's entry.
struct Timeline {
  int max_warps;
  unsigned long long *marks = nullptr, *stamps = nullptr;

  explicit Timeline(int warps) : max_warps(warps) {
    CHECK(cudaMalloc(&marks, (size_t)warps * kSlots * 8));
    CHECK(cudaMalloc(&stamps, 16));
    CHECK(cudaMemcpyToSymbol(g_marks, &marks, sizeof(marks)));
  }
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  ~Timeline() {
    CHECK(cudaFree(marks));
    CHECK(cudaFree(stamps));
  }

  // Six launches launch(k) back to back behind a spin, k rotating over `sets`; the last one is recorded,
  // between two stamps. Three rounds, the last one kept: the first launches of a program run at idle clocks.
  // `units`: also how many units each warp copied.
  template <class Launch>
  void run(const char* title, int blocks, int threads, int sets, bool units, Launch launch) {
    const int per_block = threads / 32, warps = blocks * per_block;
    if (warps > max_warps) {
      std::fprintf(stderr, "%s: %d warps, the timeline holds %d\n", title, warps, max_warps);
      std::exit(1);
    }
    for (int round = 0; round < 3; ++round) {
      spin<<<1, 1>>>(1000000);
      for (int i = 0; i < 6; ++i) {
        if (i == 5) {
          CHECK(cudaMemsetAsync(marks, 0, (size_t)warps * kSlots * 8));
          stamp<<<1, 1>>>(stamps);
        }
        launch(i % sets);
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
    std::printf("%s; stamp -> first warp %.2f us, last warp -> stamp %.2f us\n", title, (t0 - st[0]) / 1e3,
                (st[1] - t_end) / 1e3);
    const std::pair<int, const char*> points[] = {
        {0, "entry"}, {6, "records in local memory"}, {7, "units counted"}, {1, "scanned"},
        {2, "first job known"}, {3, "first unit done"}, {4, "last unit done"}};
    for (const auto& [p, name] : points) {
      std::vector<double> v;
      for (int i = 0; i < warps; ++i)
        if (m[i * kSlots + p]) v.push_back((m[i * kSlots + p] - t0) / 1e3);
      print_quantiles(name, v);
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
    print_quantiles("block done", block_done);
    print_quantiles("block: last - first warp", block_spread);
    if (units) {
      std::vector<int> count(64, 0);
      for (int i = 0; i < warps; ++i) count[std::min<unsigned long long>(m[i * kSlots + 5], 63)]++;
      std::printf("    units per warp (units:warps)");
      for (int u = 0; u < 64; ++u)
        if (count[u]) std::printf(" %d:%d", u, count[u]);
      std::printf("\n");
    }
  }
};
