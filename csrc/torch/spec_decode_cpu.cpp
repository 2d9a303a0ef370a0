// The spec-decode copies on CPU tensors: native by default, or the SYCL kernel on the Intel OpenCL CPU device
// when XPU_STATE_COPY_BACKEND=sycl (the same choice as batch_memcpy; never a silent fallback).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "checks.h"
#include "cpu_backend.h"
#include "spec_decode.h"

namespace xsc {
namespace {

using OptTensor = c10::optional<at::Tensor>;

void cpu_postprocess(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups,
                     at::TensorList block_tables, int64_t block_size, int64_t num_rows,
                     const at::Tensor& num_accepted, const at::Tensor& state_idx, const at::Tensor& num_computed,
                     const OptTensor& num_scheduled, const OptTensor& num_draft, const at::Tensor& num_accepted_out,
                     const OptTensor& idx_mapping, bool by_slot, bool copy_rest) {
  const SpecDecodeCall call = prepare_postprocess(states, kinds, groups, block_tables, block_size, num_rows,
                                                  num_accepted, state_idx, num_computed, num_scheduled, num_draft,
                                                  num_accepted_out, idx_mapping, by_slot, copy_rest, false);
  if (cpu_backend_choice() == CpuBackend::Native) {
    run_spec_decode_native(call);
    return;
  }
  sycl_cpu_op("xpu_state_copy::_sycl_mamba_spec_decode_postprocess_")
      .typed<void(at::TensorList, at::IntArrayRef, at::IntArrayRef, at::TensorList, int64_t, int64_t,
                  const at::Tensor&, const at::Tensor&, const at::Tensor&, const OptTensor&, const OptTensor&,
                  const at::Tensor&, const OptTensor&, bool, bool)>()
      .call(states, kinds, groups, block_tables, block_size, num_rows, num_accepted, state_idx, num_computed,
            num_scheduled, num_draft, num_accepted_out, idx_mapping, by_slot, copy_rest);
}

void cpu_precopy(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups, at::TensorList block_tables,
                 int64_t num_rows, const at::Tensor& dst_cols, const at::Tensor& src_cols,
                 const at::Tensor& token_bias, const OptTensor& idx_mapping, bool by_slot) {
  const SpecDecodeCall call = prepare_precopy(states, kinds, groups, block_tables, num_rows, dst_cols, src_cols,
                                              token_bias, idx_mapping, by_slot, false);
  if (cpu_backend_choice() == CpuBackend::Native) {
    run_spec_decode_native(call);
    return;
  }
  sycl_cpu_op("xpu_state_copy::_sycl_mamba_spec_decode_precopy_")
      .typed<void(at::TensorList, at::IntArrayRef, at::IntArrayRef, at::TensorList, int64_t, const at::Tensor&,
                  const at::Tensor&, const at::Tensor&, const OptTensor&, bool)>()
      .call(states, kinds, groups, block_tables, num_rows, dst_cols, src_cols, token_bias, idx_mapping, by_slot);
}

}  // namespace
}  // namespace xsc

TORCH_LIBRARY_IMPL(xpu_state_copy, CPU, m) {
  m.impl("mamba_spec_decode_postprocess_", &xsc::cpu_postprocess);
  m.impl("mamba_spec_decode_precopy_", &xsc::cpu_precopy);
}
