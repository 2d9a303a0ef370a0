// Argument checks shared by every backend: each error names the argument and the offending value, and all
// of them run before any byte moves.
#pragma once
#include <ATen/core/Tensor.h>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace xsc {

// Error messages are built by plain string concatenation and handed to TORCH_CHECK as one std::string,
// which torch passes through without formatting it. Formatting with an ostream inside the extension
// crashed on one CUDA toolchain image (the ostream code compiled into the extension did not match the C++
// runtime loaded in the process); strings built here never touch an ostream.
namespace message {
inline std::string piece(const char* s) { return s; }
inline std::string piece(const std::string& s) { return s; }
inline std::string piece(c10::ScalarType t) { return c10::toString(t); }
inline std::string piece(const c10::Device& d) { return d.str(); }
template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
std::string piece(T value) {
  return std::to_string(value);
}
}  // namespace message

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string out;
  ((out += message::piece(parts)), ...);
  return out;
}

// TORCH_CHECK with a message built by concat(); the parts are only evaluated when the check fails.
#define XSC_CHECK(cond, ...) TORCH_CHECK(cond, ::xsc::concat(__VA_ARGS__))

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
