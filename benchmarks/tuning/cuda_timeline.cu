// Where the time of one launch goes, per sub-group (warp): %globaltimer at kernel entry, after the scan,
// when its first job is known, after its first and last unit, and its unit count, through the XSC_MARK
// hook of batch_schedule.h. Also the same for a flat copy of the same bytes with the same grid, and the
// gap between a one-thread kernel before and after each launch. With several tiles (more than 4096
// entries), "scanned" and "first job known" are those of the last tile that was scanned; a batch whose
// every tile a group vote skips (4096 one-unit entries) records neither. Torch-free; on a CUDA GPU:
//   nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc/core -Icsrc/cuda benchmarks/tuning/cuda_timeline.cu -o timeline && ./timeline
#include "cuda_marks.cuh"

__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    marked_batch(const xsc::u64* src, const xsc::u64* dst, const void* sizes, int sizes64, xsc::i64 n) {
  mark(0, 0);
  extern __shared__ xsc::u64 table[];
  __shared__ xsc::i64 warp_sums[xsc_cuda::kThreads / 32];
  xsc_cuda::CudaGroup<> g{table, warp_sums};
  xsc::run_batch(g, xsc::PointerTableSource{src, dst, sizes, sizes64, n});
}

int main() {
  int blocks = 0;
  CHECK(xsc_cuda::prepare_launch(marked_batch, 0, &blocks));
  Timeline timeline(blocks * (xsc_cuda::kThreads / 32));
  // TIMELINE_WORKLOADS="odd_p,odd_a" picks workloads (cuda_bench_common.cuh); mixed, one huge entry, has
  // nothing to see at the start.
  for (const Workload& w : chosen_workloads("TIMELINE_WORKLOADS", "step,step16,tiny")) {
    const int sets = 4;  // rotated so that the tables and data are not all in L2, as in the benchmarks
    BatchBuffers buf(w, sets);
    const size_t n = buf.n;
    const long long total = buf.total;
    char title[160];
    for (int flat = 0; flat < 2; ++flat) {
      std::snprintf(title, sizeof title, "%s, %s: %zu entries, %.1f MiB", w.name, flat ? "flat copy" : "batch kernel",
                    n, total / 1048576.0);
      timeline.run(title, blocks, xsc_cuda::kThreads, sets, !flat, [&](int k) {
        if (flat) marked_flat<<<blocks, xsc_cuda::kThreads>>>((const xsc::Word16*)buf.src[k], (xsc::Word16*)buf.dst[k], total / 16);
        else marked_batch<<<blocks, xsc_cuda::kThreads, xsc_cuda::kTableBytes>>>(buf.tables[k], buf.tables[k] + n, buf.sizes[k], buf.sizes64 ? 1 : 0, (long long)n);
      });
    }
  }
  return 0;
}
