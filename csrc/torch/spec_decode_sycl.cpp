// The spec-decode copies through the SYCL kernel: on XPU tensors (the current XPU stream's queue,
// asynchronous, the plan cached on the device) and on CPU tensors via the Intel OpenCL CPU device
// (synchronous, as CPU ops are; XPU_STATE_COPY_BACKEND=sycl routes them here).
#include <ATen/ATen.h>
#include <torch/library.h>

#ifdef XSC_WITH_TORCH_XPU
#include <c10/core/DeviceGuard.h>
#include <c10/xpu/XPUStream.h>
#endif

#include "checks.h"
#include "launcher.h"
#include "spec_decode.h"
#include "sycl_ops.h"

namespace xsc {
namespace {

using OptTensor = c10::optional<at::Tensor>;

void run_on(sycl::queue& queue, const SpecDecodeCall& call, bool wait) {
  sycl::event done = xsc_sycl::launch_spec_decode(queue, call.source, call.counts_out, call.copy_rest);
  if (!wait) return;
  try {
    done.wait_and_throw();
  } catch (const sycl::exception& e) {
    XSC_CHECK(false, "SYCL spec-decode copy on the CPU device failed: ", e.what());
  }
}

// The queue for the states' device: the SYCL CPU device for CPU tensors, else the current XPU stream's.
template <class Prepare>
void dispatch(const at::Tensor& first_state, Prepare prepare) {
  if (first_state.device().is_cpu()) {
    run_on(sycl_cpu_queue(), prepare(false), true);
    return;
  }
#ifdef XSC_WITH_TORCH_XPU
  c10::DeviceGuard guard(first_state.device());
  const SpecDecodeCall call = prepare(true);
  run_on(c10::xpu::getCurrentXPUStream(first_state.device().index()).queue(), call, false);
#else
  XSC_CHECK(false, "the SYCL spec-decode path takes CPU or XPU tensors, got states on ", first_state.device());
#endif
}

void sycl_postprocess(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups,
                      at::TensorList block_tables, int64_t block_size, int64_t num_rows,
                      const at::Tensor& num_accepted, const at::Tensor& state_idx, const at::Tensor& num_computed,
                      const OptTensor& num_scheduled, const OptTensor& num_draft, const at::Tensor& num_accepted_out,
                      const OptTensor& idx_mapping, bool by_slot, bool copy_rest) {
  XSC_CHECK(!states.empty(), "states is empty");
  dispatch(states[0], [&](bool on_device) {
    return prepare_postprocess(states, kinds, groups, block_tables, block_size, num_rows, num_accepted, state_idx,
                               num_computed, num_scheduled, num_draft, num_accepted_out, idx_mapping, by_slot,
                               copy_rest, on_device);
  });
}

void sycl_precopy(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups, at::TensorList block_tables,
                  int64_t num_rows, const at::Tensor& dst_cols, const at::Tensor& src_cols,
                  const at::Tensor& token_bias, const OptTensor& idx_mapping, bool by_slot) {
  XSC_CHECK(!states.empty(), "states is empty");
  dispatch(states[0], [&](bool on_device) {
    return prepare_precopy(states, kinds, groups, block_tables, num_rows, dst_cols, src_cols, token_bias,
                           idx_mapping, by_slot, on_device);
  });
}

}  // namespace
}  // namespace xsc

TORCH_LIBRARY_IMPL(xpu_state_copy, CPU, m) {
  m.impl("_sycl_mamba_spec_decode_postprocess_", &xsc::sycl_postprocess);
  m.impl("_sycl_mamba_spec_decode_precopy_", &xsc::sycl_precopy);
}

#ifdef XSC_WITH_TORCH_XPU
TORCH_LIBRARY_IMPL(xpu_state_copy, XPU, m) {
  m.impl("mamba_spec_decode_postprocess_", &xsc::sycl_postprocess);
  m.impl("mamba_spec_decode_precopy_", &xsc::sycl_precopy);
}
#endif
