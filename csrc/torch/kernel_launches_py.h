// kernel_launches(device) in the Python modules that launch SYCL kernels (_sycl_jit, and _C in icpx builds):
// the grid the launcher chose for each kernel on a device, and the facts it chose it from, for doctor and
// the tests.
#pragma once
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "launcher.h"
#include "sycl_ops.h"

namespace xsc {

inline void def_kernel_launches(pybind11::module_& m) {
  namespace py = pybind11;
  m.def("kernel_launches", [](const std::string& device) {
    std::vector<xsc_sycl::KernelLaunch> launches;
    {
      py::gil_scoped_release release;  // the first call builds the kernels
      launches = xsc_sycl::kernel_launches(xsc::sycl_queue_of(device));
    }
    py::list out;
    for (const xsc_sycl::KernelLaunch& l : launches) {
      const xsc_sycl::KernelFacts& f = l.facts;
      py::dict d;
      d["kernel"] = l.name;
      d["groups"] = l.plan.groups;
      d["local"] = l.plan.local;
      d["resident_groups"] = f.resident_groups == xsc_sycl::KernelFacts::kUnknown ? py::object(py::none())
                                                                                  : py::int_(f.resident_groups);
      d["sub_group"] = f.sub_group;
      d["local_bytes"] = f.local_bytes;
      d["hw_threads"] = f.hw_threads;
      d["compute_units"] = f.compute_units;
      out.append(d);
    }
    return out;
  }, py::arg("device"),
     "The grid each kernel is launched with on a device ('cpu': the SYCL CPU device; 'xpu[:N]'): kernel, "
     "groups, local (work-items per group), and the facts it was worked out from: resident_groups (the "
     "runtime's count, None where the backend does not answer), sub_group, local_bytes, hw_threads, "
     "compute_units.");
}

}  // namespace xsc
