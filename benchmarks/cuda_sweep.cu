// Torch-free sweep of the CUDA twin's tuning knobs (chunk size, unroll, threads, blocks per SM), each
// compiled as its own binary with -D flags by benchmarks/cuda_sweep.sh. Prints, per workload, the median
// time and the ratio to one cudaMemcpyAsync of the same total bytes (the roofline), after checking that
// every byte of the copy is right, and the same ratio for a plain copy of those bytes as one range with the
// same grid and unroll ("flat": what is left to gain from scheduling alone). SWEEP_WORKLOADS="step,tiny"
// runs only the named workloads.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "batch_memcpy_kernel.cuh"

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e = (x);                                                            \
    if (e != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

// The same grid and loads in flight as the batch kernel, copying the batch's bytes as one contiguous range:
// how close this occupancy and unroll can get to cudaMemcpyAsync with no scheduling at all.
__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS) flat_copy(const xsc::Word16* src,
                                                                                       xsc::Word16* dst, long long words) {
  const long long stride = (long long)gridDim.x * blockDim.x * xsc::kUnroll;
  for (long long base = (long long)blockIdx.x * blockDim.x * xsc::kUnroll + threadIdx.x; base < words; base += stride) {
    xsc::Word16 v[xsc::kUnroll];
#pragma unroll
    for (int u = 0; u < xsc::kUnroll; ++u)
      if (base + u * blockDim.x < words) v[u] = src[base + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < xsc::kUnroll; ++u)
      if (base + u * blockDim.x < words) dst[base + u * blockDim.x] = v[u];
  }
}

__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

struct Workload {
  const char* name;
  std::vector<long long> sizes;
};

static std::vector<long long> repeat(int n, long long bytes) { return std::vector<long long>(n, bytes); }

static std::vector<Workload> workloads() {
  std::vector<Workload> w;
  std::vector<long long> step = repeat(36, 48 << 10);
  for (long long s : repeat(36, 1 << 20)) step.push_back(s);
  w.push_back({"step", step});
  std::vector<long long> step16;
  for (int r = 0; r < 16; ++r) step16.insert(step16.end(), step.begin(), step.end());
  w.push_back({"step16", step16});
  w.push_back({"tiny", repeat(4096, 4096)});
  std::vector<long long> mixed = {256ll << 20};
  for (long long s : repeat(1000, 8192)) mixed.push_back(s);
  w.push_back({"mixed", mixed});
  return w;
}

int main() {
  int device = 0, sms = 0, per_sm = 0;
  CHECK(cudaGetDevice(&device));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  int blocks = 0;
  CHECK(xsc_cuda::prepare_launch(xsc_cuda::batch_memcpy_kernel, device, &blocks));
  per_sm = blocks / sms;
  std::printf("variant chunk=%lld unroll=%d threads=%d min_blocks=%d items=%d -> %d blocks/SM, grid %d\n",
              (long long)xsc::kChunkBytes, xsc::kUnroll, xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS, xsc::kItems, per_sm,
              blocks);
  const char* only = std::getenv("SWEEP_WORKLOADS");  // e.g. "step,tiny": run just these
  for (const Workload& w : workloads()) {
    if (only && !std::strstr(only, w.name)) continue;
    long long total = 0;
    for (long long s : w.sizes) total += s;
    // Rotate over enough buffer sets that the working set does not sit in the 50 MB L2.
    const int sets = total * 2 < (200ll << 20) ? 4 : 1;
    std::vector<unsigned char*> src(sets), dst(sets);
    std::vector<unsigned long long*> tables(sets);
    std::vector<long long*> sizes_dev(sets);
    const size_t n = w.sizes.size();
    for (int k = 0; k < sets; ++k) {
      // Entries 16-byte aligned, 256 bytes apart, as pool blocks are.
      CHECK(cudaMalloc(&src[k], total + 256 * n));
      CHECK(cudaMalloc(&dst[k], total + 256 * n));
      std::vector<unsigned long long> host(2 * n);
      long long off = 0;
      for (size_t i = 0; i < n; ++i) {
        host[i] = (unsigned long long)(src[k] + off);
        host[n + i] = (unsigned long long)(dst[k] + off);
        off += w.sizes[i] + 256;
      }
      CHECK(cudaMalloc(&tables[k], 2 * n * sizeof(unsigned long long)));
      CHECK(cudaMemcpy(tables[k], host.data(), 2 * n * 8, cudaMemcpyHostToDevice));
      CHECK(cudaMalloc(&sizes_dev[k], n * 8));
      CHECK(cudaMemcpy(sizes_dev[k], w.sizes.data(), n * 8, cudaMemcpyHostToDevice));
      std::vector<unsigned char> pattern(total + 256 * n);
      for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = (unsigned char)(i * 131 + k * 7 + (i >> 12));
      CHECK(cudaMemcpy(src[k], pattern.data(), pattern.size(), cudaMemcpyHostToDevice));
      CHECK(cudaMemset(dst[k], 0xA5, pattern.size()));
    }
    auto launch = [&](int k) {
      xsc_cuda::batch_memcpy_kernel<<<blocks, xsc_cuda::kThreads, xsc_cuda::kTableBytes>>>(tables[k], tables[k] + n, sizes_dev[k], 1, (long long)n);
    };
    // Verify set 0: every copied range equals its source.
    launch(0);
    CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> hs(total + 256 * n), hd(total + 256 * n);
    CHECK(cudaMemcpy(hs.data(), src[0], hs.size(), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(hd.data(), dst[0], hd.size(), cudaMemcpyDeviceToHost));
    long long off = 0, bad = 0;
    for (size_t i = 0; i < n; ++i) {
      bad += std::memcmp(hs.data() + off, hd.data() + off, w.sizes[i]) != 0;
      for (int j = 0; j < 256; ++j) bad += hd[off + w.sizes[i] + j] != 0xA5;
      off += w.sizes[i] + 256;
    }
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
    float roof = time([&](int k) { CHECK(cudaMemcpyAsync(dst[k], src[k], total, cudaMemcpyDeviceToDevice)); });
    std::printf("  %-7s entries %5zu  %8.1f MiB  ours %8.4f ms  memcpy %8.4f ms  ratio %.3f  (flat %.3f)  %s\n",
                w.name, n, total / 1048576.0, ours, roof, roof / ours, roof / flat, bad ? "WRONG BYTES" : "verified");
    for (int k = 0; k < sets; ++k) {
      CHECK(cudaFree(src[k]));
      CHECK(cudaFree(dst[k]));
      CHECK(cudaFree(tables[k]));
      CHECK(cudaFree(sizes_dev[k]));
    }
  }
  return 0;
}
