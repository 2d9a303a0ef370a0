// sycl-jit: the kernel source is embedded in the library at build time and compiled by SYCL's kernel
// compiler (sycl_ext_oneapi_kernel_compiler) the first time a device needs it. SYCL's persistent cache
// (SYCL_CACHE_PERSISTENT=1, which the Python package turns on unless told otherwise) makes later
// processes skip the compile.
#include <stdexcept>
#include <string>

#include "launcher.h"
#include "kernel_sources.inc"  // generated: kBatchCopyKernelSource and the headers it includes

namespace xsc_sycl {

namespace syclexp = sycl::ext::oneapi::experimental;

const char* kernel_origin() { return "sycl-jit"; }

Kernels build_kernels(const sycl::context& context, sycl::device device) {
  if (!device.ext_oneapi_can_compile(syclexp::source_language::sycl)) {
    throw std::runtime_error(
        "xpu_state_copy: SYCL device '" + device.get_info<sycl::info::device::name>() +
        "' cannot compile SYCL source at run time; libsycl-jit.so (intel-sycl-rt >= 2025.2.1) is "
        "needed, or build the extension ahead of time with icpx");
  }
  try {
    syclexp::include_files headers("copy_words.h", kCopyWordsHeader);
    headers.add("shifted_copy.h", kShiftedCopyHeader);
    headers.add("copy_routine.h", kCopyRoutineHeader);
    headers.add("entry_sources.h", kEntrySourcesHeader);
    headers.add("batch_jobs.h", kBatchJobsHeader);
    headers.add("small_batch.h", kSmallBatchHeader);
    headers.add("batch_schedule.h", kBatchScheduleHeader);
    headers.add("spec_decode_source.h", kSpecDecodeSourceHeader);
    headers.add("spec_decode_schedule.h", kSpecDecodeScheduleHeader);
    auto source = syclexp::create_kernel_bundle_from_source(context, syclexp::source_language::sycl,
                                                            std::string(kBatchCopyKernelSource),
                                                            syclexp::properties{headers});
    auto executable = syclexp::build(source, std::vector<sycl::device>{device});
    return Kernels{executable.ext_oneapi_get_kernel("xsc_batch_memcpy"),
                   executable.ext_oneapi_get_kernel("xsc_batch_memcpy_small"),
                   executable.ext_oneapi_get_kernel("xsc_batch_memcpy_direct"),
                   executable.ext_oneapi_get_kernel("xsc_copy_states"),
                   executable.ext_oneapi_get_kernel("xsc_copy_states_small"),
                   executable.ext_oneapi_get_kernel("xsc_spec_decode"),
                   executable.ext_oneapi_get_kernel("xsc_spec_decode_small"),
                   executable.ext_oneapi_get_kernel("xsc_spec_decode_global")};
  } catch (const sycl::exception& e) {  // the compiler's own failure, with its log
    throw std::runtime_error(std::string("xpu_state_copy: compiling the SYCL copy kernels at run time failed; "
                                         "the build log follows (XPU_STATE_COPY_BACKEND=cpu avoids the SYCL "
                                         "device for CPU tensors): ") +
                             e.what());
  } catch (const std::exception& e) {  // seen with a corrupt entry in SYCL's persistent kernel cache
    throw std::runtime_error(std::string("xpu_state_copy: building the SYCL copy kernels failed (") + e.what() +
                             "); a corrupt persistent kernel cache does this: delete SYCL_CACHE_DIR (default "
                             "~/.cache/libsycl_cache) or set SYCL_CACHE_PERSISTENT=0");
  }
}

}  // namespace xsc_sycl
