// The CUDA twin bound to torch: registered for the CUDA dispatch key of batch_memcpy, launched on the
// current stream under a device guard. It lets us measure the kernel design on the NVIDIA GPU we have.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "checks.h"
#include "state_plan.h"
#include "batch_memcpy_kernel.cuh"

namespace {

using xsc_cuda::batch_memcpy_kernel;
using xsc_cuda::copy_states_kernel;
using xsc_cuda::kThreads;

// Resident blocks of the whole GPU: the grid is persistent, each block takes its share of units. Worked out
// once per device and kernel (each kernel type instantiates its own cache).
template <class Kernel>
int launch_blocks(Kernel kernel, int device) {
  static int cached[64] = {0};
  int& blocks = cached[device % 64];
  if (blocks == 0) C10_CUDA_CHECK(xsc_cuda::prepare_launch(kernel, device, &blocks));
  return blocks;
}

void cuda_batch_memcpy(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs, const at::Tensor& sizes) {
  const xsc::BatchMemcpyShape shape = xsc::check_batch_memcpy_args(src_ptrs, dst_ptrs, sizes);
  if (shape.count == 0) return;
  const c10::cuda::CUDAGuard guard(src_ptrs.device());
  const int device = src_ptrs.device().index();
  const bool small = xsc_cuda::use_small_kernel(launch_blocks(batch_memcpy_kernel<false>, device), shape.count);
  const auto kernel = small ? batch_memcpy_kernel<true> : batch_memcpy_kernel<false>;
  const int blocks = small ? launch_blocks(batch_memcpy_kernel<true>, device) : launch_blocks(batch_memcpy_kernel<false>, device);
  kernel<<<blocks, kThreads, xsc_cuda::kTableBytes, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const xsc::u64*>(src_ptrs.data_ptr()), reinterpret_cast<const xsc::u64*>(dst_ptrs.data_ptr()),
      sizes.data_ptr(), shape.sizes_are_64bit ? 1 : 0, shape.count);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void cuda_copy_states(at::TensorList states, at::IntArrayRef kinds, const at::Tensor& src_blocks,
                      const at::Tensor& dst_blocks, const at::Tensor& shifts) {
  const xsc::CopyStatesShape shape = xsc::check_copy_states_args(states, kinds, src_blocks, dst_blocks, shifts);
  if (shape.requests == 0) return;
  const c10::cuda::CUDAGuard guard(states[0].device());
  const at::Tensor plan = xsc::device_state_plan(states, kinds);
  const int device = states[0].device().index();
  const xsc::i64 entries = shape.requests * shape.states;
  const bool small = xsc_cuda::use_small_kernel(launch_blocks(copy_states_kernel<false>, device), entries);
  const auto kernel = small ? copy_states_kernel<true> : copy_states_kernel<false>;
  const int blocks = small ? launch_blocks(copy_states_kernel<true>, device) : launch_blocks(copy_states_kernel<false>, device);
  kernel<<<blocks, kThreads, xsc_cuda::kTableBytes, c10::cuda::getCurrentCUDAStream()>>>(
      reinterpret_cast<const xsc::i64*>(plan.data_ptr<int64_t>()), shape.states, src_blocks.data_ptr(), dst_blocks.data_ptr(), shifts.data_ptr(),
      shape.ids_are_64bit ? 1 : 0, shape.requests);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

TORCH_LIBRARY_IMPL(xpu_state_copy, CUDA, m) {
  m.impl("batch_memcpy", &cuda_batch_memcpy);
  m.impl("copy_states_", &cuda_copy_states);
}
