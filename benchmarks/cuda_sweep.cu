// Torch-free sweep of the CUDA twin's tuning knobs (chunk size, unroll, threads, blocks per SM), each
// compiled as its own binary with -D flags by benchmarks/cuda_sweep.sh. Prints, per workload, the median
// time and the ratio to one cudaMemcpyAsync of the same total bytes (the roofline), after checking that
// every byte of the copy is right, and the same ratio for a plain copy of those bytes as one range with the
// same grid and unroll ("flat": what is left to gain from scheduling alone). SWEEP_WORKLOADS="step,tiny"
// runs only the named workloads.
#include <algorithm>
#include <cstring>
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
    // Verify set 0: every copied range equals its source (and nothing past it was written). Done before the
    // timing and again after it, so that a kernel which keeps state between launches is checked too.
    std::vector<unsigned char> hs(total + 256 * n), hd(total + 256 * n);
    auto wrong_entries = [&]() {
      CHECK(cudaMemset(dst[0], 0xA5, hd.size()));
      launch(0);
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(hs.data(), src[0], hs.size(), cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(hd.data(), dst[0], hd.size(), cudaMemcpyDeviceToHost));
      long long off = 0, bad = 0;
      for (size_t i = 0; i < n; ++i) {
        bad += std::memcmp(hs.data() + off, hd.data() + off, w.sizes[i]) != 0;
        for (int j = 0; j < 256; ++j) bad += hd[off + w.sizes[i] + j] != 0xA5;
        off += w.sizes[i] + 256;
      }
      return bad;
    };
    long long bad = wrong_entries();
    // Calls are queued behind a ~2 ms spin, ten at a time, so that events time back-to-back device work
    // (as the Python benchmark does) rather than launch gaps.
    auto time = [&](auto fn) {
      std::vector<float> ms;
      std::vector<cudaEvent_t> marks(22);
      for (cudaEvent_t& m : marks) CHECK(cudaEventCreate(&m));
      for (int batch = 0; batch < 20; ++batch) {
        spin<<<1, 1>>>(2000000);
        for (int i = 0; i < 10; ++i) {
          CHECK(cudaEventRecord(marks[2 * i]));
          fn((batch * 10 + i) % sets);
          CHECK(cudaEventRecord(marks[2 * i + 1]));
        }
        CHECK(cudaEventSynchronize(marks[19]));
        for (int i = 0; i < 10 && batch > 0; ++i) {
          float t;
          CHECK(cudaEventElapsedTime(&t, marks[2 * i], marks[2 * i + 1]));
          ms.push_back(t);
        }
      }
      for (cudaEvent_t& m : marks) CHECK(cudaEventDestroy(m));
      std::sort(ms.begin(), ms.end());
      return ms[ms.size() / 2];
    };
    float ours = time(launch);
    float flat = time([&](int k) {
      flat_copy<<<blocks, xsc_cuda::kThreads>>>((const xsc::Word16*)src[k], (xsc::Word16*)dst[k], total / 16);
    });
    bad += wrong_entries();
    float roof = time([&](int k) { CHECK(cudaMemcpyAsync(dst[k], src[k], total, cudaMemcpyDeviceToDevice)); });
    std::printf("  %-7s entries %5zu  %8.1f MiB  ours %8.4f ms  memcpy %8.4f ms  ratio %.3f  (flat %.3f)  %s\n",
                w.name, n, total / 1048576.0, ours, roof, roof / ours, roof / flat, bad ? "WRONG BYTES" : "verified");
  }
  return 0;
}
