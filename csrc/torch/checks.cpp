#include "checks.h"

#include <c10/util/Exception.h>

#include <cstring>
#include <string>

#include "entry_sources.h"

namespace xsc {
namespace {

// "[3, 1]": shapes and strides spelled out here rather than streamed, the same on every torch version.
std::string list_str(c10::IntArrayRef values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return out + "]";
}

// "0xffffd556b6400000": addresses in hex, as validate mode and the docs write them.
std::string hex_str(uint64_t value) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[value & 15]);
    value >>= 4;
  } while (value != 0);
  return "0x" + out;
}

// Tables on the CPU hold addresses of CPU memory that the copy dereferences right away: reading them back
// costs nothing next to the copy, so a null address (with bytes to copy) or a range that wraps past 2**64,
// which would crash the process or write anywhere, is refused here.
void check_host_addresses(const at::Tensor& table, const char* name, int64_t i, int64_t bytes) {
  uint64_t address;
  std::memcpy(&address, static_cast<const char*>(table.data_ptr()) + i * 8, 8);
  XSC_CHECK(address != 0, name, "[", i, "] is a null address with sizes[", i, "] = ", bytes);
  XSC_CHECK(!xsc::range_wraps(address, bytes), name, "[", i, "] = ", hex_str(address), " + ", bytes,
            " bytes wraps past 2**64");
}

void check_vector(const at::Tensor& t, const char* name) {
  XSC_CHECK(t.defined(), name, " is undefined");
  XSC_CHECK(t.dim() == 1, name, " must be 1-D, got shape ", list_str(t.sizes()));
  XSC_CHECK(t.is_contiguous(), name, " must be contiguous, got stride ", list_str(t.strides()), " for shape ",
              list_str(t.sizes()));
}

}  // namespace

void check_pointer_table(const at::Tensor& table, const char* name) {
  check_vector(table, name);
  const auto dt = table.scalar_type();
  XSC_CHECK(dt == at::kUInt64 || dt == at::kLong, name, " must be torch.uint64 or torch.int64, got ", dt);
}

BatchMemcpyShape check_batch_memcpy_args(const at::Tensor& src_ptrs, const at::Tensor& dst_ptrs,
                                         const at::Tensor& sizes) {
  check_pointer_table(src_ptrs, "src_ptrs");
  check_pointer_table(dst_ptrs, "dst_ptrs");
  check_vector(sizes, "sizes");
  const auto st = sizes.scalar_type();
  XSC_CHECK(st == at::kInt || st == at::kLong, "sizes must be torch.int32 or torch.int64, got ", st);
  const int64_t n = src_ptrs.numel();
  XSC_CHECK(dst_ptrs.numel() == n, "dst_ptrs has ", dst_ptrs.numel(), " entries but src_ptrs has ", n);
  XSC_CHECK(sizes.numel() == n, "sizes has ", sizes.numel(), " entries but src_ptrs has ", n);
  XSC_CHECK(dst_ptrs.device() == src_ptrs.device(), "dst_ptrs is on ", dst_ptrs.device(),
              " but src_ptrs is on ", src_ptrs.device(), "; all three must be on the device whose memory ",
              "the addresses point into");
  XSC_CHECK(sizes.device() == src_ptrs.device(), "sizes is on ", sizes.device(), " but src_ptrs is on ",
              src_ptrs.device(), "; all three must be on the device whose memory the addresses point into");
  if (sizes.device().is_cpu()) {
    for (int64_t i = 0; i < n; ++i) {
      const int64_t b = st == at::kLong ? sizes.data_ptr<int64_t>()[i] : sizes.data_ptr<int32_t>()[i];
      XSC_CHECK(b >= 0, "sizes[", i, "] = ", b, " is negative");
      if (b == 0) continue;  // nothing is dereferenced
      check_host_addresses(src_ptrs, "src_ptrs", i, b);
      check_host_addresses(dst_ptrs, "dst_ptrs", i, b);
    }
  }
  return BatchMemcpyShape{n, st == at::kLong};
}

}  // namespace xsc
