// The copy_states kernel's inputs for a batch of the benchmark programs (cuda_sweep.cu, cuda_timeline.cu),
// so that copy_states and batch_memcpy copy the same bytes.
#pragma once
#include "cuda_bench_common.cuh"

// The copy_states kernel on the batch's layout: entry i is state i of one request, copied from block 0 to
// block 1 of a pool whose block 1 is the entry's destination (the block stride is the distance from source
// to destination, wrapping in uint64 when the destination lies lower). Whole-block states, no shift.
struct StatePlans {
  std::vector<long long*> plans;
  long long* ids;  // src block 0, dst block 1, shift 0: one request

  StatePlans(const BatchBuffers& buf, const std::vector<long long>& sizes) : plans(buf.src.size()) {
    const size_t fields = xsc::kPlanFields;
    for (size_t k = 0; k < plans.size(); ++k) {
      std::vector<long long> host(xsc::plan_words(buf.n), 0);
      for (size_t i = 0; i < buf.n; ++i) {
        long long* p = host.data() + i * fields;
        const unsigned long long src = buf.host_tables[k][i], dst = buf.host_tables[k][buf.n + i];
        p[xsc::kBase] = (long long)src;
        p[xsc::kBlockStride] = (long long)(dst - src);
        p[xsc::kBlocks] = 2;
        p[xsc::kRows] = 1;
        p[xsc::kRowBytes] = sizes[i];
      }
      xsc::derive_plan_fields(host.data(), buf.n);
      CHECK(cudaMalloc(&plans[k], host.size() * 8));
      CHECK(cudaMemcpy(plans[k], host.data(), host.size() * 8, cudaMemcpyHostToDevice));
    }
    const long long host_ids[3] = {0, 1, 0};
    CHECK(cudaMalloc(&ids, sizeof host_ids));
    CHECK(cudaMemcpy(ids, host_ids, sizeof host_ids, cudaMemcpyHostToDevice));
  }
  StatePlans(const StatePlans&) = delete;  // owns device memory
  StatePlans& operator=(const StatePlans&) = delete;
  ~StatePlans() {
    for (long long* p : plans) CHECK(cudaFree(p));
    CHECK(cudaFree(ids));
  }
};

// copy_states on buffer set k as one request of the batch's states, with the kernel build the torch binding
// picks for it (grids from prepare_launch and prepare_small_launch of copy_states_kernel).
inline void launch_states(const BatchBuffers& buf, const StatePlans& states, int k, int blocks, int small_blocks) {
  const long long n = (long long)buf.n;
  xsc_cuda::launch_for_batch(xsc_cuda::copy_states_kernel<false>, xsc_cuda::copy_states_kernel<false>, blocks,
                             xsc_cuda::copy_states_kernel<true>, small_blocks, 0, n, (const xsc::i64*)states.plans[k],
                             (xsc::i64)n, (const void*)states.ids, (const void*)(states.ids + 1),
                             (const void*)(states.ids + 2), 1, (xsc::i64)1);
}
