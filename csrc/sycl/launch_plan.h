// How many work-groups of what width a kernel is launched with, from what the device and the compiled
// kernel report: a pure function, so that tests can put any device to it (a 64 KiB one, an unknown one).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace xsc_sycl {

struct KernelFacts {
  const char* name = "";
  size_t max_group = 0;      // kernel_device_specific::work_group_size (the compiled kernel's limit)
  size_t device_max_group = 0;
  size_t sub_group = 16;     // the compiled kernel's sub-group size
  size_t local_bytes = 0;    // local memory the kernel source declares per work-group
  size_t device_local_bytes = 0;  // info::device::local_mem_size
  // The runtime's count of work-groups of the chosen width the device holds at once for this compiled
  // kernel (its registers, its local memory including what the compiler added): kernel_queue_specific::
  // max_num_work_groups. 0: the kernel cannot run at that width; kUnknown: the runtime did not answer.
  static constexpr size_t kUnknown = ~(size_t)0;
  size_t resident_groups = kUnknown;
  // The device's hardware threads (Intel GPU: EUs x hardware threads per EU, ext_intel_gpu_eu_count and
  // ext_intel_gpu_hw_threads_per_eu), 0 where it does not say; and its compute units.
  size_t hw_threads = 0;
  size_t compute_units = 1;
};

struct LaunchPlan {
  size_t local;   // work-items per group
  size_t groups;  // work-groups in the grid
};

// The widest power of two up to `widest` the kernel and the device allow: whole sub-groups (the schedules
// number them as if each were full), and every tile and table sized for `widest` work-items at most.
inline size_t group_width(const KernelFacts& k, size_t widest) {
  size_t limit = k.max_group ? k.max_group : widest;
  if (k.device_max_group && k.device_max_group < limit) limit = k.device_max_group;
  size_t local = widest;
  while (local > limit && local > 1) local /= 2;
  return local;
}

// The grid: one resident grid, every group running from launch to end (the schedules deal units out
// round-robin, so groups beyond what the device holds at once would only wait for a second wave).
//  1. The runtime's own answer for the compiled kernel, where it gives one: the launcher asks only on Level
//     Zero, for on OpenCL SYCL answers 1 or 0 to a query the backend does not support.
//  2. Else, on an Intel GPU, the device's hardware threads / the threads of one group (a SIMD16 thread
//     runs 16 work-items). max_compute_units counts EUs (XVEs) there, not Xe-cores, so compute units times
//     a per-unit factor overshoots several times: a pvc Xe-core has 8 XVEs of 8 threads (128 GRF), which
//     hold 4 groups of 256 work-items (Intel's oneAPI GPU optimization guide, "Xe-HPC"; compute-runtime's
//     hw_info files give the counts per device).
//  3. Else (the OpenCL CPU device): two groups per compute unit. There a compute unit is a worker thread
//     and a work-group runs whole on one; a second group per worker lets one that finished its units take
//     another while a busier core finishes its first.
// A kernel whose local memory the device cannot give, or that the runtime says cannot run at this width,
// is refused with the numbers, before anything is enqueued.
inline LaunchPlan plan_launch(const KernelFacts& k, size_t local) {
  if (k.device_local_bytes && k.local_bytes > k.device_local_bytes)
    throw std::runtime_error("xpu_state_copy: kernel " + std::string(k.name) + " needs " + std::to_string(k.local_bytes) +
                             " bytes of local memory per work-group but the device has " +
                             std::to_string(k.device_local_bytes));
  if (k.resident_groups == 0)
    throw std::runtime_error("xpu_state_copy: the SYCL runtime says kernel " + std::string(k.name) + " cannot run in work-groups of " +
                             std::to_string(local) + " on this device (its registers or local memory, " +
                             std::to_string(k.local_bytes) + " bytes declared, do not fit)");
  size_t groups;
  if (k.resident_groups != KernelFacts::kUnknown) {
    groups = k.resident_groups;
  } else if (k.hw_threads) {
    const size_t threads_per_group = (local + k.sub_group - 1) / k.sub_group;
    groups = k.hw_threads / (threads_per_group ? threads_per_group : 1);
  } else {
    groups = 2 * k.compute_units;
  }
  return LaunchPlan{local, groups ? groups : 1};
}

}  // namespace xsc_sycl
