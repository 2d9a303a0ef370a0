// What the sycl-jit kernel provider offers beyond launcher.h's build_kernels: the SPIR-V device image it
// may build from, the records of how each device's kernels were obtained, and the image's making.
#pragma once
#include <sycl/sycl.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace xsc_sycl {

// One build_kernels call: for which device, from which input, how long it took.
struct KernelBuild {
  std::string device;
  std::string input;  // "spirv-image" or "sycl-source"
  double seconds;
  std::string note;   // why the source was built although an image was set; empty otherwise
};

// The SPIR-V later builds may start from (empty: always the source). `preferred`: tried first for every
// device; otherwise only for a device that cannot compile SYCL source (no libsycl-jit). Call before the
// first copy: a device's kernels are built once.
void set_device_image(std::vector<std::byte> spirv, bool preferred);
std::vector<KernelBuild> kernel_builds();

// Builds the embedded source for `device` and returns its SPIR-V module: how the wheel's image is made.
// `options` go to the kernel compiler (-D... builds a variant, as the device-compile test does).
std::vector<std::byte> spirv_from_source(const sycl::context& context, sycl::device device,
                                         const std::vector<std::string>& options = {});

// A fingerprint of the embedded kernel source and headers, recorded beside the image so that an image
// made from other sources is never loaded.
std::string kernel_source_digest();

}  // namespace xsc_sycl
