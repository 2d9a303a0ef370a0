// Torch-free launcher of the batched copy on a sycl::queue. The torch op layer and the C++ tests call it.
#pragma once
#include <sycl/sycl.hpp>

#include <cstdint>
#include <string>

namespace xsc_sycl {

struct BatchMemcpyArgs {
  const uint64_t* src_ptrs;  // device-visible table of source addresses
  const uint64_t* dst_ptrs;  // device-visible table of destination addresses
  const void* sizes;         // device-visible int32 or int64 byte counts
  bool sizes_are_64bit;
  int64_t count;
};

// Enqueues one launch for the whole batch on `queue` and returns its event; no host synchronization.
// count == 0 enqueues nothing and returns a default (complete) event.
sycl::event launch_batch_memcpy(sycl::queue& queue, const BatchMemcpyArgs& args);

// The kernel for the queue's context and device: compiled (sycl-jit) or looked up (sycl-aot) at most once
// per process, context and device, whichever thread asks first; later calls reuse it.
sycl::kernel batch_memcpy_kernel(const sycl::queue& queue);

// "sycl-aot" or "sycl-jit": how this library obtains its kernels.
const char* kernel_origin();

// The device-specific part of kernel_origin(); implemented by kernel_provider_{jit,aot}.
sycl::kernel build_batch_memcpy_kernel(const sycl::context& context, sycl::device device);

}  // namespace xsc_sycl
