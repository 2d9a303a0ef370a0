// The Python module _sycl_jit: importing it registers the SYCL implementations (sycl_ops.cpp). Its
// functions report what the SYCL runtime sees, for backend() and doctor, and move the SPIR-V device image
// between the wheel and the kernel provider (device_image.py).
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <cstring>
#include <map>

#include "kernel_provider_jit.h"
#include "kernel_launches_py.h"
#include "launcher.h"
#include "sycl_ops.h"

namespace py = pybind11;

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("kernel_origin", [] { return std::string(xsc_sycl::kernel_origin()); });
  m.def("cpu_device_name", [] {
    return xsc::sycl_cpu_queue().get_device().get_info<sycl::info::device::name>();
  }, "Name of the SYCL CPU device (raises when there is none).");
  m.def("kernel_source_digest", &xsc_sycl::kernel_source_digest,
        "Fingerprint of the kernel source embedded in this library.");
  m.def("set_device_images", [](const std::map<int, py::bytes>& images, bool preferred) {
    std::map<int, std::vector<std::byte>> copies;
    for (const auto& [loads, spirv] : images) {
      const std::string text = spirv;
      copies[loads].resize(text.size());
      std::memcpy(copies[loads].data(), text.data(), text.size());
    }
    xsc_sycl::set_device_images(std::move(copies), preferred);
  }, py::arg("images"), py::arg("preferred"),
     "SPIR-V the kernels may be built from, by aligned loads ({4: ..., 8: ...}; {0: ...}: one image for every "
     "device; {}: source only); preferred: tried before the source for every device, else only where the "
     "device cannot compile SYCL source.");
  m.def("aligned_loads_for", [](bool gpu, const std::vector<size_t>& sub_group_sizes) {
    return xsc_sycl::aligned_loads_for(gpu, sub_group_sizes);
  }, py::arg("gpu"), py::arg("sub_group_sizes"),
     "The aligned 16-byte loads per work-item the kernels are built with for such a device (the device policy).");
  m.def("spirv_from_source", [](const std::vector<std::string>& options) {
    std::vector<std::byte> spirv;
    {
      py::gil_scoped_release release;  // a build of the whole source: tens of seconds on the CPU device
      sycl::queue& queue = xsc::sycl_cpu_queue();
      spirv = xsc_sycl::spirv_from_source(queue.get_context(), queue.get_device(), options);
    }
    return py::bytes(reinterpret_cast<const char*>(spirv.data()), spirv.size());
  }, py::arg("options") = std::vector<std::string>{},
     "Builds the embedded source on the SYCL CPU device (kernel compiler options: e.g. -DNAME=VALUE) and "
     "returns its SPIR-V module.");
  m.def("prepare_kernels", &xsc::prepare_sycl_kernels, py::arg("device"),
        py::call_guard<py::gil_scoped_release>(),  // a build takes seconds; the caller's threads go on
        "Builds the kernels of a device ('cpu': the SYCL CPU device; 'xpu[:N]') now, without copying.");
  xsc::def_kernel_launches(m);
  m.def("kernel_builds", [] {
    py::list out;
    for (const xsc_sycl::KernelBuild& b : xsc_sycl::kernel_builds()) {
      py::dict d;
      d["device"] = b.device;
      d["input"] = b.input;
      d["aligned_loads"] = b.aligned_loads;
      d["seconds"] = b.seconds;
      d["note"] = b.note;
      out.append(d);
    }
    return out;
  }, "How this process obtained each device's kernels: device, input, aligned_loads, seconds, note.");
}
