// The batched copies NVIDIA ships, as peers of `xpu-state-copy bench` on CUDA devices. Not part of the op:
// benchmarks/cuda_peers.py compiles this file with torch.utils.cpp_extension the first time a bench on a
// CUDA device asks for it, into a cache folder.
//
//   cub_batched         cub::DeviceMemcpy::Batched (CCCL): pointer and size tables on the device, like
//                       batch_memcpy's; temporary storage sized by cub_temp_bytes and allocated by the caller
//                       once, outside the timing.
//   memcpy_batch_async  cudaMemcpyBatchAsync (CUDA 12.8+): pointer and size arrays in host memory, read by the
//                       driver during the call. It refuses the legacy default stream (torch's default), so
//                       the caller passes a side stream and orders it against its own stream.
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cub/device/device_memcpy.cuh>

#include <cstdint>

namespace {

void check(cudaError_t status, const char* call) {
  TORCH_CHECK(status == cudaSuccess, call, " failed: ", cudaGetErrorString(status));
}

// A table of n 8-byte values (addresses, or byte counts) where the call reads it.
void check_table(const at::Tensor& table, const char* name, int64_t n, bool on_device) {
  TORCH_CHECK(table.dim() == 1 && table.numel() == n, name, ": expected ", n, " entries, got shape ",
              table.sizes());
  TORCH_CHECK(table.element_size() == 8 && table.is_contiguous(), name,
              ": expected a contiguous table of 8-byte values, got ", table.dtype());
  TORCH_CHECK(table.is_cuda() == on_device, name, ": expected a ", on_device ? "CUDA" : "CPU",
              " tensor, got one on ", table.device());
}

int64_t cub_temp_bytes(const at::Tensor& src_table) {
  c10::cuda::CUDAGuard guard(src_table.device());
  size_t bytes = 0;
  // With no storage CUB only works out how much it needs for this many buffers.
  check(cub::DeviceMemcpy::Batched(nullptr, bytes, static_cast<const void* const*>(nullptr),
                                   static_cast<void* const*>(nullptr), static_cast<const int64_t*>(nullptr),
                                   src_table.numel(), c10::cuda::getCurrentCUDAStream().stream()),
        "cub::DeviceMemcpy::Batched (storage query)");
  return static_cast<int64_t>(bytes);
}

void cub_batched(const at::Tensor& temp, const at::Tensor& src_table, const at::Tensor& dst_table,
                 const at::Tensor& sizes) {
  const int64_t n = src_table.numel();
  check_table(src_table, "src_table", n, true);
  check_table(dst_table, "dst_table", n, true);
  check_table(sizes, "sizes", n, true);
  TORCH_CHECK(sizes.scalar_type() == at::kLong, "sizes: expected int64 byte counts, got ", sizes.dtype());
  TORCH_CHECK(temp.is_cuda() && temp.is_contiguous(), "temp: expected contiguous CUDA storage");
  c10::cuda::CUDAGuard guard(src_table.device());
  size_t bytes = static_cast<size_t>(temp.numel()) * temp.element_size();
  check(cub::DeviceMemcpy::Batched(temp.data_ptr(), bytes, static_cast<const void* const*>(src_table.data_ptr()),
                                   static_cast<void* const*>(dst_table.data_ptr()), sizes.data_ptr<int64_t>(),
                                   n, c10::cuda::getCurrentCUDAStream().stream()),
        "cub::DeviceMemcpy::Batched");
}

bool memcpy_batch_available() { return CUDART_VERSION >= 12080; }

void memcpy_batch_async(const at::Tensor& src_addrs, const at::Tensor& dst_addrs, const at::Tensor& sizes,
                        int64_t side_stream, int64_t device) {
  const int64_t n = src_addrs.numel();
  check_table(src_addrs, "src_addrs", n, false);
  check_table(dst_addrs, "dst_addrs", n, false);
  check_table(sizes, "sizes", n, false);
  TORCH_CHECK(side_stream != 0, "side_stream: cudaMemcpyBatchAsync refuses the legacy default stream");
#if CUDART_VERSION >= 12080
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  // One set of attributes for every copy: device memory on both sides, read in stream order (the sources
  // are written by earlier work on the stream). Location hints only matter for managed or pageable memory.
  cudaMemcpyAttributes attrs{};
  attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attrs.srcLocHint = {cudaMemLocationTypeDevice, static_cast<int>(device)};
  attrs.dstLocHint = attrs.srcLocHint;
  attrs.flags = cudaMemcpyFlagDefault;
  size_t first_copy = 0;
  auto* dsts = static_cast<void* const*>(dst_addrs.data_ptr());
  auto* srcs = static_cast<const void* const*>(src_addrs.data_ptr());
  auto* counts = static_cast<const size_t*>(sizes.data_ptr());
  auto stream = reinterpret_cast<cudaStream_t>(side_stream);
#if CUDART_VERSION >= 13000
  check(cudaMemcpyBatchAsync(dsts, srcs, counts, n, &attrs, &first_copy, 1, stream), "cudaMemcpyBatchAsync");
#else  // 12.8 and 12.9 also report the first copy that failed
  size_t failed = 0;
  check(cudaMemcpyBatchAsync(const_cast<void**>(dsts), const_cast<void**>(srcs), const_cast<size_t*>(counts), n,
                             &attrs, &first_copy, 1, &failed, stream),
        "cudaMemcpyBatchAsync");
#endif
#else
  TORCH_CHECK(false, "cudaMemcpyBatchAsync needs CUDA 12.8 or newer; this extension was built with CUDA ",
              CUDART_VERSION / 1000, ".", CUDART_VERSION % 1000 / 10);
#endif
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("cub_temp_bytes", &cub_temp_bytes, "bytes of temporary storage cub_batched needs for this many entries");
  m.def("cub_batched", &cub_batched, "cub::DeviceMemcpy::Batched over device tables, on the current stream");
  m.def("memcpy_batch_available", &memcpy_batch_available, "whether cudaMemcpyBatchAsync was compiled in");
  m.def("memcpy_batch_async", &memcpy_batch_async, "cudaMemcpyBatchAsync over host arrays, on side_stream");
}
