// The CUDA twin bound to torch: registered for the CUDA dispatch key of batch_memcpy, launched on the
// current stream under a device guard. It lets us measure the kernel design on the NVIDIA GPU we have.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "checks.h"
#include "spec_decode.h"
#include "state_plan.h"
#include "batch_memcpy_kernel.cuh"

namespace {

// The resident grid of a kernel, worked out once per device (Kernel tells the kernels' caches apart).
template <int Kernel, class K>
int launch_blocks(K kernel, int device) {
  static int cached[64] = {0};
  int& blocks = cached[device % 64];
  if (blocks == 0) C10_CUDA_CHECK(xsc_cuda::resident_blocks(kernel, device, &blocks));
  return blocks;
}

// One launch of `kernel` over its resident grid, on the current stream.
template <int Kernel, class K, class... Args>
void launch(K kernel, int device, Args... args) {
  kernel<<<launch_blocks<Kernel>(kernel, device), xsc_cuda::kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(args...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void cuda_batch_memcpy(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs, const at::Tensor& sizes) {
  const xsc::BatchMemcpyShape shape = xsc::check_batch_memcpy_args(src_ptrs, dst_ptrs, sizes);
  if (shape.count == 0) return;
  const c10::cuda::CUDAGuard guard(src_ptrs.device());
  launch<0>(xsc_cuda::batch_memcpy_kernel, src_ptrs.device().index(), reinterpret_cast<const xsc::u64*>(src_ptrs.data_ptr()),
               reinterpret_cast<const xsc::u64*>(dst_ptrs.data_ptr()), static_cast<const void*>(sizes.data_ptr()),
               shape.sizes_are_64bit ? 1 : 0, static_cast<xsc::i64>(shape.count));
}

void cuda_copy_states(at::TensorList states, at::IntArrayRef kinds, const at::Tensor& src_blocks,
                      const at::Tensor& dst_blocks, const at::Tensor& shifts) {
  const xsc::CopyStatesShape shape = xsc::check_copy_states_args(states, kinds, src_blocks, dst_blocks, shifts);
  if (shape.requests == 0) return;
  const c10::cuda::CUDAGuard guard(states[0].device());
  const at::Tensor plan = xsc::device_state_plan(states, kinds);
  launch<1>(xsc_cuda::copy_states_kernel, states[0].device().index(), reinterpret_cast<const xsc::i64*>(plan.data_ptr<int64_t>()),
               static_cast<xsc::i64>(shape.states), static_cast<const void*>(src_blocks.data_ptr()),
               static_cast<const void*>(dst_blocks.data_ptr()), static_cast<const void*>(shifts.data_ptr()),
               shape.ids_are_64bit ? 1 : 0, static_cast<xsc::i64>(shape.requests));
}

using OptTensor = c10::optional<at::Tensor>;

void launch_spec_decode(const at::Tensor& first_state, const xsc::SpecDecodeCall& call) {
  if (call.source.count() == 0) return;
  launch<2>(xsc_cuda::spec_decode_kernel, first_state.device().index(), call.source, call.counts_out,
            call.copy_rest ? 1 : 0);
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
