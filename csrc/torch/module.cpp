// The Python module _C: importing it registers the schemas and the CPU/CUDA (and, in icpx builds, XPU)
// implementations. Its few functions tell the Python layer how it was built.
#include <torch/extension.h>

#include "cpu_backend.h"
#ifdef XSC_KERNEL_AOT
#include "kernel_launches_py.h"
#include "sycl_ops.h"
#endif

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("cpu_backend", [] { return xsc::cpu_backend_choice() == xsc::CpuBackend::Sycl ? "sycl" : "cpu"; },
        "What a CPU call runs now: 'cpu' (native) or 'sycl' (from XPU_STATE_COPY_BACKEND).");
#ifdef XSC_WITH_CUDA
  m.attr("built_with_cuda") = true;
#else
  m.attr("built_with_cuda") = false;
#endif
#ifdef XSC_KERNEL_AOT
  m.attr("built_with_sycl_aot") = true;
  m.def("prepare_kernels", &xsc::prepare_sycl_kernels, pybind11::arg("device"),
        pybind11::call_guard<pybind11::gil_scoped_release>(),
        "Gets the kernels of a device ('cpu': the SYCL CPU device; 'xpu[:N]') ready now, without copying.");
  xsc::def_kernel_launches(m);
#else
  m.attr("built_with_sycl_aot") = false;
#endif
}
