// The launcher's decision (csrc/sycl/launch_plan.h) for devices we cannot run on here: a 64 KiB-SLM Arc A
// card (dg2), a pvc, a device whose runtime does not answer, and kernels that do not fit. No SYCL needed.
#include <cstdio>
#include <string>

#include "launch_plan.h"

namespace {

using namespace xsc_sycl;

int failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}

// A kernel as IGC builds ours for a GPU: SIMD16, a 1024-wide limit, `local` bytes of local memory.
KernelFacts gpu_kernel(size_t local, size_t device_local, size_t hw_threads) {
  KernelFacts k;
  k.name = "xsc_test_kernel";
  k.max_group = 1024;
  k.device_max_group = 1024;
  k.sub_group = 16;
  k.local_bytes = local;
  k.device_local_bytes = device_local;
  k.hw_threads = hw_threads;
  k.compute_units = hw_threads / 8;
  return k;
}

std::string refusal(const KernelFacts& k, size_t local) {
  try {
    plan_launch(k, local);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

int main() {
  // dg2 (Arc A770: 512 EUs x 8 threads) allows 64 KiB of SLM per work-group. The table kernel's 8 KiB fits;
  // the 69,632 bytes IGC reported for the old spec-decode kernel must be refused, naming both numbers.
  const KernelFacts table = gpu_kernel(8192, 65536, 4096);
  const LaunchPlan p = plan_launch(table, group_width(table, 256));
  expect(p.local == 256, "256 work-items per group on dg2");
  expect(p.groups == 4096 / 16, "dg2: hardware threads / 16 threads per group when the runtime does not answer");
  const std::string big = refusal(gpu_kernel(69632, 65536, 4096), 256);
  expect(big.find("69632") != std::string::npos && big.find("65536") != std::string::npos,
         "a kernel over the device's local memory is refused with both numbers");
  // The runtime's own answer for the compiled kernel wins over the device's numbers ...
  KernelFacts answered = gpu_kernel(8192, 131072, 8192);
  answered.resident_groups = 300;
  expect(plan_launch(answered, 256).groups == 300, "the runtime's resident-group count sizes the grid");
  // ... and its 0 (what IGC added to the kernel's local memory, or its registers, do not fit) is a refusal.
  answered.resident_groups = 0;
  expect(refusal(answered, 256).find("cannot run") != std::string::npos, "a kernel the runtime says cannot run");
  // A kernel compiled for narrower groups, and a device that reports nothing (the OpenCL CPU device).
  KernelFacts narrow = gpu_kernel(0, 65536, 0);
  narrow.max_group = 100;
  expect(group_width(narrow, 256) == 64, "the widest power of two the kernel allows");
  narrow.compute_units = 3;
  expect(plan_launch(narrow, 64).groups == 6, "two groups per compute unit where the device says nothing else");
  std::printf("launch plan: %d failed\n", failures);
  return failures ? 1 : 0;
}
