#include "launcher.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace xsc_sycl {
namespace {

struct CachedKernel {
  sycl::context context;
  sycl::device device;
  sycl::kernel kernel;
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}

// Never destroyed: SYCL objects released after the SYCL runtime's own shutdown crash the process at exit.
std::vector<CachedKernel>& cache() {
  static auto* c = new std::vector<CachedKernel>();
  return *c;
}

// Groups per compute unit: enough resident work to hide memory latency without oversubscribing.
size_t launch_groups(const sycl::device& device) {
  size_t units = device.get_info<sycl::info::device::max_compute_units>();
  size_t per_unit = device.is_gpu() ? 2 : 4;
  return std::max<size_t>(1, units * per_unit);
}

size_t launch_group_size(const sycl::device& device, const sycl::kernel& kernel) {
  size_t limit = kernel.get_info<sycl::info::kernel_device_specific::work_group_size>(device);
  limit = std::min(limit, device.get_info<sycl::info::device::max_work_group_size>());
  size_t size = 512;  // the kernel's local arrays are sized for at most 512 work-items
  while (size > limit) size /= 2;
  return std::max<size_t>(size, 1);
}

}  // namespace

sycl::kernel batch_memcpy_kernel(const sycl::queue& queue) {
  const sycl::context context = queue.get_context();
  const sycl::device device = queue.get_device();
  // Held across the build: concurrent first calls wait for the one build instead of racing it.
  std::lock_guard<std::mutex> lock(cache_mutex());
  for (const CachedKernel& c : cache())
    if (c.context == context && c.device == device) return c.kernel;
  sycl::kernel kernel = build_batch_memcpy_kernel(context, device);
  cache().push_back(CachedKernel{context, device, kernel});
  return kernel;
}

sycl::event launch_batch_memcpy(sycl::queue& queue, const BatchMemcpyArgs& args) {
  if (args.count == 0) return sycl::event();
  sycl::kernel kernel = batch_memcpy_kernel(queue);
  const sycl::device device = queue.get_device();
  const size_t local = launch_group_size(device, kernel);
  const size_t global = local * launch_groups(device);
  // Argument types match the kernel's parameters exactly (set_args copies them by value).
  const auto* src = reinterpret_cast<const unsigned long long*>(args.src_ptrs);
  const auto* dst = reinterpret_cast<const unsigned long long*>(args.dst_ptrs);
  const void* sizes = args.sizes;
  const int sizes_are_64bit = args.sizes_are_64bit ? 1 : 0;
  const long long count = args.count;
  return queue.submit([&](sycl::handler& h) {
    h.set_args(src, dst, sizes, sizes_are_64bit, count);
    h.parallel_for(sycl::nd_range<1>{sycl::range<1>{global}, sycl::range<1>{local}}, kernel);
  });
}

}  // namespace xsc_sycl
