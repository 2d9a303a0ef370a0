// sycl-jit: the kernels are built at run time by SYCL's kernel compiler (sycl_ext_oneapi_kernel_compiler)
// the first time a device needs them, with the aligned loads the device policy gives it (aligned_loads_for),
// from one of two inputs:
//  - the SYCL source embedded in the library at build time (kernel_sources.inc);
//  - the SPIR-V device image of that count made from that same source when the wheel was built, which is
//    a module CI compiles with Intel's offline GPU compiler (ocloc). The Python package hands the images
//    over and decides when they are preferred (device_image.py); a failed image build falls back to the
//    source with one log line.
// SYCL's persistent cache (SYCL_CACHE_PERSISTENT=1, which the Python package turns on unless told
// otherwise) keeps what the source path builds, so a later process loads it in under a second; for SPIR-V
// input it keeps nothing, and the device's compiler translates the module again in every process.
#include "kernel_provider_jit.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <string>

#include "launcher.h"
#include "kernel_sources.inc"  // generated: kBatchCopyKernelSource and kKernelHeaders

namespace xsc_sycl {

namespace syclexp = sycl::ext::oneapi::experimental;

namespace {

const char* const kKernelNames[] = {"xsc_batch_memcpy", "xsc_copy_states", "xsc_spec_decode"};

// Guards the image and the build records: builds of different contexts may run on different threads.
std::mutex& state_mutex() {
  static std::mutex m;
  return m;
}

struct DeviceImages {
  std::map<int, std::vector<std::byte>> by_loads;  // 0: one image for every device
  bool preferred = false;  // false: only for a device that cannot compile SYCL source
};

DeviceImages& device_images() {
  static auto* images = new DeviceImages();
  return *images;
}

// The image for a device the policy gives `loads` (a user's file first), and the loads it was built with
// (0: unknown).
std::pair<const std::vector<std::byte>*, int> image_for(const DeviceImages& images, int loads) {
  for (int key : {0, loads}) {
    const auto found = images.by_loads.find(key);
    if (found != images.by_loads.end() && !found->second.empty()) return {&found->second, key};
  }
  return {nullptr, loads};
}

std::vector<KernelBuild>& builds() {
  static auto* records = new std::vector<KernelBuild>();
  return *records;
}

// In SPIR-V a free-function kernel's entry point carries the front end's prefix; the source bundle maps
// the plain names itself.
template <class Bundle>
Kernels kernels_from(Bundle executable, const std::string& prefix) {
  const auto get = [&](int i) { return executable.ext_oneapi_get_kernel(prefix + kKernelNames[i]); };
  return Kernels{get(0), get(1), get(2)};
}

auto source_bundle(const sycl::context& context) {
  syclexp::include_files headers;
  for (const KernelHeader& h : kKernelHeaders) headers.add(h.name, h.text);
  return syclexp::create_kernel_bundle_from_source(context, syclexp::source_language::sycl,
                                                   std::string(kBatchCopyKernelSource), syclexp::properties{headers});
}

// A build that failed reading SYCL's persistent kernel cache rather than compiling: the runtime does not drop
// the entry it could not read, so the same build fails the same way in every process until it is deleted.
struct CacheReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

auto built_from_source(const sycl::context& context, sycl::device device,
                       const std::vector<std::string>& options = {}) {
  if (!device.ext_oneapi_can_compile(syclexp::source_language::sycl)) {
    throw std::runtime_error(
        "xpu_state_copy: SYCL device '" + device.get_info<sycl::info::device::name>() +
        "' cannot compile SYCL source at run time; libsycl-jit.so (intel-sycl-rt >= 2025.2.1) is "
        "needed, or build the extension ahead of time with icpx");
  }
  try {
    auto source = source_bundle(context);
    return syclexp::build(source, std::vector<sycl::device>{device},
                          syclexp::properties{syclexp::build_options{options}});
  } catch (const sycl::exception& e) {  // the compiler's own failure, with its log
    throw std::runtime_error(std::string("xpu_state_copy: compiling the SYCL copy kernels at run time failed; "
                                         "the build log follows (XPU_STATE_COPY_BACKEND=cpu avoids the SYCL "
                                         "device for CPU tensors): ") +
                             e.what());
  } catch (const std::exception& e) {  // seen with a corrupt entry in SYCL's persistent kernel cache
    throw CacheReadError(std::string("xpu_state_copy: building the SYCL copy kernels failed (") + e.what() +
                             "); a corrupt persistent kernel cache does this: delete SYCL_CACHE_DIR (default "
                             "~/.cache/libsycl_cache) or set SYCL_CACHE_PERSISTENT=0");
  }
}

// What every run-time build of the source passes to the kernel compiler, so that one process fills SYCL's
// persistent cache. The cache keeps the front end's LLVM bitcode (keyed on the source and options) and the
// device binary, keyed on the SPIR-V made from that bitcode. The process that compiles the source has LLVM
// discard value names; one that finds the bitcode in the cache reads it with names kept, and the passes
// after it name the blocks they add (.loopexit, .preheader): other SPIR-V bytes, so it never finds the
// first process's binary, builds it again and stores it under a second key (seen with intel-sycl-rt 2026.2
// on the OpenCL CPU device: the third process was the first to load a binary). With names kept from the
// front end on, both make the same SPIR-V. Not for the shipped image: names only make it bigger there.
const std::vector<std::string> kRuntimeBuildOptions = {"-fno-discard-value-names"};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

const char* kernel_origin() { return "sycl-jit"; }

int aligned_loads_for(bool gpu, const std::vector<size_t>& sub_group_sizes) {
  const bool narrow_registers = std::find(sub_group_sizes.begin(), sub_group_sizes.end(), 8) != sub_group_sizes.end();
  return gpu && !narrow_registers ? 8 : 4;
}

int aligned_loads_for(const sycl::device& device) {
  return aligned_loads_for(device.is_gpu(), device.get_info<sycl::info::device::sub_group_sizes>());
}

void set_device_images(std::map<int, std::vector<std::byte>> images, bool preferred) {
  std::lock_guard<std::mutex> lock(state_mutex());
  device_images() = DeviceImages{std::move(images), preferred};
}

std::vector<KernelBuild> kernel_builds() {
  std::lock_guard<std::mutex> lock(state_mutex());
  return builds();
}

Kernels build_kernels(const sycl::context& context, sycl::device device) {
  DeviceImages images;
  {
    std::lock_guard<std::mutex> lock(state_mutex());
    images = device_images();
  }
  const std::string name = device.get_info<sycl::info::device::name>();
  const int loads = aligned_loads_for(device);
  const auto [image, image_loads] = image_for(images, loads);
  const bool from_image =
      image != nullptr && (images.preferred || !device.ext_oneapi_can_compile(syclexp::source_language::sycl));
  const auto record = [&](const char* input, int built_loads, std::chrono::steady_clock::time_point start,
                          std::string note) {
    std::lock_guard<std::mutex> lock(state_mutex());
    builds().push_back(KernelBuild{name, input, built_loads, seconds_since(start), std::move(note)});
  };
  std::string why_source;
  if (from_image) {
    const auto start = std::chrono::steady_clock::now();
    try {
      auto bundle = syclexp::create_kernel_bundle_from_source(context, syclexp::source_language::spirv, *image);
      Kernels k = kernels_from(syclexp::build(bundle, std::vector<sycl::device>{device}), "__sycl_kernel_");
      record("spirv-image", image_loads, start, images.preferred ? "" : "the device cannot compile SYCL source");
      return k;
    } catch (const std::exception& e) {
      why_source = std::string("the SPIR-V device image failed to build: ") + e.what();
      std::fprintf(stderr, "xpu_state_copy: the SPIR-V device image failed to build for '%s' (%s); "
                   "compiling the SYCL source instead\n", name.c_str(), e.what());
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string loads_option = "-DXSC_ALIGNED_LOADS=" + std::to_string(loads);
  std::vector<std::string> options = kRuntimeBuildOptions;
  options.push_back(loads_option);
  try {
    Kernels k = kernels_from(built_from_source(context, device, options), "");
    record("sycl-source", loads, start, why_source);
    return k;
  } catch (const CacheReadError& e) {
    // Without kRuntimeBuildOptions the front end makes other SPIR-V bytes, which the cache keys apart from
    // the entry it cannot read: the copy works, and the warning says how to stop paying for it.
    std::fprintf(stderr, "%s; until then each process builds them once more with other options\n", e.what());
    Kernels k = kernels_from(built_from_source(context, device, {loads_option}), "");
    record("sycl-source", loads, start, "a persistent kernel cache entry could not be read");
    return k;
  }
}

std::vector<std::byte> spirv_from_source(const sycl::context& context, sycl::device device,
                                         const std::vector<std::string>& options) {
  auto executable = built_from_source(context, device, options);
  if (std::distance(executable.begin(), executable.end()) != 1)
    throw std::runtime_error("xpu_state_copy: expected the kernel compiler to make one device image, got " +
                             std::to_string(std::distance(executable.begin(), executable.end())));
  std::vector<std::byte> spirv = executable.begin()->ext_oneapi_get_backend_content();
  const uint32_t kSpirvMagic = 0x07230203;
  if (spirv.size() < 4 || *reinterpret_cast<const uint32_t*>(spirv.data()) != kSpirvMagic)
    throw std::runtime_error("xpu_state_copy: the kernel compiler's device image for '" +
                             device.get_info<sycl::info::device::name>() + "' is not SPIR-V");
  return spirv;
}

std::string kernel_source_digest() {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a, 64-bit: a fingerprint, not a defence
  const auto add = [&hash](const char* text) {
    for (const char* c = text; *c; ++c) hash = (hash ^ (unsigned char)*c) * 1099511628211ull;
    hash = (hash ^ 0xff) * 1099511628211ull;  // a separator, so moved text between files changes the hash
  };
  add(kBatchCopyKernelSource);
  for (const KernelHeader& h : kKernelHeaders) add(h.text);
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", (unsigned long long)hash);
  return out;
}

}  // namespace xsc_sycl
