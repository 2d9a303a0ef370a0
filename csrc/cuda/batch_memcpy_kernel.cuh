// The CUDA twin of the SYCL kernels, torch-free: the same kernel body (schedule.h, copy_routine.h) under a
// CUDA Group adapter, so that the schedule and copy routine the SYCL build ships are what we measure on an
// NVIDIA GPU. batch_memcpy_cuda.cu binds it to torch.
#pragma once
#include <cuda_runtime.h>

#include "schedule.h"
#include "spec_decode_source.h"

// 16-byte loads in flight per thread from an aligned source: the twin times the SYCL kernels of GPUs with
// 64-byte registers (8, kernel_provider_jit.cpp's aligned_loads_for); -DXSC_ALIGNED_LOADS=4 builds what dg2
// and mtl run. A shifted source takes kShiftedLoads (4), as in every SYCL build.
#ifndef XSC_ALIGNED_LOADS
#define XSC_ALIGNED_LOADS 8
#endif

namespace xsc_cuda {

constexpr int kWarp = 32;
constexpr int kThreads = (int)xsc::kMaxGroupSize;  // the table schedule's tile is sized for this width

struct CudaGroup {
  static constexpr int kAlignedLoads = XSC_ALIGNED_LOADS;
  xsc::u32* local_table;
  xsc::u32* warp_sums;  // kThreads / kWarp partial sums for the group scan

  __device__ xsc::u32 group_id() const { return blockIdx.x; }
  __device__ xsc::u32 num_groups() const { return gridDim.x; }
  __device__ xsc::u32 local_id() const { return threadIdx.x; }
  __device__ xsc::u32 local_size() const { return blockDim.x; }
  __device__ xsc::u32 sg_id() const { return threadIdx.x / kWarp; }
  __device__ xsc::u32 num_sgs() const { return blockDim.x / kWarp; }
  __device__ xsc::u32 sg_lane() const { return threadIdx.x % kWarp; }
  __device__ xsc::u32 sg_size() const { return kWarp; }
  __device__ void barrier() const { __syncthreads(); }
  __device__ void sg_barrier() const { __syncwarp(); }
  __device__ xsc::u32 sg_shuffle(xsc::u32 v, xsc::u32 from) const { return __shfl_sync(0xffffffffu, v, (int)from); }
  __device__ xsc::u32 sg_count(bool p) const { return (xsc::u32)__popc(__ballot_sync(0xffffffffu, p)); }
  __device__ xsc::u32 sg_min(xsc::u32 v) const {
#pragma unroll
    for (int d = kWarp / 2; d > 0; d /= 2) v = min(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
  }
  __device__ xsc::u32 sg_exclusive_sum(xsc::u32 v, xsc::u32* total) const {
    const xsc::u32 incl = warp_inclusive_scan(v);
    *total = __shfl_sync(0xffffffffu, incl, kWarp - 1);
    return incl - v;
  }
  __device__ xsc::u32* table() const { return local_table; }

  // Block-wide exclusive prefix sum: warp scans by shuffles, then one warp scans the warp totals.
  __device__ static xsc::u32 warp_inclusive_scan(xsc::u32 v) {
    const int lane = threadIdx.x % kWarp;
#pragma unroll
    for (int d = 1; d < kWarp; d *= 2) {
      const xsc::u32 up = __shfl_up_sync(0xffffffffu, v, d);
      if (lane >= d) v += up;
    }
    return v;
  }
  __device__ xsc::u32 exclusive_scan(xsc::u32 v, xsc::u32* total) const {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    const xsc::u32 incl = warp_inclusive_scan(v);
    if (lane == kWarp - 1) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const xsc::u32 w = warp_inclusive_scan(lane < warps ? warp_sums[lane] : 0u);
      if (lane < warps) warp_sums[lane] = w;
    }
    __syncthreads();
    const xsc::u32 before = warp == 0 ? 0u : warp_sums[warp - 1];
    *total = warp_sums[warps - 1];
    __syncthreads();  // warp_sums is reused by the next scan
    return before + incl - v;
  }
};

// The resident grid of `kernel` at kThreads per block: blocks per SM (the occupancy calculator, from the
// compiled kernel's registers and shared memory) times SMs.
template <class Kernel>
inline cudaError_t resident_blocks(Kernel kernel, int device, int* blocks) {
  int per_sm = 0, sms = 0;
  cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  *blocks = (per_sm > 0 ? per_sm : 1) * sms;
  return e;
}

__global__ void __launch_bounds__(kThreads) batch_memcpy_kernel(const xsc::u64* src, const xsc::u64* dst,
                                                                const void* sizes, int sizes_are_64bit, xsc::i64 n) {
  __shared__ xsc::u32 ends[xsc::kTableEntries];
  __shared__ xsc::u32 warp_sums[kThreads / kWarp];
  xsc::run_tiles(CudaGroup{ends, warp_sums}, xsc::PointerTableSource{src, dst, sizes, sizes_are_64bit, n});
}

__global__ void __launch_bounds__(kThreads) copy_states_kernel(const xsc::i64* plan, xsc::i64 states,
                                                               const void* src_blocks, const void* dst_blocks,
                                                               const void* shifts, int ids_are_64bit,
                                                               xsc::i64 requests) {
  xsc::run_rows(CudaGroup{nullptr, nullptr},
                xsc::StatePlanSource{plan, states, src_blocks, dst_blocks, shifts, ids_are_64bit, requests});
}

// The spec-decode copies (spec_decode_source.h): the accepted-token counts first, by the threads in turn
// (no entry reads them), then the copies.
__global__ void __launch_bounds__(kThreads) spec_decode_kernel(xsc::SpecDecodeSource source, int* counts_out,
                                                               int copy_rest) {
  if (counts_out != nullptr) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < source.rows; row += stride) {
      long long slot;
      int value;
      source.count_out(row, copy_rest != 0, &slot, &value);
      if (slot >= 0) counts_out[slot] = value;
    }
  }
  xsc::run_rows(CudaGroup{nullptr, nullptr}, source);
}

}  // namespace xsc_cuda
