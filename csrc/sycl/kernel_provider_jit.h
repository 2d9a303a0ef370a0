// What the sycl-jit kernel provider offers beyond launcher.h's build_kernels: the SPIR-V device image it
// may build from, the records of how each device's kernels were obtained, and the image's making.
#pragma once
#include <sycl/sycl.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace xsc_sycl {

// One build_kernels call: for which device, from which input, with how many aligned loads, how long it took.
struct KernelBuild {
  std::string device;
  std::string input;   // "spirv-image" or "sycl-source"
  int aligned_loads;   // XSC_ALIGNED_LOADS; 0: an image of unknown build (a user's file)
  double seconds;
  std::string note;   // why the source was built although an image was set; empty otherwise
};

// The aligned loads per work-item the kernels are built with for a device (XSC_ALIGNED_LOADS,
// batch_copy_kernel.sycl): 8 on a GPU without sub-group size 8, whose registers hold a 32-bit value per lane
// of a 16-lane sub-group (64 bytes: pvc, Xe2, Xe3); else 4 (dg2 and mtl, with 32-byte registers, spill with
// 8; CPUs).
int aligned_loads_for(bool gpu, const std::vector<size_t>& sub_group_sizes);
int aligned_loads_for(const sycl::device& device);

// The SPIR-V later builds may start from, by aligned loads (none for a count: that count from the source);
// a user's file is passed as `images[0]`, for every device. `preferred`: tried first for every device;
// otherwise only for a device that cannot compile SYCL source (no libsycl-jit). Call before the first copy:
// a device's kernels are built once.
void set_device_images(std::map<int, std::vector<std::byte>> images, bool preferred);
std::vector<KernelBuild> kernel_builds();

// Builds the embedded source for `device` and returns its SPIR-V module: how the wheel's image is made.
// `options` go to the kernel compiler (-D... builds a variant, as the device-compile test does).
std::vector<std::byte> spirv_from_source(const sycl::context& context, sycl::device device,
                                         const std::vector<std::string>& options = {});

// A fingerprint of the embedded kernel source and headers, recorded beside the image so that an image
// made from other sources is never loaded.
std::string kernel_source_digest();

}  // namespace xsc_sycl
