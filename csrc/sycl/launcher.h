// Torch-free launcher of the batched copy on a sycl::queue. The torch op layer and the C++ tests call it.
#pragma once
#include <sycl/sycl.hpp>

#include <cstdint>
#include <functional>
#include <string>

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
// accepted-token counts it writes (null for a precopy). `claim_counter` gives the launch its claim counter
// (SpecDecodeSource::claims), asked only when the launch uses one: the records build, on a queue that is
// not recording a graph (a recorded launch would replay it).
sycl::event launch_spec_decode(sycl::queue& queue, const xsc::SpecDecodeSource& source, int* counts_out,
                               bool copy_rest, const std::function<unsigned*()>& claim_counter);

// Compiles (sycl-jit) or looks up (sycl-aot) the queue's kernels now, as its first launch would, so that
// launch finds them ready; a no-op once they are. A failed build throws and leaves nothing behind: the next
// call or launch builds again.
void prepare_kernels(const sycl::queue& queue);

// Each kernel in its two builds: the tile schedule alone, and `_small` for small batches (small_batch.h);
// batch_memcpy also with the direct pass (`_direct`, batch_schedule.h's direct_units).
struct Kernels {
  sycl::kernel batch_memcpy, batch_memcpy_small, batch_memcpy_direct;
  sycl::kernel copy_states, copy_states_small;
  sycl::kernel spec_decode, spec_decode_small;
  sycl::kernel spec_decode_global;  // the tile build reading every span from global memory (many rows)
};

// "sycl-aot" or "sycl-jit": how this library obtains its kernels.
const char* kernel_origin();

// Implemented by kernel_provider_{jit,aot}.
Kernels build_kernels(const sycl::context& context, sycl::device device);

}  // namespace xsc_sycl
