// The mamba_spec_decode_postprocess_ / mamba_spec_decode_precopy_ ops: argument checks and the plan every
// backend's xsc::SpecDecodeSource (csrc/core/spec_decode_source.h) reads, built on the host from the state
// pools and block tables.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <vector>

#include "spec_decode_source.h"

namespace xsc {

// One call's source and what it writes besides the states. The source's plan pointer points into `plan`
// (host memory for CPU tensors, the cached device copy otherwise); keep `plan` alive while it runs.
struct SpecDecodeCall {
  at::Tensor plan;
  SpecDecodeSource source;
  int* counts_out;  // the accepted-token counts written (postprocess), else null
  bool copy_rest;   // every row's count written, not only the resets
};

// Checks every argument (naming it and its value) before anything runs; `device_plan`: put the plan on the
// states' device (cached), else keep it on the host.
SpecDecodeCall prepare_postprocess(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups,
                                   at::TensorList block_tables, int64_t block_size, int64_t num_rows,
                                   const at::Tensor& num_accepted, const at::Tensor& state_idx,
                                   const at::Tensor& num_computed, const c10::optional<at::Tensor>& num_scheduled,
                                   const c10::optional<at::Tensor>& num_draft, const at::Tensor& num_accepted_out,
                                   const c10::optional<at::Tensor>& idx_mapping, bool block_table_by_slot,
                                   bool copy_unchanged_counts, bool device_plan);

SpecDecodeCall prepare_precopy(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups,
                               at::TensorList block_tables, int64_t num_rows, const at::Tensor& dst_cols,
                               const at::Tensor& src_cols, const at::Tensor& token_bias,
                               const c10::optional<at::Tensor>& idx_mapping, bool block_table_by_slot,
                               bool device_plan);

// The call on CPU memory: counts, then the copies (each row a memmove), as the kernels do.
void run_spec_decode_native(const SpecDecodeCall& call);

}  // namespace xsc
