// The Python module _sycl_jit: importing it registers the SYCL implementations (sycl_ops.cpp). Its
// functions report what the SYCL runtime sees, for backend() and doctor.
#include <torch/extension.h>

#include "launcher.h"
#include "sycl_ops.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("kernel_origin", [] { return std::string(xsc_sycl::kernel_origin()); });
  m.def("cpu_device_name", [] {
    return xsc::sycl_cpu_queue().get_device().get_info<sycl::info::device::name>();
  }, "Name of the SYCL CPU device (raises when there is none).");
}
