// Torch-free launcher of the copy kernels on a sycl::queue. The torch op layer and the C++ tests call it.
#pragma once
#include <sycl/sycl.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "launch_plan.h"
#include "spec_decode_source.h"

namespace xsc_sycl {

struct BatchMemcpyArgs {
  const uint64_t* src_ptrs;  // device-visible table of source addresses
  const uint64_t* dst_ptrs;  // device-visible table of destination addresses
  const void* sizes;         // device-visible int32 or int64 byte counts
  bool sizes_are_64bit;
  int64_t count;
};

// The copy_states_ op: see xsc::StatePlanSource in entry_sources.h.
struct CopyStatesArgs {
  const int64_t* plan;  // device-visible, xsc::plan_words(states) words
  int64_t states;
  const void* src_blocks;  // device-visible int32 or int64 per request
  const void* dst_blocks;
  const void* shifts;
  bool ids_are_64bit;
  int64_t requests;
};

// Each enqueues one launch for the whole batch on `queue` and returns its event; no host synchronization.
// An empty batch enqueues nothing and returns a default (complete) event. The kernels are compiled
// (sycl-jit) or looked up (sycl-aot) at most once per process, context and device, whichever thread asks
// first; later calls reuse them and their launch geometry.
sycl::event launch_batch_memcpy(sycl::queue& queue, const BatchMemcpyArgs& args);
sycl::event launch_copy_states(sycl::queue& queue, const CopyStatesArgs& args);
// The spec-decode copies: the source's pointers (plan, counts, tables) device-visible; `counts_out` the
// accepted-token counts it writes (null for a precopy).
sycl::event launch_spec_decode(sycl::queue& queue, const xsc::SpecDecodeSource& source, int* counts_out,
                               bool copy_rest);

// Builds (or looks up) the queue's kernels and works out their launches now, as a first copy would: a
// worker calls it while it loads its model, so that its first request does not wait for the compiler.
void prepare_kernels(const sycl::queue& queue);

// One kernel per op.
struct Kernels {
  sycl::kernel batch_memcpy, copy_states, spec_decode;
};

// What the launcher decided for each kernel on the queue's device (doctor and the tests read it).
struct KernelLaunch {
  std::string name;
  KernelFacts facts;
  LaunchPlan plan;
};
std::vector<KernelLaunch> kernel_launches(const sycl::queue& queue);

// For the C++ tests only (cpp_tests/test_launch_grids.cpp): the launches above over `groups` work-groups of
// the plan's width instead of the plan's grid, so that every schedule runs over grids the device here would
// not pick (one group, odd counts). No product code calls them; the grid is the launch plan's alone.
namespace testing {
sycl::event launch_batch_memcpy(sycl::queue& queue, const BatchMemcpyArgs& args, size_t groups);
sycl::event launch_copy_states(sycl::queue& queue, const CopyStatesArgs& args, size_t groups);
sycl::event launch_spec_decode(sycl::queue& queue, const xsc::SpecDecodeSource& source, int* counts_out,
                               bool copy_rest, size_t groups);
}  // namespace testing

// "sycl-aot" or "sycl-jit": how this library obtains its kernels.
const char* kernel_origin();

// Implemented by kernel_provider_{jit,aot}.
Kernels build_kernels(const sycl::context& context, sycl::device device);

}  // namespace xsc_sycl
