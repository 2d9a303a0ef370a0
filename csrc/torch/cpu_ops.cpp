// batch_memcpy and copy_states_ on CPU tensors: native memmove per span by default, or the SYCL kernels on
// the Intel OpenCL CPU device when XPU_STATE_COPY_BACKEND=sycl (never a silent fallback).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "checks.h"
#include "native_copy.h"
#include "cpu_backend.h"
#include "state_plan.h"

namespace xsc {

CpuBackend cpu_backend_choice() {
  const char* env = std::getenv("XPU_STATE_COPY_BACKEND");
  const std::string choice = env ? env : "";
  if (choice.empty() || choice == "auto" || choice == "cpu") return CpuBackend::Native;
  if (choice == "sycl") return CpuBackend::Sycl;
  XSC_CHECK(false, "XPU_STATE_COPY_BACKEND='", choice, "' is not one of: auto, cpu, sycl");
}

c10::OperatorHandle sycl_cpu_op(const char* name) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
  XSC_CHECK(op.hasKernelForDispatchKey(c10::DispatchKey::CPU),
              "XPU_STATE_COPY_BACKEND=sycl, but the SYCL backend is not loaded: "
              "xpu_state_copy.sycl_status() says why (usually: pip install intel-sycl-rt intel-opencl-rt, "
              "then rebuild xpu_state_copy so its SYCL module is built)");
  return op;
}

namespace {

void native_batch_memcpy(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs, const at::Tensor& sizes,
                         const BatchMemcpyShape& shape) {
  native_run_table(xsc::PointerTableSource{reinterpret_cast<const xsc::u64*>(src_ptrs.data_ptr()),
                                     reinterpret_cast<const xsc::u64*>(dst_ptrs.data_ptr()), sizes.data_ptr(),
                                     shape.sizes_are_64bit ? 1 : 0, shape.count});
}

void native_copy_states(at::TensorList states, at::IntArrayRef kinds, const at::Tensor& src_blocks,
                        const at::Tensor& dst_blocks, const at::Tensor& shifts, const CopyStatesShape& shape) {
  const at::Tensor plan = build_state_plan(states, kinds);
  native_run_rows(xsc::StatePlanSource{reinterpret_cast<const xsc::i64*>(plan.data_ptr<int64_t>()), shape.states,
                                  src_blocks.data_ptr(), dst_blocks.data_ptr(), shifts.data_ptr(),
                                  shape.ids_are_64bit ? 1 : 0, shape.requests});
}

void cpu_batch_memcpy(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs, const at::Tensor& sizes) {
  const BatchMemcpyShape shape = check_batch_memcpy_args(src_ptrs, dst_ptrs, sizes);
  if (cpu_backend_choice() == CpuBackend::Native) {
    native_batch_memcpy(src_ptrs, dst_ptrs, sizes, shape);
    return;
  }
  sycl_cpu_op("xpu_state_copy::_sycl_batch_memcpy")
      .typed<void(const at::Tensor&, const at::Tensor&, const at::Tensor&)>()
      .call(src_ptrs, dst_ptrs, sizes);
}

void cpu_copy_states(at::TensorList states, at::IntArrayRef kinds, const at::Tensor& src_blocks,
                     const at::Tensor& dst_blocks, const at::Tensor& shifts) {
  const CopyStatesShape shape = check_copy_states_args(states, kinds, src_blocks, dst_blocks, shifts);
  if (cpu_backend_choice() == CpuBackend::Native) {
    native_copy_states(states, kinds, src_blocks, dst_blocks, shifts, shape);
    return;
  }
  sycl_cpu_op("xpu_state_copy::_sycl_copy_states_")
      .typed<void(at::TensorList, at::IntArrayRef, const at::Tensor&, const at::Tensor&, const at::Tensor&)>()
      .call(states, kinds, src_blocks, dst_blocks, shifts);
}

}  // namespace
}  // namespace xsc

TORCH_LIBRARY_IMPL(xpu_state_copy, CPU, m) {
  m.impl("batch_memcpy", &xsc::cpu_batch_memcpy);
  m.impl("copy_states_", &xsc::cpu_copy_states);
}
