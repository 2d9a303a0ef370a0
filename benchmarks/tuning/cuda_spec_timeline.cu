// Where a spec-decode launch's time goes against batch_memcpy over the same spans (the bench's `tables`
// method) and a flat copy of the same bytes: the median of each (with cudaMemcpyAsync of the bytes), then
// per warp when it entered, had the records, scanned, knew its first job and finished its first and last
// unit. The workload is the bench's spec_decode step (benchmarks/spec_decode.py) built without torch: 16
// requests, 36 layers x (48 KiB conv with 3 tokens + 1 MiB temporal), MTP 1 - 3, every other request
// crossing a block boundary; its draws come from a generator of its own, so its spans are not the bench's.
// Every byte of every span is checked for both kernels. The marks take registers (they made the spec
// kernel spill), so -DSPEC_TIMES_ONLY builds the same program without them and prints the times alone.
// On a CUDA GPU:
//   nvcc -std=c++17 -O3 -arch=sm_90 -Icsrc/core -Icsrc/cuda benchmarks/tuning/cuda_spec_timeline.cu -o st && ./st
#ifdef SPEC_TIMES_ONLY
#include "cuda_bench_common.cuh"
__device__ __forceinline__ void mark(int, unsigned long long) {}
__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    marked_flat(const xsc::Word16* src, xsc::Word16* dst, long long words) {
  flat_copy_body(src, dst, words);
}
#else
#include "cuda_marks.cuh"
#endif

constexpr int kRequests = 16, kLayers = 36, kTokens = 3, kColumns = 6, kBlockSize = 64, kSets = 4;
constexpr long long kToken = 16 << 10, kConv = kTokens * kToken, kTemporal = 1 << 20;
// The unit bounds the op's plan carries (units of each state with no shift).
constexpr long long kConvUnits = (kConv + xsc::kChunkBytes - 1) / xsc::kChunkBytes;
constexpr long long kTemporalUnits = (kTemporal + xsc::kChunkBytes - 1) / xsc::kChunkBytes;

__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    marked_spec(xsc::SpecDecodeSource source, int* counts_out) {
  mark(0, 0);
  xsc_cuda::spec_decode_body<false, true>(source, counts_out, 1);
}

// The build for launches whose records do not fit: every span from global memory.
__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    marked_spec_global(xsc::SpecDecodeSource source, int* counts_out) {
  mark(0, 0);
  xsc_cuda::spec_decode_body<false, false>(source, counts_out, 1);
}

__global__ void __launch_bounds__(xsc_cuda::kThreads, XSC_CUDA_MIN_BLOCKS)
    marked_tables(const xsc::u64* src, const xsc::u64* dst, const long long* sizes, xsc::i64 n) {
  mark(0, 0);
  xsc::PointerTableSource source{src, dst, sizes, 1, n};
  xsc_cuda::run_kernel_body<false>(source);
}

__global__ void fill_bytes(unsigned char* p, long long n, unsigned seed) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    p[i] = (unsigned char)(((unsigned long long)i * 2654435761u + seed) >> 13);
}

// Block i counts the bytes of span i whose destination differs from its source.
__global__ void count_differences(const unsigned long long* spans, const long long* sizes, long long n,
                                  unsigned long long* bad) {
  const unsigned char *src = (const unsigned char*)spans[blockIdx.x], *dst = (const unsigned char*)spans[n + blockIdx.x];
  unsigned long long mine = 0;
  for (long long j = threadIdx.x; j < sizes[blockIdx.x]; j += blockDim.x) mine += src[j] != dst[j];
  if (mine) atomicAdd(bad, mine);
}

// The step's device buffers: one conv and one temporal pool per layer (each a stretch of one allocation, as
// the bench's), per set a block table, a plan and the spans as pointer tables; the counts all sets share.
struct SpecStep {
  int blocks = 0;  // per pool
  unsigned char *conv = nullptr, *temporal = nullptr;
  int *accepted, *state_idx, *computed, *scheduled, *drafts, *counts_out;
  unsigned* claims = nullptr;  // the launches' claim counter, at 0 between launches
  std::vector<int*> tables;
  std::vector<xsc::i64*> plans;
  std::vector<unsigned long long*> span_tables;  // sources, then destinations
  std::vector<long long*> span_sizes;
  std::vector<std::vector<unsigned long long>> host_spans;
  std::vector<long long> sizes;  // per span, the same in every set
  long long total = 0;           // bytes one launch moves

  static int* to_device(const std::vector<int>& v) {
    int* p;
    CHECK(cudaMalloc(&p, v.size() * 4));
    CHECK(cudaMemcpy(p, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return p;
  }

  SpecStep() {
    unsigned rng = 2024;
    auto draw = [&rng](int lo, int hi) { return rng = rng * 1103515245u + 12345u, lo + (int)((rng >> 8) % (hi - lo + 1)); };
    std::vector<int> accepted_h, state_h, computed_h, drafts_h, scheduled_h, m_h, bias_h;
    for (int r = 0; r < kRequests; ++r) {
      const int d = draw(1, 3), a = draw(1, d + 1), m = draw(1, 3), boundary = m * kBlockSize;
      const int bias = r % 2 == 0 ? draw(0, a - 1) : -1;  // even requests cross the boundary
      accepted_h.push_back(a), state_h.push_back(m), drafts_h.push_back(d), scheduled_h.push_back(d + 1);
      computed_h.push_back(bias >= 0 ? boundary - bias - 1 : boundary);
      m_h.push_back(m), bias_h.push_back(bias);
    }
    int used = 0;
    for (int r = 0; r < kRequests; ++r) used += bias_h[r] >= 0 ? bias_h[r] + 2 : 0;
    blocks = used * kSets;
    CHECK(cudaMalloc(&conv, (size_t)kLayers * blocks * kConv));
    CHECK(cudaMalloc(&temporal, (size_t)kLayers * blocks * kTemporal));
    std::vector<int> ids(blocks);
    for (int b = 0; b < blocks; ++b) ids[b] = b;
    for (int b = blocks - 1; b > 0; --b) std::swap(ids[b], ids[draw(0, b)]);
    for (int k = 0; k < kSets; ++k) {
      std::vector<int> table(kRequests * kColumns, -1);
      std::vector<unsigned long long> src, dst;
      for (int r = 0; r < kRequests; ++r) {
        const int m = m_h[r], bias = bias_h[r];
        if (bias < 0) continue;
        for (int c = m - 1; c <= m + bias; ++c) table[r * kColumns + c] = ids.back(), ids.pop_back();
        const unsigned long long conv_src = table[r * kColumns + m], whole_src = table[r * kColumns + m + bias],
                                 to = table[r * kColumns + m - 1];
        for (int l = 0; l < kLayers; ++l) {
          const unsigned long long pool = (unsigned long long)conv + (unsigned long long)l * blocks * kConv;
          src.push_back(pool + conv_src * kConv + bias * kToken), dst.push_back(pool + to * kConv);
          if (k == 0) sizes.push_back(kConv - bias * kToken);
        }
        for (int l = 0; l < kLayers; ++l) {
          const unsigned long long pool = (unsigned long long)temporal + (unsigned long long)l * blocks * kTemporal;
          src.push_back(pool + whole_src * kTemporal), dst.push_back(pool + to * kTemporal);
          if (k == 0) sizes.push_back(kTemporal);
        }
      }
      tables.push_back(to_device(table));
      src.insert(src.end(), dst.begin(), dst.end());
      host_spans.push_back(src);
      unsigned long long* t;
      CHECK(cudaMalloc(&t, src.size() * 8));
      CHECK(cudaMemcpy(t, src.data(), src.size() * 8, cudaMemcpyHostToDevice));
      span_tables.push_back(t);
      long long* s;
      CHECK(cudaMalloc(&s, sizes.size() * 8));
      CHECK(cudaMemcpy(s, sizes.data(), sizes.size() * 8, cudaMemcpyHostToDevice));
      span_sizes.push_back(s);
      plans.push_back(plan_of(table_fields(tables.back())));
    }
    for (long long s : sizes) total += s;
    accepted = to_device(accepted_h), state_idx = to_device(state_h), computed = to_device(computed_h);
    scheduled = to_device(scheduled_h), drafts = to_device(drafts_h), counts_out = to_device(accepted_h);
    CHECK(cudaMalloc(&claims, 16));
    CHECK(cudaMemset(claims, 0, 16));
  }
  SpecStep(const SpecStep&) = delete;
  SpecStep& operator=(const SpecStep&) = delete;

  std::vector<long long> table_fields(const int* table) const {
    std::vector<long long> f(xsc::kSpecTableFields);
    f[xsc::kTableBase] = (long long)(unsigned long long)table;
    f[xsc::kTableRows] = kRequests, f[xsc::kTableColumns] = kColumns, f[xsc::kTableRowStride] = kColumns;
    return f;
  }
  // Conv states first, then temporal ones, as the op's states list (and the spans above).
  xsc::i64* plan_of(const std::vector<long long>& table) const {
    std::vector<long long> p;
    for (int j = 0; j < 2 * kLayers; ++j) {
      const bool is_conv = j < kLayers;
      const long long bytes = is_conv ? kConv : kTemporal, token = is_conv ? kToken : 0;
      std::vector<long long> f(xsc::kSpecStateFields);
      f[xsc::kSpecBase] = (long long)((unsigned long long)(is_conv ? conv : temporal) +
                                      (unsigned long long)(j % kLayers) * blocks * bytes);
      f[xsc::kSpecBlockStride] = bytes, f[xsc::kSpecBlocks] = blocks, f[xsc::kSpecRows] = 1;
      f[xsc::kSpecRowStride] = 0, f[xsc::kSpecRowBytes] = bytes, f[xsc::kSpecTokenBytes] = token;
      f[xsc::kSpecMaxShift] = xsc::max_shift_of(bytes, token), f[xsc::kSpecGroup] = 0;
      f[xsc::kSpecUnitsBefore] = j <= kLayers ? j * kConvUnits : kLayers * kConvUnits + (j - kLayers) * kTemporalUnits;
      std::copy(table.begin(), table.end(), f.begin() + xsc::kSpecTableBase);
      p.insert(p.end(), f.begin(), f.end());
    }
    p.insert(p.end(), table.begin(), table.end());
    xsc::i64* d;
    CHECK(cudaMalloc(&d, p.size() * 8));
    CHECK(cudaMemcpy(d, p.data(), p.size() * 8, cudaMemcpyHostToDevice));
    return d;
  }

  // With `claimed`, as the op launches it: the last units claimed through the counter.
  xsc::SpecDecodeSource source(int k, bool claimed = true) const {
    xsc::SpecDecodeSource s;
    std::memset(&s, 0, sizeof s);
    s.plan = plans[k], s.states = 2 * kLayers, s.tables = 1, s.mode = xsc::kSpecPostprocess;
    s.rows = s.slots = kRequests, s.block_size = kBlockSize;
    s.row_units = kLayers * (kConvUnits + kTemporalUnits);
    s.state_idx = state_idx, s.accepted = accepted, s.computed = computed, s.scheduled = scheduled;
    s.drafts = drafts;
    s.claims = claimed ? claims : nullptr;
    return s;
  }

  // Fills both pools with fresh bytes, poisons set k's destinations, runs launch(k) and counts the bytes of
  // set k's spans that differ from their sources.
  template <class Launch>
  long long wrong_bytes(int k, unsigned seed, Launch launch) const {
    const std::vector<unsigned long long>& t = host_spans[k];
    const size_t n = sizes.size();
    fill_bytes<<<1024, 512>>>(conv, (long long)kLayers * blocks * kConv, seed);
    fill_bytes<<<1024, 512>>>(temporal, (long long)kLayers * blocks * kTemporal, seed + 1);
    for (size_t i = 0; i < n; ++i) CHECK(cudaMemset((void*)t[n + i], 0xA5, sizes[i]));
    launch(k);
    unsigned long long* bad;
    CHECK(cudaMalloc(&bad, 8));
    CHECK(cudaMemset(bad, 0, 8));
    count_differences<<<(unsigned)n, 512>>>(span_tables[k], span_sizes[k], (long long)n, bad);
    unsigned long long h = 0;
    CHECK(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
    CHECK(cudaFree(bad));
    return (long long)h;
  }
};

int main() {
  SpecStep step;
  const long long n = (long long)step.sizes.size();
  int blocks = 0, flat_blocks = 0, table_blocks = 0, global_blocks = 0;
  CHECK(xsc_cuda::prepare_launch(marked_spec_global, 0, &global_blocks));
  CHECK(xsc_cuda::prepare_launch(marked_spec, 0, &blocks));
  CHECK(xsc_cuda::prepare_launch(marked_tables, 0, &table_blocks));
  CHECK(xsc_cuda::prepare_launch(marked_flat, 0, &flat_blocks));
  unsigned char *flat_src, *flat_dst;
  CHECK(cudaMalloc(&flat_src, step.total * kSets));
  CHECK(cudaMalloc(&flat_dst, step.total * kSets));
  CHECK(cudaMemset(flat_src, 1, step.total * kSets));
  auto spec = [&](int k) {
    marked_spec<<<blocks, xsc_cuda::kThreads, xsc_cuda::kTableBytes>>>(step.source(k), step.counts_out);
  };
  auto spec_dealt = [&](int k) {  // every unit dealt out in advance, none claimed
    marked_spec<<<blocks, xsc_cuda::kThreads, xsc_cuda::kTableBytes>>>(step.source(k, false), step.counts_out);
  };
  auto spec_global = [&](int k) {
    marked_spec_global<<<global_blocks, xsc_cuda::kThreads, xsc_cuda::kTableBytes>>>(step.source(k), step.counts_out);
  };
  auto tables = [&](int k) {
    marked_tables<<<table_blocks, xsc_cuda::kThreads, xsc_cuda::kTableBytes>>>(
        step.span_tables[k], step.span_tables[k] + n, step.span_sizes[k], n);
  };
  auto flat = [&](int k) {
    marked_flat<<<flat_blocks, xsc_cuda::kThreads>>>((const xsc::Word16*)(flat_src + k * step.total),
                                                     (xsc::Word16*)(flat_dst + k * step.total), step.total / 16);
  };
  auto memcpy_async = [&](int k) {
    CHECK(cudaMemcpyAsync(flat_dst + k * step.total, flat_src + k * step.total, step.total, cudaMemcpyDeviceToDevice));
  };
#ifndef SPEC_TIMES_ONLY
  Timeline timeline(std::max({blocks, global_blocks, table_blocks, flat_blocks}) * (xsc_cuda::kThreads / 32));
#endif
  std::printf("spec-decode step: %lld spans of %d entries, %.1f MiB; grids %d / %d / %d blocks\n", n,
              kRequests * 2 * kLayers, step.total / 1048576.0, blocks, table_blocks, flat_blocks);
  long long bad = 0;
  for (int k = 0; k < kSets; ++k)
    bad += step.wrong_bytes(k, 7 + k, spec) + step.wrong_bytes(k, 99 + k, tables) + step.wrong_bytes(k, 3, spec_global) +
           step.wrong_bytes(k, 11 + k, spec_dealt);
  const float ms_copy = median_ms(memcpy_async, kSets), ms_flat = median_ms(flat, kSets);
  const float ms_spec = median_ms(spec, kSets), ms_tables = median_ms(tables, kSets);
  const float ms_spec2 = median_ms(spec, kSets), ms_tables2 = median_ms(tables, kSets);
  const float ms_dealt = median_ms(spec_dealt, kSets), ms_global = median_ms(spec_global, kSets);
  for (int k = 0; k < kSets; ++k) bad += step.wrong_bytes(k, 5 + k, spec);
  std::printf("median ms: cudaMemcpyAsync %.4f, flat %.4f, spec-decode %.4f / %.4f, tables %.4f / %.4f "
              "(spec / tables %.3f / %.3f of cudaMemcpyAsync), spec-decode with every unit dealt out %.4f, with no records %.4f; "
              "wrong bytes %lld\n",
              ms_copy, ms_flat, ms_spec, ms_spec2, ms_tables, ms_tables2, ms_copy / ms_spec, ms_copy / ms_tables,
              ms_dealt, ms_global, bad);
#ifndef SPEC_TIMES_ONLY
  timeline.run("spec-decode kernel", blocks, xsc_cuda::kThreads, kSets, true, spec);
  timeline.run("spec-decode kernel, every unit dealt out", blocks, xsc_cuda::kThreads, kSets, true, spec_dealt);
  timeline.run("spec-decode kernel, no records", global_blocks, xsc_cuda::kThreads, kSets, true, spec_global);
  timeline.run("batch_memcpy over the same spans", table_blocks, xsc_cuda::kThreads, kSets, true, tables);
  timeline.run("flat copy", flat_blocks, xsc_cuda::kThreads, kSets, false, flat);
#endif
  return bad != 0;
}
