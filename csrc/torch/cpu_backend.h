#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace xsc {

enum class CpuBackend { Native, Sycl };

// What a CPU call of batch_memcpy runs, from XPU_STATE_COPY_BACKEND (read on every call, so tests and
// users may switch it at run time); an unknown value is an error that lists the accepted ones.
CpuBackend cpu_backend_choice();

// The SYCL implementation registered under `name` for CPU tensors, or an error saying why there is none.
c10::OperatorHandle sycl_cpu_op(const char* name);

}  // namespace xsc
