#pragma once

namespace xsc {

enum class CpuBackend { Native, Sycl };

// What a CPU call of batch_memcpy runs, from XPU_STATE_COPY_BACKEND (read on every call, so tests and
// users may switch it at run time); an unknown value is an error that lists the accepted ones.
CpuBackend cpu_backend_choice();

}  // namespace xsc
