// batch_memcpy through the SYCL kernel: on XPU tensors (the current XPU stream's queue, asynchronous) and on
// CPU tensors via the Intel OpenCL CPU device (synchronous, as CPU ops are). Compiled by g++ against
// intel-sycl-rt into the _sycl_jit module, or by icpx into _C (XSC_KERNEL_AOT).
#include <ATen/ATen.h>
#include <torch/library.h>

#ifdef XSC_WITH_TORCH_XPU
#include <c10/core/DeviceGuard.h>
#include <c10/xpu/XPUStream.h>
#endif

#include "checks.h"
#include "launcher.h"
#include "state_plan.h"
#include "sycl_ops.h"

namespace xsc {

xsc_sycl::BatchMemcpyArgs to_launch_args(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs,
                                         const at::Tensor& sizes, const BatchMemcpyShape& shape) {
  return xsc_sycl::BatchMemcpyArgs{reinterpret_cast<const uint64_t*>(src_ptrs.data_ptr()),
                                   reinterpret_cast<const uint64_t*>(dst_ptrs.data_ptr()), sizes.data_ptr(),
                                   shape.sizes_are_64bit, shape.count};
}

sycl::queue& sycl_cpu_queue() {
  // Leaked on purpose: releasing a queue after the SYCL runtime shut down crashes at exit.
  static sycl::queue* queue = [] {
    try {
      return new sycl::queue(sycl::cpu_selector_v, sycl::property::queue::in_order());
    } catch (const sycl::exception& e) {
      XSC_CHECK(false, "no SYCL CPU device (", e.what(), "): pip install intel-opencl-rt and set ",
                  "OCL_ICD_FILENAMES to its lib/libintelocl.so (import xpu_state_copy does this when unset)");
    }
  }();
  return *queue;
}

sycl::queue& sycl_queue_of(const std::string& device) {
  const c10::Device where(device);
  if (where.is_cpu()) return sycl_cpu_queue();
#ifdef XSC_WITH_TORCH_XPU
  if (where.is_xpu()) {
    // Any queue of the device's context would do (the kernels are kept per context and device); the current
    // stream's is the one torch has already made.
    const c10::DeviceIndex index = where.has_index() ? where.index() : -1;  // -1: the current device
    return c10::xpu::getCurrentXPUStream(index).queue();
  }
#endif
  XSC_CHECK(false, "device must be 'cpu' (the SYCL CPU device) or an XPU device",
            " this build runs SYCL kernels on, got '", device, "'");
}

void prepare_sycl_kernels(const std::string& device) { xsc_sycl::prepare_kernels(sycl_queue_of(device)); }

namespace {

xsc_sycl::CopyStatesArgs to_launch_args(const at::Tensor& plan, const at::Tensor& src_blocks,
                                        const at::Tensor& dst_blocks, const at::Tensor& shifts,
                                        const CopyStatesShape& shape) {
  return xsc_sycl::CopyStatesArgs{plan.data_ptr<int64_t>(), shape.states, src_blocks.data_ptr(),
                                  dst_blocks.data_ptr(), shifts.data_ptr(), shape.ids_are_64bit, shape.requests};
}

void sycl_cpu_copy_states(at::TensorList states, at::IntArrayRef kinds, const at::Tensor& src_blocks,
                          const at::Tensor& dst_blocks, const at::Tensor& shifts) {
  const CopyStatesShape shape = check_copy_states_args(states, kinds, src_blocks, dst_blocks, shifts);
  XSC_CHECK(states[0].device().is_cpu(), "the SYCL CPU path takes CPU tensors, got states on ",
              states[0].device());
  const at::Tensor plan = build_state_plan(states, kinds);
  try {
    xsc_sycl::launch_copy_states(sycl_cpu_queue(), to_launch_args(plan, src_blocks, dst_blocks, shifts, shape))
        .wait_and_throw();
  } catch (const sycl::exception& e) {
    XSC_CHECK(false, "SYCL copy_states_ on the CPU device failed: ", e.what());
  }
}

void sycl_cpu_batch_memcpy(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs, const at::Tensor& sizes) {
  const BatchMemcpyShape shape = check_batch_memcpy_args(src_ptrs, dst_ptrs, sizes);
  XSC_CHECK(src_ptrs.device().is_cpu(), "the SYCL CPU path takes CPU tensors, got src_ptrs on ",
              src_ptrs.device());
  try {
    xsc_sycl::launch_batch_memcpy(sycl_cpu_queue(), to_launch_args(src_ptrs, dst_ptrs, sizes, shape))
        .wait_and_throw();
  } catch (const sycl::exception& e) {
    XSC_CHECK(false, "SYCL batch_memcpy on the CPU device failed: ", e.what());
  }
}

#ifdef XSC_WITH_TORCH_XPU
void xpu_batch_memcpy(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs, const at::Tensor& sizes) {
  const BatchMemcpyShape shape = check_batch_memcpy_args(src_ptrs, dst_ptrs, sizes);
  c10::DeviceGuard guard(src_ptrs.device());
  sycl::queue& queue = c10::xpu::getCurrentXPUStream(src_ptrs.device().index()).queue();
  xsc_sycl::launch_batch_memcpy(queue, to_launch_args(src_ptrs, dst_ptrs, sizes, shape));
}

void xpu_copy_states(at::TensorList states, at::IntArrayRef kinds, const at::Tensor& src_blocks,
                     const at::Tensor& dst_blocks, const at::Tensor& shifts) {
  const CopyStatesShape shape = check_copy_states_args(states, kinds, src_blocks, dst_blocks, shifts);
  c10::DeviceGuard guard(states[0].device());
  const at::Tensor plan = device_state_plan(states, kinds);
  sycl::queue& queue = c10::xpu::getCurrentXPUStream(states[0].device().index()).queue();
  xsc_sycl::launch_copy_states(queue, to_launch_args(plan, src_blocks, dst_blocks, shifts, shape));
}
#endif

}  // namespace
}  // namespace xsc

TORCH_LIBRARY_IMPL(xpu_state_copy, CPU, m) {
  m.impl("_sycl_batch_memcpy", &xsc::sycl_cpu_batch_memcpy);
  m.impl("_sycl_copy_states_", &xsc::sycl_cpu_copy_states);
}

#ifdef XSC_WITH_TORCH_XPU
TORCH_LIBRARY_IMPL(xpu_state_copy, XPU, m) {
  m.impl("batch_memcpy", &xsc::xpu_batch_memcpy);
  m.impl("copy_states_", &xsc::xpu_copy_states);
}
#endif
