// Argument checks shared by every backend: each error names the argument and the offending value, and all
// of them run before any byte moves.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace xsc {

// Numbers and devices in error messages are turned into strings here, never streamed with operator<<:
// streamed integers crashed inside the extension on one CUDA toolchain image (the ostream code compiled
// into the extension did not match the C++ runtime loaded in the process), while strings were fine.
template <class T>
std::string num(T value) {
  return std::to_string(value);
}
inline std::string dev(const c10::Device& device) { return device.str(); }

struct BatchMemcpyShape {
  int64_t count;
  bool sizes_are_64bit;
};

// src_ptrs/dst_ptrs: 1-D contiguous uint64 or int64 (same bits); sizes: 1-D contiguous int32 or int64;
// equal lengths; one device. Sizes held on the CPU are also checked to be non-negative (sizes on an
// accelerator are not read back: that would synchronize; the kernel copies nothing for a negative size).
BatchMemcpyShape check_batch_memcpy_args(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs,
                                         const at::Tensor& sizes);

// A 1-D contiguous table of 64-bit addresses (uint64 or int64).
void check_pointer_table(const at::Tensor& table, const char* name);

}  // namespace xsc
