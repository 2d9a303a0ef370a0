// Address tables built in C++ from the tensors themselves, so no address ever passes through a Python int
// (an XPU address has bit 63 set and overflows Python-to-int64 conversion).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstring>
#include <vector>

#include "checks.h"

namespace xsc {
namespace {

at::Tensor host_addresses(const std::vector<at::Tensor>& tensors) {
  at::Tensor host = at::empty({(int64_t)tensors.size()}, at::TensorOptions().dtype(at::kLong));
  int64_t* out = host.data_ptr<int64_t>();
  for (size_t i = 0; i < tensors.size(); ++i) {
    XSC_CHECK(tensors[i].defined(), "tensors[", i, "] is undefined");
    XSC_CHECK(tensors[i].device() == tensors[0].device(), "tensors[", i, "] is on ", tensors[i].device(),
                " but tensors[0] is on ", tensors[0].device());
    const uint64_t address = reinterpret_cast<uintptr_t>(tensors[i].data_ptr());
    std::memcpy(&out[i], &address, sizeof(address));  // keep the bits; int64 is only the carrier
  }
  return host;
}

at::Tensor pointer_table(at::TensorList tensors) {
  std::vector<at::Tensor> list(tensors.begin(), tensors.end());
  at::Tensor host = host_addresses(list);
  const at::Device device = list.empty() ? at::Device(at::kCPU) : list[0].device();
  // uint64 on the tensors' device; the copy moves int64 bits, then the view relabels them.
  return host.to(device).view(at::kUInt64);
}

void write_pointers_(const at::Tensor& table, at::TensorList tensors, int64_t start) {
  check_pointer_table(table, "table");
  const int64_t n = (int64_t)tensors.size();
  XSC_CHECK(start >= 0, "start = ", start, " is negative");
  // Compared as start <= numel - n: start + n overflows int64 for a start near 2**63.
  XSC_CHECK(n <= table.numel() && start <= table.numel() - n, "start = ", start, " with ", n,
            " tensors needs ", (uint64_t)start + (uint64_t)n, " entries but table has ", table.numel());
  if (n == 0) return;
  at::Tensor host = host_addresses(std::vector<at::Tensor>(tensors.begin(), tensors.end()));
  table.view(at::kLong).narrow(0, start, n).copy_(host);
}

}  // namespace
}  // namespace xsc

TORCH_LIBRARY_IMPL(xpu_state_copy, CompositeExplicitAutograd, m) {
  m.impl("pointer_table", &xsc::pointer_table);
  m.impl("write_pointers_", &xsc::write_pointers_);
}
