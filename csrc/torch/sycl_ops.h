#pragma once
#include <ATen/core/Tensor.h>

#include "checks.h"
#include "launcher.h"

namespace xsc {

// The in-order queue on the Intel OpenCL CPU device that CPU tensors use with XPU_STATE_COPY_BACKEND=sycl.
sycl::queue& sycl_cpu_queue();

xsc_sycl::BatchMemcpyArgs to_launch_args(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs,
                                         const at::Tensor& sizes, const BatchMemcpyShape& shape);

}  // namespace xsc
