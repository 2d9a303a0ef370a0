// The op schemas, defined once. Each backend registers its own implementation of them
// (cpu_ops.cpp, sycl_ops.cpp, cuda/batch_memcpy_cuda.cu); fake implementations live in Python (ops.py).
#include <torch/library.h>

TORCH_LIBRARY(xpu_state_copy, m) {
  // dst_ptrs is marked written: the bytes it points to change, and torch.compile must not drop the call.
  m.def("batch_memcpy(Tensor src_ptrs, Tensor(a!) dst_ptrs, Tensor sizes) -> ()");
  // The SYCL kernel on CPU tensors (the Intel OpenCL CPU device); batch_memcpy routes here when
  // XPU_STATE_COPY_BACKEND=sycl. Registered by the SYCL module when it loads.
  m.def("_sycl_batch_memcpy(Tensor src_ptrs, Tensor(a!) dst_ptrs, Tensor sizes) -> ()");
  // Block-to-block copies of whole state pools, every address computed in C++/kernel code; see
  // python/xpu_state_copy/ops.py (copy_states_) for the meaning of kinds, blocks and shifts.
  m.def("copy_states_(Tensor(a!)[] states, int[] kinds, Tensor src_blocks, Tensor dst_blocks, Tensor shifts) -> ()");
  m.def("_sycl_copy_states_(Tensor(a!)[] states, int[] kinds, Tensor src_blocks, Tensor dst_blocks, Tensor shifts) -> ()");
  // Speculative-decoding state copies, decided on the device per (request, state) from block tables and token
  // counts; see python/xpu_state_copy/ops.py (mamba_spec_decode_postprocess_ / _precopy_). The pools and
  // the accepted-token output are written.
#define XSC_SPEC_POSTPROCESS_ARGS                                                                       \
  "(Tensor(a!)[] states, int[] kinds, int[] groups, Tensor[] block_tables, int block_size, int num_rows, " \
  "Tensor num_accepted, Tensor state_idx, Tensor num_computed, Tensor? num_scheduled, Tensor? num_draft, " \
  "Tensor(b!) num_accepted_out, Tensor? idx_mapping=None, bool block_table_by_slot=False, "                 \
  "bool copy_unchanged_counts=True) -> ()"
#define XSC_SPEC_PRECOPY_ARGS                                                                           \
  "(Tensor(a!)[] states, int[] kinds, int[] groups, Tensor[] block_tables, int num_rows, Tensor dst_cols, " \
  "Tensor src_cols, Tensor token_bias, Tensor? idx_mapping=None, bool block_table_by_slot=False) -> ()"
  m.def("mamba_spec_decode_postprocess_" XSC_SPEC_POSTPROCESS_ARGS);
  m.def("_sycl_mamba_spec_decode_postprocess_" XSC_SPEC_POSTPROCESS_ARGS);
  m.def("mamba_spec_decode_precopy_" XSC_SPEC_PRECOPY_ARGS);
  m.def("_sycl_mamba_spec_decode_precopy_" XSC_SPEC_PRECOPY_ARGS);
  m.def("pointer_table(Tensor[] tensors) -> Tensor");
  m.def("write_pointers_(Tensor(a!) table, Tensor[] tensors, int start=0) -> ()");
}
