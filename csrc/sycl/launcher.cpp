#include "launcher.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "schedule.h"  // kMaxGroupSize, kTableEntries: the work-group width and table the kernels are built for

namespace xsc_sycl {
namespace {

namespace syclexp = sycl::ext::oneapi::experimental;

// A kernel with its launch geometry, worked out once: device queries stay off the per-call path.
struct Launchable {
  sycl::kernel kernel;
  KernelFacts facts;
  LaunchPlan plan;
};

struct CachedKernels {
  sycl::context context;
  sycl::device device;
  Launchable batch_memcpy, copy_states, spec_decode;
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}

// Never destroyed: SYCL objects released after the SYCL runtime's own shutdown crash the process at exit.
std::vector<CachedKernels>& cache() {
  static auto* c = new std::vector<CachedKernels>();
  return *c;
}

// The device's hardware threads where it reports them (Intel GPUs), else 0.
size_t hardware_threads(const sycl::device& device) {
  if (!device.is_gpu() || !device.has(sycl::aspect::ext_intel_gpu_eu_count) ||
      !device.has(sycl::aspect::ext_intel_gpu_hw_threads_per_eu))
    return 0;
  return (size_t)device.get_info<sycl::ext::intel::info::device::gpu_eu_count>() *
         (size_t)device.get_info<sycl::ext::intel::info::device::gpu_hw_threads_per_eu>();
}

// What the device and the compiled kernel report, and the launch they give. `local_bytes`: the local memory
// the kernel source declares (the runtime's resident-group count covers what the compiler adds to it).
Launchable launchable(const sycl::queue& queue, const sycl::kernel& kernel, const char* name, size_t local_bytes) {
  const sycl::device device = queue.get_device();
  KernelFacts f;
  f.name = name;
  f.max_group = kernel.get_info<sycl::info::kernel_device_specific::work_group_size>(device);
  f.device_max_group = device.get_info<sycl::info::device::max_work_group_size>();
  f.sub_group = std::max<size_t>(1, kernel.get_info<sycl::info::kernel_device_specific::max_sub_group_size>(device));
  f.local_bytes = local_bytes;
  f.device_local_bytes = device.get_info<sycl::info::device::local_mem_size>();
  f.hw_threads = hardware_threads(device);
  f.compute_units = device.get_info<sycl::info::device::max_compute_units>();
  const size_t local = group_width(f, xsc::kMaxGroupSize);
  // Only Level Zero answers the resident-group query. On OpenCL the unified runtime reports it unsupported
  // and SYCL returns 1 or 0 instead of throwing (intel-sycl-rt 2026.2 on the OpenCL CPU device: 1 for every
  // kernel, which launched one work-group), so there the device's numbers decide.
  if (queue.get_backend() == sycl::backend::ext_oneapi_level_zero) {
    try {
      f.resident_groups = kernel.ext_oneapi_get_info<syclexp::info::kernel_queue_specific::max_num_work_groups>(
          queue, sycl::range<1>{local}, 0);
    } catch (const sycl::exception&) {
      f.resident_groups = KernelFacts::kUnknown;
    }
  }
  return Launchable{kernel, f, plan_launch(f, local)};
}

// The queue's kernels, compiled (sycl-jit) or looked up (sycl-aot) at most once per context and device; a
// copy (kernels are handles), so that no caller holds a reference into the growing cache.
CachedKernels prepared(const sycl::queue& queue) {
  const sycl::context context = queue.get_context();
  const sycl::device device = queue.get_device();
  // Held across the build: concurrent first calls wait for the one build instead of racing it.
  std::lock_guard<std::mutex> lock(cache_mutex());
  for (const CachedKernels& c : cache())
    if (c.context == context && c.device == device) return c;
  const Kernels k = build_kernels(context, device);
  cache().push_back(CachedKernels{
      context, device,
      launchable(queue, k.batch_memcpy, "xsc_batch_memcpy", xsc::kTableEntries * sizeof(xsc::u32)),
      launchable(queue, k.copy_states, "xsc_copy_states", 0), launchable(queue, k.spec_decode, "xsc_spec_decode", 0)});
  return cache().back();
}

// One nd_range launch of `groups` work-groups (0: the plan's resident grid), with `args` as the kernel's
// parameters.
template <class... Args>
sycl::event launch(sycl::queue& queue, const Launchable& l, size_t groups, Args... args) {
  const size_t global = (groups ? groups : l.plan.groups) * l.plan.local;
  return queue.submit([&](sycl::handler& h) {
    h.set_args(args...);
    h.parallel_for(sycl::nd_range<1>{sycl::range<1>{global}, sycl::range<1>{l.plan.local}}, l.kernel);
  });
}

}  // namespace

void prepare_kernels(const sycl::queue& queue) { prepared(queue); }

std::vector<KernelLaunch> kernel_launches(const sycl::queue& queue) {
  const CachedKernels k = prepared(queue);
  std::vector<KernelLaunch> out;
  for (const Launchable* l : {&k.batch_memcpy, &k.copy_states, &k.spec_decode})
    out.push_back(KernelLaunch{l->facts.name, l->facts, l->plan});
  return out;
}

namespace {

// Argument types below match the kernels' parameters exactly: set_args copies them by value.
sycl::event batch_memcpy_over(sycl::queue& queue, const BatchMemcpyArgs& a, size_t groups) {
  if (a.count == 0) return sycl::event();
  return launch(queue, prepared(queue).batch_memcpy, groups, reinterpret_cast<const unsigned long long*>(a.src_ptrs),
                reinterpret_cast<const unsigned long long*>(a.dst_ptrs), a.sizes, a.sizes_are_64bit ? 1 : 0,
                (long long)a.count);
}

sycl::event copy_states_over(sycl::queue& queue, const CopyStatesArgs& a, size_t groups) {
  if (a.states == 0 || a.requests == 0) return sycl::event();
  return launch(queue, prepared(queue).copy_states, groups, reinterpret_cast<const long long*>(a.plan),
                (long long)a.states, a.src_blocks, a.dst_blocks, a.shifts, a.ids_are_64bit ? 1 : 0,
                (long long)a.requests);
}

sycl::event spec_decode_over(sycl::queue& queue, const xsc::SpecDecodeSource& source, int* counts_out,
                             bool copy_rest, size_t groups) {
  if (source.rows == 0 || source.states == 0) return sycl::event();
  return launch(queue, prepared(queue).spec_decode, groups, source, counts_out, copy_rest ? 1 : 0);
}

}  // namespace

sycl::event launch_batch_memcpy(sycl::queue& queue, const BatchMemcpyArgs& a) { return batch_memcpy_over(queue, a, 0); }

sycl::event launch_copy_states(sycl::queue& queue, const CopyStatesArgs& a) { return copy_states_over(queue, a, 0); }

sycl::event launch_spec_decode(sycl::queue& queue, const xsc::SpecDecodeSource& source, int* counts_out,
                               bool copy_rest) {
  return spec_decode_over(queue, source, counts_out, copy_rest, 0);
}

namespace testing {

sycl::event launch_batch_memcpy(sycl::queue& queue, const BatchMemcpyArgs& a, size_t groups) {
  return batch_memcpy_over(queue, a, groups);
}

sycl::event launch_copy_states(sycl::queue& queue, const CopyStatesArgs& a, size_t groups) {
  return copy_states_over(queue, a, groups);
}

sycl::event launch_spec_decode(sycl::queue& queue, const xsc::SpecDecodeSource& source, int* counts_out,
                               bool copy_rest, size_t groups) {
  return spec_decode_over(queue, source, counts_out, copy_rest, groups);
}

}  // namespace testing

}  // namespace xsc_sycl
