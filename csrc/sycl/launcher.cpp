#include "launcher.h"

#include "batch_schedule.h"  // small_batch_fits, direct_units: which build a batch takes

#include <algorithm>
#include <mutex>
#include <vector>

namespace xsc_sycl {
namespace {

// A kernel with its launch geometry, worked out once: device queries stay off the per-call path.
struct Launchable {
  sycl::kernel kernel;
  size_t local;   // work-items per group
  size_t global;  // work-items in all (resident groups x local)
};

// A kernel's builds (launcher.h's Kernels; `direct` is `tiles` for a kernel with no direct build), and what
// picks one for a batch: the sub-groups of the small and the tile builds' grids and their size, as the
// device reports them for the small build.
struct KernelPair {
  Launchable tiles, small, direct;
  int64_t sg_size, subgroups, tile_subgroups;

  Launchable for_batch(int64_t entries) const {
    if (xsc::small_batch_fits(entries, sg_size, subgroups)) return small;
    return xsc::direct_units(entries, tile_subgroups) > 1 ? direct : tiles;
  }
};

struct CachedKernels {
  sycl::context context;
  sycl::device device;
  KernelPair batch_memcpy;
  KernelPair copy_states;
  KernelPair spec_decode;
  Launchable spec_decode_global;
  bool spec_local_fits;  // the device's local memory holds the records builds' arrays
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

// Groups per compute unit: enough resident work to hide memory latency without oversubscribing.
size_t launch_groups(const sycl::device& device) {
  size_t units = device.get_info<sycl::info::device::max_compute_units>();
  size_t per_unit = device.is_gpu() ? 2 : 4;
  return std::max<size_t>(1, units * per_unit);
}

size_t launch_group_size(const sycl::device& device, const sycl::kernel& kernel) {
  size_t limit = kernel.get_info<sycl::info::kernel_device_specific::work_group_size>(device);
  limit = std::min(limit, device.get_info<sycl::info::device::max_work_group_size>());
  // The kernel's local arrays are sized for at most kMaxGroupSize work-items. A power of two also keeps
  // every sub-group whole, which small_batch.h needs (it numbers sub-groups as if each were full).
  size_t size = xsc::kMaxGroupSize;
  while (size > limit) size /= 2;
  return std::max<size_t>(size, 1);
}

Launchable launchable(const sycl::device& device, const sycl::kernel& kernel) {
  const size_t local = launch_group_size(device, kernel);
  return Launchable{kernel, local, local * launch_groups(device)};
}

KernelPair kernel_pair(const sycl::device& device, const sycl::kernel& tiles, const sycl::kernel& small,
                       const sycl::kernel& direct) {
  KernelPair p{launchable(device, tiles), launchable(device, small), launchable(device, direct), 1, 0, 0};
  p.sg_size = std::max<int64_t>(1, small.get_info<sycl::info::kernel_device_specific::max_sub_group_size>(device));
  const auto subgroups = [&](const Launchable& l) {
    return (int64_t)(l.global / std::max<size_t>(1, std::min<size_t>(l.local, (size_t)p.sg_size)));
  };
  p.subgroups = subgroups(p.small);
  // The direct build decides on the device again from its own grid, so a wrong guess costs speed, not bytes.
  p.tile_subgroups = subgroups(p.direct);
  return p;
}

// Whether the spec-decode records builds fit the device's local memory: their records and plan
// (kSpecLocalBytes) beside the tile table that every build holds (kMaxTableBytes).
bool spec_local_fits(const sycl::device& device) {
  return device.get_info<sycl::info::device::local_mem_size>() >=
         (uint64_t)xsc::kMaxTableBytes + (uint64_t)xsc::kSpecLocalBytes;
}

// The queue's kernels, compiled (sycl-jit) or looked up (sycl-aot) at most once per context and device.
CachedKernels prepared_for(const sycl::queue& queue) {
  const sycl::context context = queue.get_context();
  const sycl::device device = queue.get_device();
  // Held across the build: concurrent first calls wait for the one build instead of racing it.
  std::lock_guard<std::mutex> lock(cache_mutex());
  for (const CachedKernels& c : cache())
    if (c.context == context && c.device == device) return c;
  const Kernels k = build_kernels(context, device);
  cache().push_back(CachedKernels{context, device,
                                  kernel_pair(device, k.batch_memcpy, k.batch_memcpy_small, k.batch_memcpy_direct),
                                  kernel_pair(device, k.copy_states, k.copy_states_small, k.copy_states),
                                  kernel_pair(device, k.spec_decode, k.spec_decode_small, k.spec_decode),
                                  launchable(device, k.spec_decode_global), spec_local_fits(device)});
  return cache().back();
}

// One nd_range launch over the device's resident groups, with `args` as the kernel's parameters.
template <class... Args>
sycl::event launch(sycl::queue& queue, const Launchable& l, Args... args) {
  return queue.submit([&](sycl::handler& h) {
    h.set_args(args...);
    h.parallel_for(sycl::nd_range<1>{sycl::range<1>{l.global}, sycl::range<1>{l.local}}, l.kernel);
  });
}

}  // namespace

void prepare_kernels(const sycl::queue& queue) { prepared_for(queue); }

// Argument types below match the kernels' parameters exactly: set_args copies them by value.
sycl::event launch_batch_memcpy(sycl::queue& queue, const BatchMemcpyArgs& a) {
  if (a.count == 0) return sycl::event();
  const Launchable kernel = prepared_for(queue).batch_memcpy.for_batch(a.count);
  return launch(queue, kernel, reinterpret_cast<const unsigned long long*>(a.src_ptrs),
                reinterpret_cast<const unsigned long long*>(a.dst_ptrs), a.sizes, a.sizes_are_64bit ? 1 : 0,
                (long long)a.count);
}

sycl::event launch_copy_states(sycl::queue& queue, const CopyStatesArgs& a) {
  if (a.states == 0 || a.requests == 0) return sycl::event();
  const Launchable kernel = prepared_for(queue).copy_states.for_batch(a.states * a.requests);
  return launch(queue, kernel, reinterpret_cast<const long long*>(a.plan), (long long)a.states, a.src_blocks,
                a.dst_blocks, a.shifts, a.ids_are_64bit ? 1 : 0, (long long)a.requests);
}

sycl::event launch_spec_decode(sycl::queue& queue, const xsc::SpecDecodeSource& source, int* counts_out,
                               bool copy_rest, const std::function<unsigned*()>& claim_counter) {
  if (source.rows == 0 || source.states == 0) return sycl::event();
  const CachedKernels k = prepared_for(queue);
  const bool local = k.spec_local_fits && source.records_fit();
  const Launchable kernel = local ? k.spec_decode.for_batch(source.count()) : k.spec_decode_global;
  xsc::SpecDecodeSource launched = source;
  bool recording = false;
#ifdef SYCL_EXT_ONEAPI_GRAPH
  recording = queue.ext_oneapi_get_state() == sycl::ext::oneapi::experimental::queue_state::recording;
#endif
  if (local && !recording) launched.claims = claim_counter();
  return launch(queue, kernel, launched, counts_out, copy_rest ? 1 : 0);
}

}  // namespace xsc_sycl
