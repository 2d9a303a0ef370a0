// Torch-free sweep of the CUDA twin's tuning knobs (chunk size, unroll, threads, blocks per SM), each
// compiled as its own binary with -D flags by benchmarks/cuda_sweep.sh. Prints, per workload, the median
// time and the ratio to one cudaMemcpyAsync of the same total bytes (the roofline), after checking that
// every byte of the copy is right, and the same ratio for a plain copy of those bytes as one range with the
// same grid and unroll ("flat": what is left to gain from scheduling alone). SWEEP_WORKLOADS="step,tiny"
// runs only the named workloads.
#include <string>

#include "cuda_bench_common.cuh"

__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    flat_copy(const xsc::Word16* src, xsc::Word16* dst, long long words) {
  flat_copy_body(src, dst, words);
}

int main() {
  int device = 0, sms = 0, per_sm = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  int blocks = 0;
  CHECK(xsc_cuda::prepare_launch(xsc_cuda::batch_memcpy_kernel<false>, device, &blocks));
  int small_blocks = 0;
  CHECK(xsc_cuda::prepare_small_launch(xsc_cuda::batch_memcpy_kernel<true>, device, &small_blocks));
  std::printf("small-batch build: %d blocks of %d\n", small_blocks, xsc_cuda::kSmallThreads);
  per_sm = blocks / sms;
  std::printf("variant chunk=%lld unroll=%d threads=%d min_blocks=%d items=%d -> %d blocks/SM, grid %d\n",
              (long long)xsc::kChunkBytes, xsc::kUnroll, xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS, xsc::kItems, per_sm,
              blocks);
  const char* only = std::getenv("SWEEP_WORKLOADS");  // e.g. "step,tiny": run just these
  const std::string wanted = only ? std::string(",") + only + "," : "";
  for (const Workload& w : workloads()) {
    if (only && wanted.find(std::string(",") + w.name + ",") == std::string::npos) continue;
    long long total = 0;
    for (long long s : w.sizes) total += s;
    BatchBuffers buf(w.sizes, total * 2 < (200ll << 20) ? 4 : 1);
    const int sets = (int)buf.src.size();
    const size_t n = buf.n;
    const auto &src = buf.src, &dst = buf.dst;
    const auto& tables = buf.tables;
    const auto& sizes_dev = buf.sizes;
    auto launch = [&](int k) {  // the kernel build the torch binding picks for this batch
      xsc_cuda::launch_for_batch(xsc_cuda::batch_memcpy_kernel<false>, blocks, xsc_cuda::batch_memcpy_kernel<true>,
                                 small_blocks, 0, (long long)n, (const xsc::u64*)tables[k],
                                 (const xsc::u64*)tables[k] + n, (const void*)sizes_dev[k], 1, (xsc::i64)n);
    };
    long long bad = wrong_entries(buf, w.sizes, launch);
    float ours = median_ms(launch, sets);
    float flat = median_ms([&](int k) {
      flat_copy<<<blocks, xsc_cuda::kThreads>>>((const xsc::Word16*)src[k], (xsc::Word16*)dst[k], total / 16);
    }, sets);
    bad += wrong_entries(buf, w.sizes, launch);
    float roof =
        median_ms([&](int k) { CHECK(cudaMemcpyAsync(dst[k], src[k], total, cudaMemcpyDeviceToDevice)); }, sets);
    std::printf("  %-7s entries %5zu  %8.1f MiB  ours %8.4f ms  memcpy %8.4f ms  ratio %.3f  (flat %.3f)  %s\n",
                w.name, n, total / 1048576.0, ours, roof, roof / ours, roof / flat, bad ? "WRONG BYTES" : "verified");
  }
  return 0;
}
