// The CUDA twin of the SYCL kernel, torch-free: the same kernel body (batch_schedule.h, copy_routine.h)
// under a CUDA Group adapter. batch_memcpy_cuda.cu binds it to torch.
#pragma once
#include <cuda_runtime.h>

#include "batch_schedule.h"
#include "entry_sources.h"
#include "spec_decode_schedule.h"

// The streaming hints of copy_words.h's load_word / store_word for 16-byte words: loads through the
// non-coherent path that allocate nothing in L1 and ask L2 for 256-byte sectors, stores marked as streaming
// (evict first). Declared before the kernels below instantiate the copy routine.
namespace xsc {
template <>
__device__ __forceinline__ Word16 load_word<true, Word16>(const Word16* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  return *p;  // the L2 sector hint needs sm_80; older GPUs (a T4) load plainly
#else
  Word16 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.u64 {%0, %1}, [%2];" : "=l"(v.lo), "=l"(v.hi) : "l"(p));
  return v;
#endif
}
template <>
__device__ __forceinline__ void store_word<true, Word16>(Word16* p, const Word16& v) {
  asm volatile("st.global.cs.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(v.lo), "l"(v.hi) : "memory");
}
}  // namespace xsc

namespace xsc_cuda {

#ifndef XSC_CUDA_THREADS
#define XSC_CUDA_THREADS 512
#endif
#ifndef XSC_CUDA_MIN_BLOCKS
#define XSC_CUDA_MIN_BLOCKS 1  // blocks per SM the register budget must allow (__launch_bounds__)
#endif

constexpr int kThreads = XSC_CUDA_THREADS;
constexpr int kWarp = 32;

// Unroll16: 16-byte loads in flight per work-item; ShiftedShuffle: which shifted copy (shifted_copy.h).
template <int Unroll16 = xsc::kUnroll, bool ShiftedShuffle = true>
struct CudaGroup {
  static constexpr int kUnroll16 = Unroll16;
  static constexpr bool kShiftedShuffle = ShiftedShuffle;
  xsc::u64* table;
  xsc::i64* warp_sums;  // kThreads / kWarp partial sums for the group scan

  __device__ xsc::i64 group_id() const { return blockIdx.x; }
  __device__ xsc::i64 num_groups() const { return gridDim.x; }
  __device__ xsc::i64 local_id() const { return threadIdx.x; }
  __device__ xsc::i64 local_size() const { return blockDim.x; }
  __device__ xsc::i64 sg_id() const { return threadIdx.x / kWarp; }
  __device__ xsc::i64 num_sgs() const { return blockDim.x / kWarp; }
  __device__ xsc::i64 sg_lane() const { return threadIdx.x % kWarp; }
  __device__ xsc::i64 sg_size() const { return kWarp; }
  __device__ void barrier() const { __syncthreads(); }
  __device__ void sg_barrier() const { __syncwarp(); }
  // v of lane `from` of the warp; every lane calls it together.
  __device__ xsc::u64 sg_shuffle(xsc::u64 v, int from) const { return __shfl_sync(0xffffffffu, v, from); }
  // How many lanes of the warp hold p; every lane calls it together.
  __device__ xsc::i64 sg_count(bool p) const { return __popc(__ballot_sync(0xffffffffu, p)); }
  // Whether p holds for any work-item of the group: a group function, reached by every work-item.
  __device__ bool any(bool p) const { return __syncthreads_or(p) != 0; }
  __device__ xsc::u64* scratch() const { return table; }
  // A counter in global memory (spec_decode_schedule.h's claims): add 1 and return the value before.
  __device__ unsigned atomic_inc(unsigned* p) const { return atomicAdd(p, 1u); }
  __device__ void atomic_clear(unsigned* p) const { atomicExch(p, 0u); }
  // The 128-byte line at p into L2, without waiting for it.
  __device__ void prefetch_line(const void* p) const { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

  // Sub-group (warp) inclusive prefix sum, by shuffles.
  __device__ static xsc::i64 warp_inclusive_scan(xsc::i64 v) {
    const int lane = threadIdx.x % kWarp;
#pragma unroll
    for (int d = 1; d < kWarp; d *= 2) {
      xsc::i64 up = __shfl_up_sync(0xffffffffu, v, d);
      if (lane >= d) v += up;
    }
    return v;
  }
  __device__ xsc::i64 sg_exclusive_scan(xsc::i64 v, xsc::i64* total) const {
    const xsc::i64 incl = warp_inclusive_scan(v);
    *total = __shfl_sync(0xffffffffu, incl, kWarp - 1);
    return incl - v;
  }
  __device__ xsc::i64 sg_sum(xsc::i64 v) const {
#pragma unroll
    for (int d = kWarp / 2; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
    return v;
  }

  // Block-wide exclusive prefix sum: warp scans, then one warp scans the warp totals.
  __device__ xsc::i64 exclusive_scan(xsc::i64 v, xsc::i64* total) const {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
    const xsc::i64 incl = warp_inclusive_scan(v);
    if (lane == kWarp - 1) warp_sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
      const xsc::i64 w = warp_inclusive_scan(lane < warps ? warp_sums[lane] : 0);
      if (lane < warps) warp_sums[lane] = w;  // inclusive prefix over warps
    }
    __syncthreads();
    const xsc::i64 before = warp == 0 ? 0 : warp_sums[warp - 1];
    *total = warp_sums[warps - 1];
    __syncthreads();  // warp_sums is reused by the next scan
    return before + incl - v;
  }
};

// The tile's running totals live in dynamic shared memory, so that a larger tile (XSC_ITEMS) needs no code
// change: above 48 KiB a kernel must opt in.
constexpr size_t table_bytes(int threads) { return sizeof(xsc::u64) * threads * xsc::kItems; }
constexpr size_t kTableBytes = table_bytes(kThreads);

// The small-batch builds' blocks: small_batch.h needs no group barrier, so their blocks may be narrower than
// the tile builds'. Its grid is one resident grid of them, at one block per SM: several resident grids' worth
// of blocks (0.79 - 0.84 on `step` against 0.86) and two or three blocks per SM (64 / 80 registers, spilling:
// 0.65 / 0.74) lost on an H200 (docs/tuning-rounds-1-3.md), and their knobs were retired.
#ifndef XSC_SMALL_THREADS
#define XSC_SMALL_THREADS 512
#endif
constexpr int kSmallThreads = XSC_SMALL_THREADS;
constexpr int kSmallMinBlocks = 1;  // the small build's blocks per SM (launch bounds)
// Whole warps (small_batch.h numbers sub-groups as if every one were full), within the launch bounds and
// the warp_sums array that every build is compiled with.
static_assert(kSmallThreads % 32 == 0 && kSmallThreads <= kThreads,
              "XSC_SMALL_THREADS: a multiple of 32, at most XSC_CUDA_THREADS");

// Opts `kernel` in to kTableBytes of dynamic shared memory (enough for any block up to kThreads wide) and
// sets `blocks` to how many `threads`-wide blocks of it the whole device keeps resident: the persistent grid.
template <class Kernel>
inline cudaError_t prepare_launch(Kernel kernel, int device, int* blocks, int threads = kThreads) {
  int per_sm = 0, sms = 0;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kTableBytes);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, table_bytes(threads));
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  *blocks = (per_sm > 0 ? per_sm : 1) * sms;
  return e;
}

// The small-batch build's grid: one resident grid of kSmallThreads-wide blocks.
template <class Kernel>
inline cudaError_t prepare_small_launch(Kernel kernel, int device, int* blocks) {
  return prepare_launch(kernel, device, blocks, kSmallThreads);
}

// Each kernel comes in two builds: Small for the batches small_batch.h schedules, the other with the tile
// schedule alone, so that the registers of neither path are allocated for the other's (the tile path lost
// 2-3 % on large batches when they shared a kernel). The launcher knows the warp size, so it never sends
// Small a batch the small-batch schedule does not fit (launch_for_batch asks small_batch_fits with the
// Small grid), and Small carries no tile path (the SYCL kernel does: its launcher asks the sub-group size).
// The Small build has kSmallUnroll16 16-byte loads in flight (copy_words.h), the other kUnroll.
// Direct: the tile build with the direct pass (batch_schedule.h's direct_units).
template <bool Small, class Source, bool Direct = false>
__device__ __forceinline__ void run_kernel_body(Source& source) {
  extern __shared__ xsc::u64 table[];  // table_bytes(blockDim.x), given at launch
  __shared__ xsc::i64 warp_sums[kThreads / kWarp];
  CudaGroup<Small ? xsc::kSmallUnroll16 : xsc::kUnroll, !Small> g{table, warp_sums};
  if (Small) xsc::run_small_batch(g, source, source.count());
  else if constexpr (Direct) xsc::run_tiles<true>(g, source, source.count());
  else xsc::run_large_batch(g, source);
}

// Launches the build of a kernel (tile-only, tile with the direct pass, or small-batch) that a batch of
// `entries` takes, on the grids prepare_launch and prepare_small_launch worked out for them (the direct
// build, as wide and as bounded as the tile build, shares its grid). The torch binding and the sweep both
// call it, so the sweep times what the op runs. A kernel with no direct build passes `tiles` twice.
template <class Kernel, class... Args>
inline void launch_for_batch(Kernel tiles, Kernel direct, int tile_blocks, Kernel small, int small_blocks,
                             cudaStream_t stream, long long entries, Args... args) {
  if (xsc::small_batch_fits(entries, kWarp, (long long)small_blocks * (kSmallThreads / kWarp)))
    small<<<small_blocks, kSmallThreads, table_bytes(kSmallThreads), stream>>>(args...);
  else if (xsc::direct_units(entries, (long long)tile_blocks * (kThreads / kWarp)) > 1)
    direct<<<tile_blocks, kThreads, kTableBytes, stream>>>(args...);
  else
    tiles<<<tile_blocks, kThreads, kTableBytes, stream>>>(args...);
}

// Each build's launch bounds: its block width and the blocks per SM its registers must allow.
template <bool Small>
constexpr int kBoundThreads = Small ? kSmallThreads : kThreads;
template <bool Small>
constexpr int kBoundBlocks = Small ? kSmallMinBlocks : XSC_CUDA_MIN_BLOCKS;

template <bool Small, bool Direct = false>
__global__ void __launch_bounds__(kBoundThreads<Small>, kBoundBlocks<Small>) batch_memcpy_kernel(
    const xsc::u64* src, const xsc::u64* dst, const void* sizes, int sizes_are_64bit, xsc::i64 n) {
  xsc::PointerTableSource source{src, dst, sizes, sizes_are_64bit, n};
  run_kernel_body<Small, xsc::PointerTableSource, Direct>(source);
}

template <bool Small>
__global__ void __launch_bounds__(kBoundThreads<Small>, kBoundBlocks<Small>) copy_states_kernel(
    const xsc::i64* plan, xsc::i64 states, const void* src_blocks, const void* dst_blocks, const void* shifts,
    int ids_are_64bit, xsc::i64 requests) {
  xsc::StatePlanSource source{plan, states, src_blocks, dst_blocks, shifts, ids_are_64bit, requests};
  run_kernel_body<Small>(source);
}

// The Records builds' schedule (spec_decode_schedule.h) lists the rows that copy in the tile table.
static_assert(xsc::kSpecMaxRecords <= kThreads * xsc::kItems, "XSC_CUDA_THREADS too small for the row list");

// The spec-decode copies (spec_decode_source.h): the accepted-token counts first, by the threads in turn
// (no entry reads them), then the copies. With Records (records_fit(), the launcher's choice) each block
// first works out every row's record and copies the plan into shared memory and copies from those;
// without, from global memory (a build of its own: with both paths one build spilled 52 bytes). A device
// function, so that the timeline instrument can mark a launch's start around the same body.
template <bool Small, bool Records>
__device__ __forceinline__ void spec_decode_body(const xsc::SpecDecodeSource& source, int* counts_out,
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
  if constexpr (Records) {
    __shared__ xsc::SpecRowRecord records[xsc::kSpecMaxRecords];
    __shared__ xsc::i64 plan[xsc::kSpecMaxPlanWords];
    const xsc::i64* plan_read = source.fill_local(threadIdx.x, blockDim.x, records, plan);
    __syncthreads();
    XSC_MARK(xsc::kMarkRecords, 0);
    xsc::SpecDecodeRecordSource from_records{source, records, plan_read};
    run_kernel_body<Small>(from_records);
  } else {
    run_kernel_body<Small>(source);
  }
}

template <bool Small, bool Records = true>
__global__ void __launch_bounds__(kBoundThreads<Small>, kBoundBlocks<Small>) spec_decode_kernel(
    xsc::SpecDecodeSource source, int* counts_out, int copy_rest) {
  spec_decode_body<Small, Records>(source, counts_out, copy_rest);
}

}  // namespace xsc_cuda
