// What the torch-free CUDA benchmark programs (cuda_sweep.cu, cuda_timeline.cu, cuda_entry_tiles.cu) share:
// error checks, the GPU spin that queues calls back to back, the flat copy they compare with, the four
// workloads and their buffers, the byte check and the timing.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>

#include "batch_memcpy_kernel.cuh"

#define CHECK(x)                                                                     \
  do {                                                                               \
    cudaError_t e = (x);                                                             \
    if (e != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

// The batch's bytes copied as one contiguous range with the batch kernel's grid and loads in flight: how
// close this occupancy and unroll get to cudaMemcpyAsync with no scheduling at all.
__device__ __forceinline__ void flat_copy_body(const xsc::Word16* src, xsc::Word16* dst, long long words) {
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

// Keeps the GPU busy for `cycles` so that the host can queue the calls to time behind it.
__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}

struct Workload {
  const char* name;
  std::vector<long long> sizes;
};

// The four workloads of `xpu-state-copy bench`, at full size.
inline std::vector<Workload> workloads() {
  std::vector<long long> step(36, 48 << 10), step16, mixed = {256ll << 20};
  step.insert(step.end(), 36, 1 << 20);
  for (int r = 0; r < 16; ++r) step16.insert(step16.end(), step.begin(), step.end());
  mixed.insert(mixed.end(), 1000, 8192);
  return {{"step", step}, {"step16", step16}, {"tiny", std::vector<long long>(4096, 4096)}, {"mixed", mixed}};
}

// `count` sets of one batch's device buffers, rotated so that the working set does not sit in the 50 MB L2:
// source and destination arenas with the entries 256 bytes apart (16-byte aligned, as pool blocks are),
// the address tables (sources, then destinations) and the sizes. Sources hold a pattern, destinations 0xA5.
struct BatchBuffers {
  size_t n;
  long long total = 0;  // bytes the batch copies
  long long arena;      // bytes of each arena
  std::vector<unsigned char*> src, dst;
  std::vector<unsigned long long*> tables;
  std::vector<long long*> sizes;

  BatchBuffers(const std::vector<long long>& entry_sizes, int count)
      : n(entry_sizes.size()), src(count), dst(count), tables(count), sizes(count) {
    for (long long s : entry_sizes) total += s;
    arena = total + 256 * (long long)n;
    for (int k = 0; k < count; ++k) {
      CHECK(cudaMalloc(&src[k], arena));
      CHECK(cudaMalloc(&dst[k], arena));
      std::vector<unsigned long long> host(2 * n);
      long long off = 0;
      for (size_t i = 0; i < n; ++i) {
        host[i] = (unsigned long long)(src[k] + off);
        host[n + i] = (unsigned long long)(dst[k] + off);
        off += entry_sizes[i] + 256;
      }
      CHECK(cudaMalloc(&tables[k], 2 * n * 8));
      CHECK(cudaMemcpy(tables[k], host.data(), 2 * n * 8, cudaMemcpyHostToDevice));
      CHECK(cudaMalloc(&sizes[k], n * 8));
      CHECK(cudaMemcpy(sizes[k], entry_sizes.data(), n * 8, cudaMemcpyHostToDevice));
      std::vector<unsigned char> pattern(arena);
      for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = (unsigned char)(i * 131 + k * 7 + (i >> 12));
      CHECK(cudaMemcpy(src[k], pattern.data(), pattern.size(), cudaMemcpyHostToDevice));
      CHECK(cudaMemset(dst[k], 0xA5, arena));
    }
  }
  BatchBuffers(const BatchBuffers&) = delete;  // owns device memory
  BatchBuffers& operator=(const BatchBuffers&) = delete;
  ~BatchBuffers() {
    for (size_t k = 0; k < src.size(); ++k) {
      CHECK(cudaFree(src[k]));
      CHECK(cudaFree(dst[k]));
      CHECK(cudaFree(tables[k]));
      CHECK(cudaFree(sizes[k]));
    }
  }
};

// Runs launch(0) on buffer set 0 with its destinations poisoned (0xA5) and returns how many entries differ
// from their source or wrote into the 256 bytes after them. Called before and after timing, so that a
// kernel which keeps state between launches is checked too.
template <class Launch>
long long wrong_entries(const BatchBuffers& buf, const std::vector<long long>& entry_sizes, Launch launch) {
  std::vector<unsigned char> hs((size_t)buf.arena), hd((size_t)buf.arena);
  CHECK(cudaMemset(buf.dst[0], 0xA5, buf.arena));
  launch(0);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(hs.data(), buf.src[0], hs.size(), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hd.data(), buf.dst[0], hd.size(), cudaMemcpyDeviceToHost));
  long long off = 0, bad = 0;
  for (size_t i = 0; i < buf.n; ++i) {
    bad += std::memcmp(hs.data() + off, hd.data() + off, entry_sizes[i]) != 0;
    for (int j = 0; j < 256; ++j) bad += hd[off + entry_sizes[i] + j] != 0xA5;
    off += entry_sizes[i] + 256;
  }
  return bad;
}

// Median milliseconds of fn(set), set rotating over `sets` buffer sets. Calls are queued behind a ~2 ms
// spin, ten at a time, so that events time back-to-back device work (as the Python benchmark does) rather
// than launch gaps; the first ten are warm-up. before(set), if given, is queued ahead of each call's start
// event: it runs right before the call, untimed.
struct NothingBefore {
  void operator()(int) const {}
};
template <class Fn, class Before = NothingBefore>
float median_ms(Fn fn, int sets, Before before = Before()) {
  std::vector<float> ms;
  std::vector<cudaEvent_t> marks(20);
  for (cudaEvent_t& m : marks) CHECK(cudaEventCreate(&m));
  for (int batch = 0; batch < 20; ++batch) {
    spin<<<1, 1>>>(2000000);
    for (int i = 0; i < 10; ++i) {
      before((batch * 10 + i) % sets);
      CHECK(cudaEventRecord(marks[2 * i]));
      fn((batch * 10 + i) % sets);
      CHECK(cudaEventRecord(marks[2 * i + 1]));
    }
    CHECK(cudaGetLastError());  // the launches fn and before made
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
}

// median_ms of `launch` with its bytes checked by wrong_entries before and after the timing; `bad` gets
// the wrong entries of both checks.
template <class Launch>
float checked_median_ms(const BatchBuffers& buf, const std::vector<long long>& entry_sizes, Launch launch,
                        long long* bad) {
  *bad = wrong_entries(buf, entry_sizes, launch);
  const float ms = median_ms(launch, (int)buf.src.size());
  *bad += wrong_entries(buf, entry_sizes, launch);
  return ms;
}
