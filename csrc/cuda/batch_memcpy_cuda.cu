// The CUDA twin bound to torch: registered for the CUDA dispatch key of batch_memcpy, launched on the
// current stream under a device guard. It lets us measure the kernel design on the NVIDIA GPU we have.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "checks.h"
#include "spec_decode.h"
#include "state_plan.h"
#include "batch_memcpy_kernel.cuh"

namespace {

using xsc_cuda::batch_memcpy_kernel;
using xsc_cuda::copy_states_kernel;

// The grid of a kernel build (the resident blocks of the whole GPU; see prepare_small_launch for the
// small-batch builds), worked out once per device and build. Builds of one op share a type, so `Build` tells
// their caches apart: 0 a tile build, 1 a small-batch build, 2 the spec-decode tile build without records
// (the direct build of batch_memcpy takes its tile build's grid).
template <int Build, class Kernel>
int launch_blocks(Kernel kernel, int device) {
  static int cached[64] = {0};
  int& blocks = cached[device % 64];
  if (blocks == 0)
    C10_CUDA_CHECK(Build == 1 ? xsc_cuda::prepare_small_launch(kernel, device, &blocks)
                              : xsc_cuda::prepare_launch(kernel, device, &blocks));
  return blocks;
}

// The build of a kernel that a batch of `entries` takes, on the current stream (`direct`: `tiles` for a
// kernel with no direct build).
template <class Kernel, class... Args>
void launch_build(Kernel tiles, Kernel direct, Kernel small, int device, int64_t entries, Args... args) {
  xsc_cuda::launch_for_batch(tiles, direct, launch_blocks<0>(tiles, device), small, launch_blocks<1>(small, device),
                             c10::cuda::getCurrentCUDAStream(), entries, args...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void cuda_batch_memcpy(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs, const at::Tensor& sizes) {
  const xsc::BatchMemcpyShape shape = xsc::check_batch_memcpy_args(src_ptrs, dst_ptrs, sizes);
  if (shape.count == 0) return;
  const c10::cuda::CUDAGuard guard(src_ptrs.device());
  launch_build(batch_memcpy_kernel<false>, batch_memcpy_kernel<false, true>, batch_memcpy_kernel<true>,
               src_ptrs.device().index(), shape.count,
               reinterpret_cast<const xsc::u64*>(src_ptrs.data_ptr()),
               reinterpret_cast<const xsc::u64*>(dst_ptrs.data_ptr()), static_cast<const void*>(sizes.data_ptr()),
               shape.sizes_are_64bit ? 1 : 0, static_cast<xsc::i64>(shape.count));
}

void cuda_copy_states(at::TensorList states, at::IntArrayRef kinds, const at::Tensor& src_blocks,
                      const at::Tensor& dst_blocks, const at::Tensor& shifts) {
  const xsc::CopyStatesShape shape = xsc::check_copy_states_args(states, kinds, src_blocks, dst_blocks, shifts);
  if (shape.requests == 0) return;
  const c10::cuda::CUDAGuard guard(states[0].device());
  const at::Tensor plan = xsc::device_state_plan(states, kinds);
  launch_build(copy_states_kernel<false>, copy_states_kernel<false>, copy_states_kernel<true>,
               states[0].device().index(),
               shape.requests * shape.states, reinterpret_cast<const xsc::i64*>(plan.data_ptr<int64_t>()),
               static_cast<xsc::i64>(shape.states), static_cast<const void*>(src_blocks.data_ptr()),
               static_cast<const void*>(dst_blocks.data_ptr()), static_cast<const void*>(shifts.data_ptr()),
               shape.ids_are_64bit ? 1 : 0, static_cast<xsc::i64>(shape.requests));
}

using OptTensor = c10::optional<at::Tensor>;

void launch_spec_decode(const at::Tensor& first_state, const xsc::SpecDecodeCall& call) {
  if (call.source.count() == 0) return;
  const int device = first_state.device().index();
  xsc::SpecDecodeSource source = call.source;
  if (source.records_fit()) {
    if (c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None)
      source.claims = xsc::claim_counter(first_state.device());
    launch_build(xsc_cuda::spec_decode_kernel<false>, xsc_cuda::spec_decode_kernel<false>,
                 xsc_cuda::spec_decode_kernel<true>, device, source.count(), source, call.counts_out,
                 call.copy_rest ? 1 : 0);
  } else {  // more rows than a block's records hold: the tile build that reads every span from global memory
    const auto kernel = xsc_cuda::spec_decode_kernel<false, false>;
    kernel<<<launch_blocks<2>(kernel, device), xsc_cuda::kThreads, xsc_cuda::kTableBytes,
             c10::cuda::getCurrentCUDAStream()>>>(source, call.counts_out, call.copy_rest ? 1 : 0);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

void cuda_spec_decode_postprocess(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups,
                                  at::TensorList block_tables, int64_t block_size, int64_t num_rows,
                                  const at::Tensor& num_accepted, const at::Tensor& state_idx,
                                  const at::Tensor& num_computed, const OptTensor& num_scheduled,
                                  const OptTensor& num_draft, const at::Tensor& num_accepted_out,
                                  const OptTensor& idx_mapping, bool by_slot, bool copy_rest) {
  TORCH_CHECK(!states.empty(), "states is empty");
  const c10::cuda::CUDAGuard guard(states[0].device());
  const xsc::SpecDecodeCall call = xsc::prepare_postprocess(
      states, kinds, groups, block_tables, block_size, num_rows, num_accepted, state_idx, num_computed, num_scheduled,
      num_draft, num_accepted_out, idx_mapping, by_slot, copy_rest, true);
  launch_spec_decode(states[0], call);
}

void cuda_spec_decode_precopy(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups,
                              at::TensorList block_tables, int64_t num_rows, const at::Tensor& dst_cols,
                              const at::Tensor& src_cols, const at::Tensor& token_bias, const OptTensor& idx_mapping,
                              bool by_slot) {
  TORCH_CHECK(!states.empty(), "states is empty");
  const c10::cuda::CUDAGuard guard(states[0].device());
  const xsc::SpecDecodeCall call = xsc::prepare_precopy(states, kinds, groups, block_tables, num_rows, dst_cols,
                                                        src_cols, token_bias, idx_mapping, by_slot, true);
  launch_spec_decode(states[0], call);
}

}  // namespace

TORCH_LIBRARY_IMPL(xpu_state_copy, CUDA, m) {
  m.impl("batch_memcpy", &cuda_batch_memcpy);
  m.impl("copy_states_", &cuda_copy_states);
  m.impl("mamba_spec_decode_postprocess_", &cuda_spec_decode_postprocess);
  m.impl("mamba_spec_decode_precopy_", &cuda_spec_decode_precopy);
}
