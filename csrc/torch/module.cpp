// The Python module _C: importing it registers the schemas and the CPU/CUDA (and, in icpx builds, XPU)
// implementations. Its few functions tell the Python layer how it was built.
#include <torch/extension.h>

#include "cpu_backend.h"

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
#else
  m.attr("built_with_sycl_aot") = false;
#endif
}
