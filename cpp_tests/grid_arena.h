// What the grid tests (test_launch_grids.cpp, test_spec_decode_grids.cpp) share: the grids every schedule
// runs over on the SYCL CPU device, and one arena of host memory (the CPU device reads and writes plain host
// memory through raw pointers) holding fresh random bytes beside the bytes a host reference leaves there.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernel_provider_jit.h"
#include "launcher.h"

namespace xsc_grid_test {

inline std::mt19937_64& rng() {
  static std::mt19937_64 r(49);
  return r;
}
inline int64_t pick(int64_t lo, int64_t hi) { return lo + (int64_t)(rng()() % (uint64_t)(hi - lo + 1)); }

// Work-groups per launch: 0 is the launch plan's own grid; then one group, and counts around it, odd ones
// among them, so that every schedule's round-robin over the sub-groups of several groups is exercised.
constexpr size_t kGrids[] = {0, 1, 2, 3, 5, 7};

// With an argument N, the kernels every launch uses are built with N aligned loads per work-item
// (XSC_ALIGNED_LOADS) from a SPIR-V image made here, whatever the device policy gives the CPU device (4):
// how the kernels of GPUs with 64-byte registers (8) run here. Returns false if they were not.
inline bool kernels_with_loads_from(int argc, char** argv, sycl::queue& q) {
  if (argc < 2) return true;
  const std::string option = std::string("-DXSC_ALIGNED_LOADS=") + argv[1];
  xsc_sycl::set_device_images({{0, xsc_sycl::spirv_from_source(q.get_context(), q.get_device(), {option})}}, true);
  xsc_sycl::kernel_launches(q);  // builds them
  const std::vector<xsc_sycl::KernelBuild> builds = xsc_sycl::kernel_builds();
  const bool from_image = builds.size() == 1 && builds[0].input == "spirv-image";
  std::printf("kernels built %s (%s)\n", from_image ? "from the image" : "NOT from the image", option.c_str());
  return from_image;
}

inline std::string grid_name(size_t groups) { return groups ? std::to_string(groups) + " groups" : "plan's grid"; }

struct Arena {
  std::vector<unsigned char> bytes, expect;

  explicit Arena(size_t n) : bytes(n) {
    for (unsigned char& b : bytes) b = (unsigned char)rng()();
    expect = bytes;
  }
  unsigned char* at(int64_t off) { return bytes.data() + off; }
  uint64_t address(int64_t off) { return (uint64_t)(uintptr_t)at(off); }
  int64_t offset(uint64_t address) const { return (int64_t)(address - (uint64_t)(uintptr_t)bytes.data()); }
  // An output: poisoned in the arena and in the reference, so that a byte the kernel should have written
  // and did not differs from the reference.
  void poison(int64_t off, int64_t n) {
    std::memset(bytes.data() + off, 0xA5, (size_t)n);
    std::memset(expect.data() + off, 0xA5, (size_t)n);
  }
  // The reference copy (memmove, for in-place shifts).
  void move(int64_t dst, int64_t src, int64_t n) {
    std::memmove(expect.data() + dst, expect.data() + src, (size_t)n);
  }
  // Every byte against the reference: counts and prints a failure.
  bool check(const std::string& what, int* failures) const {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] != expect[i] && bad++ == 0) first = i;
    if (bad) {
      std::printf("FAIL %s: %zu bytes differ, first at %zu\n", what.c_str(), bad, first);
      ++*failures;
    }
    return bad == 0;
  }
};

}  // namespace xsc_grid_test
