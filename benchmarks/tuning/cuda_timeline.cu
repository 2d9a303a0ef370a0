// Where the time of one launch goes, per sub-group (warp): %globaltimer at kernel entry, after the scan,
// when its first job is known, after its first and last unit, and its unit count, through the XSC_MARK
// hook of batch_schedule.h. Also the same for a flat copy of the same bytes with the same grid, and the
// gap between a one-thread kernel before and after each launch. A batch small_batch.h schedules runs in the
// small build's form (its grid and loads in flight); others in the tile build without the direct pass.
// With several tiles (more than 4096 entries), "scanned" and "first job known" are those of the last tile
// that was scanned; a batch whose every tile a group vote skips (4096 one-unit entries) records neither.
// step, step_p and step16 are also timed through copy_states (one request of their states), whose spans
// take loads and a division where batch_memcpy's are a table read. Torch-free; on a CUDA GPU:
//   nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc/core -Icsrc/cuda benchmarks/tuning/cuda_timeline.cu -o timeline && ./timeline
#include "cuda_marks.cuh"
#include "cuda_state_plans.cuh"

// The op's kernel body (batch_memcpy_kernel.cuh's run_kernel_body) with the entry marked.
template <bool Small, class Source>
__device__ __forceinline__ void marked_body(const Source& source) {
  mark(0, 0);
  extern __shared__ xsc::u64 table[];
  __shared__ xsc::i64 warp_sums[xsc_cuda::kThreads / 32];
  xsc_cuda::CudaGroup<Small ? xsc::kSmallUnroll16 : xsc::kUnroll, !Small> g{table, warp_sums};
  if (Small) xsc::run_small_batch(g, source, source.count());
  else xsc::run_large_batch(g, source);
}

template <bool Small>
__global__ void __launch_bounds__(xsc_cuda::kBoundThreads<Small>, xsc_cuda::kBoundBlocks<Small>)
    marked_batch(const xsc::u64* src, const xsc::u64* dst, const void* sizes, int sizes64, xsc::i64 n) {
  marked_body<Small>(xsc::PointerTableSource{src, dst, sizes, sizes64, n});
}

template <bool Small>
__global__ void __launch_bounds__(xsc_cuda::kBoundThreads<Small>, xsc_cuda::kBoundBlocks<Small>)
    marked_states(const xsc::i64* plan, xsc::i64 states, const long long* ids) {
  marked_body<Small>(xsc::StatePlanSource{plan, states, ids, ids + 1, ids + 2, 1, 1});
}

// A kernel's two builds and their grids: launch(n, args...) runs the one a batch of n entries takes, as the
// op does (launch_for_batch; these kernels have no direct build).
template <class Kernel>
struct Builds {
  Kernel tiles, small;
  int tile_blocks = 0, small_blocks = 0;
  Builds(Kernel t, Kernel s) : tiles(t), small(s) {
    CHECK(xsc_cuda::prepare_launch(tiles, 0, &tile_blocks));
    CHECK(xsc_cuda::prepare_small_launch(small, 0, &small_blocks));
  }
  bool is_small(long long n) const {
    return xsc::small_batch_fits(n, 32, (long long)small_blocks * (xsc_cuda::kSmallThreads / 32));
  }
  int blocks(long long n) const { return is_small(n) ? small_blocks : tile_blocks; }
  int threads(long long n) const { return is_small(n) ? xsc_cuda::kSmallThreads : xsc_cuda::kThreads; }
  template <class... Args>
  void launch(long long n, Args... args) const {
    xsc_cuda::launch_for_batch(tiles, tiles, tile_blocks, small, small_blocks, 0, n, args...);
  }
};

int main() {
  const Builds batch(marked_batch<false>, marked_batch<true>);
  const Builds states(marked_states<false>, marked_states<true>);
  Timeline timeline(std::max(batch.tile_blocks, batch.small_blocks) * (xsc_cuda::kThreads / 32));
  // TIMELINE_WORKLOADS="odd_p,odd_a" picks workloads (cuda_bench_common.cuh); mixed, one huge entry, has
  // nothing to see at the start.
  for (const Workload& w : chosen_workloads("TIMELINE_WORKLOADS", "step,step16,tiny")) {
    const int sets = 4;  // rotated so that the tables and data are not all in L2, as in the benchmarks
    BatchBuffers buf(w, sets);
    const long long n = (long long)buf.n, total = buf.total;
    const std::string name = w.name;
    const bool with_states = name == "step" || name == "step_p" || name == "step16";
    const StatePlans plans(buf, w.sizes);
    char title[160];
    for (int kind = 0; kind < (with_states ? 3 : 2); ++kind) {
      const char* what = kind == 0 ? "batch kernel" : kind == 1 ? "flat copy" : "copy_states";
      std::snprintf(title, sizeof title, "%s, %s: %lld entries, %.1f MiB", w.name, what, n, total / 1048576.0);
      const int blocks = kind == 2 ? states.blocks(n) : batch.blocks(n);
      const int threads = kind == 2 ? states.threads(n) : batch.threads(n);
      timeline.run(title, blocks, threads, sets, kind != 1, [&](int k) {
        if (kind == 0)
          batch.launch(n, (const xsc::u64*)buf.tables[k], (const xsc::u64*)buf.tables[k] + n,
                       (const void*)buf.sizes[k], buf.sizes64 ? 1 : 0, (xsc::i64)n);
        else if (kind == 1)
          marked_flat<<<blocks, threads>>>((const xsc::Word16*)buf.src[k], (xsc::Word16*)buf.dst[k], total / 16);
        else
          states.launch(n, (const xsc::i64*)plans.plans[k], (xsc::i64)n, (const long long*)plans.ids);
      });
    }
  }
  return 0;
}
