#pragma once
#include <ATen/core/Tensor.h>

#include "checks.h"
#include "launcher.h"

#include <string>

namespace xsc {

// The in-order queue on the Intel OpenCL CPU device that CPU tensors use with XPU_STATE_COPY_BACKEND=sycl.
sycl::queue& sycl_cpu_queue();

// The queue the SYCL ops use for `device` ("cpu": the SYCL CPU device; "xpu[:N]": the XPU device's current
// stream's queue).
sycl::queue& sycl_queue_of(const std::string& device);

// Builds (sycl-jit) or looks up (sycl-aot) the kernels of `device` ("cpu": the SYCL CPU device; "xpu[:N]":
// the XPU device's context, as its current stream's queue has it) without copying anything, so the first
// copy finds them ready. Throws what the build throws; nothing is kept from a failed build.
void prepare_sycl_kernels(const std::string& device);

xsc_sycl::BatchMemcpyArgs to_launch_args(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs,
                                         const at::Tensor& sizes, const BatchMemcpyShape& shape);

}  // namespace xsc
