// What the torch-free CUDA benchmark programs (cuda_sweep.cu, the timelines, cuda_entry_tiles.cu,
// cuda_oracle.cu) share: error checks, the GPU spin that queues calls back to back, the flat copy they
// compare with, the bench's four workloads (and two of them in the bench's layout) and their buffers, the
// byte check and the timing.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
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

// `layers` per-layer pools whose blocks are `bytes` long; each request copies one block per pool.
struct Term {
  int layers;
  long long bytes;
  int requests;
};

struct Workload {
  const char* name;
  std::vector<long long> sizes;
  // Empty: the entries lie in two arenas, 256 bytes apart. Else the layout of `xpu-state-copy bench`: per
  // term, `layers` pools of 2 x requests x sets blocks side by side, each entry a random block to another random
  // block of its pool, entries in request order, then pool order.
  std::vector<Term> pools;
  bool sizes32 = false;  // int32 size table, as vLLM passes it (else int64)
};

// Calls f(request, term index, layer) for each entry of a pool layout, in the bench's order: request by
// request, then pool by pool.
template <class F>
void for_each_pool_entry(const std::vector<Term>& terms, F f) {
  int requests = 0;
  for (const Term& t : terms) requests = std::max(requests, t.requests);
  for (int r = 0; r < requests; ++r)
    for (size_t ti = 0; ti < terms.size(); ++ti)
      for (int l = 0; r < terms[ti].requests && l < terms[ti].layers; ++l) f(r, ti, l);
}

inline Workload pool_workload(const char* name, const std::vector<Term>& terms) {
  Workload w{name, {}, terms, true};
  for_each_pool_entry(terms, [&](int, size_t ti, int) { w.sizes.push_back(terms[ti].bytes); });
  return w;
}

// The four workloads of `xpu-state-copy bench`, at full size.
inline std::vector<Workload> workloads() {
  std::vector<long long> step(36, 48 << 10), step16, mixed = {256ll << 20};
  step.insert(step.end(), 36, 1 << 20);
  for (int r = 0; r < 16; ++r) step16.insert(step16.end(), step.begin(), step.end());
  mixed.insert(mixed.end(), 1000, 8192);
  return {{"step", step, {}}, {"step16", step16, {}}, {"tiny", std::vector<long long>(4096, 4096), {}},
          {"mixed", mixed, {}}};
}

// `step` and `tiny` in the bench's pool layout, and the bench's `odd` (Workload::pools), with int32 sizes. Same bytes as in the arena
// layout; in the 2026-12-01 sweeps our kernel's times here matched the bench's (docs/tuning-rounds-4-7.md).
inline std::vector<Workload> pool_workloads() {
  // odd_p: 2000 blocks of 12,345 bytes at 12,345-byte strides, so a source and its destination differ mod 16
  // unless their block indices agree mod 16; odd_a is its aligned twin (12,352 bytes, a multiple of 16).
  return {pool_workload("step_p", {{36, 48 << 10, 1}, {36, 1 << 20, 1}}), pool_workload("tiny_p", {{1, 4096, 4096}}),
          pool_workload("odd_p", {{1, 12345, 2000}}), pool_workload("odd_a", {{1, 12352, 2000}})};
}

// The bench's workloads, then pool_workloads(), keeping those named in the comma list of environment
// variable `env` (e.g. "step,tiny_p"), or in `fallback` when it is unset; a null fallback keeps all.
inline std::vector<Workload> chosen_workloads(const char* env, const char* fallback) {
  const char* only = std::getenv(env);
  if (!only) only = fallback;
  const std::string wanted = only ? std::string(",") + only + "," : "";
  std::vector<Workload> all = workloads(), chosen;
  for (const Workload& w : pool_workloads()) all.push_back(w);
  for (const Workload& w : all)
    if (!only || wanted.find(std::string(",") + w.name + ",") != std::string::npos) chosen.push_back(w);
  return chosen;
}

// `count` sets of one batch's device buffers, rotated so that the working set does not sit in the 50 MB L2.
// src[k] and dst[k] are `total` contiguous bytes each (what the flat copy and cudaMemcpyAsync copy); the
// entries of set k copy tables[k] (sources, then destinations) by sizes[k], inside `regions` (the two
// arenas of each set, or the pools all sets share). Sources hold a pattern, the rest 0xA5.
struct BatchBuffers {
  size_t n;
  long long total = 0;  // bytes the batch copies
  bool sizes64;
  std::vector<unsigned char*> src, dst;
  std::vector<unsigned long long*> tables;
  std::vector<void*> sizes;
  std::vector<std::vector<unsigned long long>> host_tables;
  std::vector<std::pair<unsigned char*, long long>> regions;  // every byte a launch may write, and its sources
  std::vector<unsigned char*> owned;

  unsigned char* alloc(long long bytes, int fill) {
    unsigned char* p = nullptr;
    CHECK(cudaMalloc(&p, bytes));
    CHECK(cudaMemset(p, fill, bytes));
    owned.push_back(p);
    return p;
  }
  void put_pattern(unsigned char* p, long long bytes, int k) {
    std::vector<unsigned char> pattern(bytes);
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = (unsigned char)(i * 131 + k * 7 + (i >> 12));
    CHECK(cudaMemcpy(p, pattern.data(), pattern.size(), cudaMemcpyHostToDevice));
  }

  BatchBuffers(const Workload& w, int count)
      : n(w.sizes.size()), sizes64(!w.sizes32), src(count), dst(count), tables(count), sizes(count),
        host_tables(count) {
    for (long long s : w.sizes) total += s;
    if (w.pools.empty()) {
      const long long arena = total + 256 * (long long)n;
      for (int k = 0; k < count; ++k) {
        src[k] = alloc(arena, 0xA5), dst[k] = alloc(arena, 0xA5);
        put_pattern(src[k], arena, k);
        regions.push_back({src[k], arena});
        regions.push_back({dst[k], arena});
        std::vector<unsigned long long>& host = host_tables[k];
        host.resize(2 * n);
        long long off = 0;
        for (size_t i = 0; i < n; ++i) {
          host[i] = (unsigned long long)(src[k] + off);
          host[n + i] = (unsigned long long)(dst[k] + off);
          off += w.sizes[i] + 256;
        }
      }
    } else {
      for (int k = 0; k < count; ++k) src[k] = alloc(total, 0), dst[k] = alloc(total, 0xA5), put_pattern(src[k], total, k);
      std::vector<std::pair<unsigned long long, int>> pool_of;  // per term: where its pools start, blocks per pool
      unsigned rng = 12345;
      auto next = [&rng]() { return rng = rng * 1103515245u + 12345u, rng >> 8; };
      std::vector<std::vector<int>> perms;  // per (term, layer): a permutation of its pool's blocks
      std::vector<size_t> first_layer;      // per term: its first layer's index in perms
      for (const Term& t : w.pools) {
        first_layer.push_back(perms.size());
        const int blocks = 2 * t.requests * count;
        const long long bytes = (long long)t.layers * blocks * t.bytes;
        unsigned char* p = alloc(bytes, 0xA5);
        put_pattern(p, bytes, 0);
        regions.push_back({p, bytes});
        for (int l = 0; l < t.layers; ++l) {
          std::vector<int> perm(blocks);
          for (int b = 0; b < blocks; ++b) perm[b] = b;
          for (int b = blocks - 1; b > 0; --b) std::swap(perm[b], perm[next() % (b + 1)]);
          perms.push_back(perm);
        }
        pool_of.push_back({(unsigned long long)p, blocks});
      }
      for (int k = 0; k < count; ++k) {
        std::vector<unsigned long long>& host = host_tables[k];
        host.resize(2 * n);
        size_t i = 0;
        for_each_pool_entry(w.pools, [&](int r, size_t ti, int l) {
          const Term& t = w.pools[ti];
          const int blocks = pool_of[ti].second, need = t.requests * count, col = k * t.requests + r;
          const std::vector<int>& perm = perms[first_layer[ti] + l];
          const unsigned long long pool = pool_of[ti].first + (unsigned long long)l * blocks * t.bytes;
          host[i] = pool + (unsigned long long)perm[col] * t.bytes;
          host[n + i] = pool + (unsigned long long)perm[need + col] * t.bytes;
          ++i;
        });
      }
    }
    const std::vector<int> s32(w.sizes.begin(), w.sizes.end());
    const void* size_words = sizes64 ? (const void*)w.sizes.data() : (const void*)s32.data();
    const size_t size_bytes = n * (sizes64 ? 8 : 4);
    for (int k = 0; k < count; ++k) {
      CHECK(cudaMalloc(&tables[k], 2 * n * 8));
      CHECK(cudaMemcpy(tables[k], host_tables[k].data(), 2 * n * 8, cudaMemcpyHostToDevice));
      CHECK(cudaMalloc(&sizes[k], size_bytes));
      CHECK(cudaMemcpy(sizes[k], size_words, size_bytes, cudaMemcpyHostToDevice));
    }
  }
  BatchBuffers(const BatchBuffers&) = delete;  // owns device memory
  BatchBuffers& operator=(const BatchBuffers&) = delete;
  ~BatchBuffers() {
    for (unsigned char* p : owned) CHECK(cudaFree(p));
    for (size_t k = 0; k < tables.size(); ++k) {
      CHECK(cudaFree(tables[k]));
      CHECK(cudaFree(sizes[k]));
    }
  }
};

// batch_memcpy on buffer set k, with the kernel build the torch binding picks for this batch (grids from
// prepare_launch and prepare_small_launch).
inline void launch_ours(const BatchBuffers& buf, int k, int blocks, int small_blocks) {
  const long long n = (long long)buf.n;
  xsc_cuda::launch_for_batch(xsc_cuda::batch_memcpy_kernel<false>, xsc_cuda::batch_memcpy_kernel<false, true>,
                             blocks, xsc_cuda::batch_memcpy_kernel<true>, small_blocks, 0, n,
                             (const xsc::u64*)buf.tables[k], (const xsc::u64*)buf.tables[k] + n,
                             (const void*)buf.sizes[k], buf.sizes64 ? 1 : 0, (xsc::i64)n);
}

// Runs launch(0) on buffer set 0 with its destinations poisoned (0xA5) and returns how many bytes of the
// buffers differ from what the copy must leave: each destination a copy of its source, every other byte as
// it was (0: right). Called before and after timing, so that a kernel which keeps state between launches is
// checked too.
template <class Launch>
long long wrong_entries(const BatchBuffers& buf, const std::vector<long long>& entry_sizes, Launch launch) {
  const std::vector<unsigned long long>& t = buf.host_tables[0];
  for (size_t i = 0; i < buf.n; ++i) CHECK(cudaMemset((void*)t[buf.n + i], 0xA5, entry_sizes[i]));
  std::vector<std::vector<unsigned char>> before;
  for (const auto& r : buf.regions) {
    before.emplace_back((size_t)r.second);
    CHECK(cudaMemcpy(before.back().data(), r.first, r.second, cudaMemcpyDeviceToHost));
  }
  launch(0);
  CHECK(cudaDeviceSynchronize());
  // Where an address lies on the host: the region holding it in `before` or `expected`.
  auto at = [&](std::vector<std::vector<unsigned char>>& v, unsigned long long a) -> unsigned char* {
    for (size_t j = 0; j < buf.regions.size(); ++j) {
      const unsigned long long b = (unsigned long long)buf.regions[j].first;
      if (a >= b && a < b + (unsigned long long)buf.regions[j].second) return v[j].data() + (a - b);
    }
    std::fprintf(stderr, "address outside the buffers\n");
    std::exit(1);
  };
  std::vector<std::vector<unsigned char>> expected = before;
  for (size_t i = 0; i < buf.n; ++i) std::memcpy(at(expected, t[buf.n + i]), at(before, t[i]), entry_sizes[i]);
  long long bad = 0;
  for (size_t j = 0; j < buf.regions.size(); ++j) {
    std::vector<unsigned char> after((size_t)buf.regions[j].second);
    CHECK(cudaMemcpy(after.data(), buf.regions[j].first, after.size(), cudaMemcpyDeviceToHost));
    for (size_t b = 0; b < after.size(); ++b) bad += after[b] != expected[j][b];
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
// the wrong bytes of both checks.
template <class Launch>
float checked_median_ms(const BatchBuffers& buf, const std::vector<long long>& entry_sizes, Launch launch,
                        long long* bad) {
  *bad = wrong_entries(buf, entry_sizes, launch);
  const float ms = median_ms(launch, (int)buf.src.size());
  *bad += wrong_entries(buf, entry_sizes, launch);
  return ms;
}
