// copy_states_: the per-state "plan" (addresses, strides and sizes the kernel needs, xsc::PlanField order)
// built on the host from the state tensors, and the checks of the op's arguments.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace xsc {

// What is copied of each state between blocks (the `kinds` argument, by index).
enum StateKind : int64_t {
  kWholeBlock = 0,  // state[dst] = state[src]: temporal / SSM states, block contiguous
  kConvSD = 1,      // [blocks, tokens, dim]: state[dst, :T-shift] = state[src, shift:]
  kConvDS = 2,      // [blocks, dim, tokens]: state[dst, :, :T-shift] = state[src, :, shift:]
};

// A block's element count (all dims but the first), and whether those dims are dense and row-major.
int64_t block_numel(const at::Tensor& s);
bool block_is_contiguous(const at::Tensor& s);

struct CopyStatesShape {
  int64_t states;
  int64_t requests;
  bool ids_are_64bit;
};

// Checks every argument (naming it and its value) before anything runs.
CopyStatesShape check_copy_states_args(at::TensorList states, at::IntArrayRef kinds, const at::Tensor& src_blocks,
                                       const at::Tensor& dst_blocks, const at::Tensor& shifts);

// The plan as a host int64 tensor of plan_words(states) (entry_sources.h).
at::Tensor build_state_plan(at::TensorList states, at::IntArrayRef kinds);

// A host plan (a small contiguous int64 tensor) on `device`, the same tensor for the same bytes: built once
// per distinct plan and kept (a few at most), for every op that sends a plan to its kernel. Each use records
// the current stream, so an evicted plan outlives the kernels queued to read it; a plan used while the
// current stream is captured into a CUDA or XPU graph is never evicted, since the graph reads it at every
// replay. On the CPU: `host` itself.
at::Tensor cached_device_plan(const at::Tensor& host, const at::Device& device);

// The plan on the states' device. Built once per distinct (states, kinds) and kept (a few at most), so the
// hot path neither allocates device memory nor copies to the device after the first call.
at::Tensor device_state_plan(at::TensorList states, at::IntArrayRef kinds);

}  // namespace xsc
