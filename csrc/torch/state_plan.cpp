#include "state_plan.h"

#include <ATen/ATen.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <list>
#include <mutex>
#include <utility>

#include "checks.h"
#include "entry_sources.h"

#ifdef XSC_WITH_CUDA
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#endif
#if defined(XSC_WITH_TORCH_XPU) && __has_include(<c10/xpu/XPUGraphsC10Utils.h>)
#include <c10/xpu/XPUGraphsC10Utils.h>  // torch's XPU graphs (and the SYCL graph extension they use)
#define XSC_XPU_GRAPHS 1
#endif

namespace xsc {
namespace {

void check_ids(const at::Tensor& t, const char* name, const at::Tensor& like, const at::Device& device) {
  XSC_CHECK(t.dim() == 1 && t.is_contiguous(), name, " must be a 1-D contiguous tensor, got ", t.dim(), "-D");
  XSC_CHECK(t.scalar_type() == at::kInt || t.scalar_type() == at::kLong, name,
              " must be torch.int32 or torch.int64, got ", t.scalar_type());
  XSC_CHECK(t.scalar_type() == like.scalar_type(), name, " is ", t.scalar_type(), " but src_blocks is ",
              like.scalar_type(), "; block ids and shifts share one dtype");
  XSC_CHECK(t.numel() == like.numel(), name, " has ", t.numel(), " entries but src_blocks has ", like.numel());
  XSC_CHECK(t.device() == device, name, " is on ", t.device(), " but states[0] is on ", device);
}

int64_t host_id(const at::Tensor& t, int64_t r) {
  return t.scalar_type() == at::kLong ? t.data_ptr<int64_t>()[r] : t.data_ptr<int32_t>()[r];
}

}  // namespace

// A block's element count and whether its dims (all but the first) are dense and row-major, as a contiguous
// block is. Read from sizes and strides: a view per state (select) would cost a dispatcher call each, and
// vLLM passes dozens of states on every step.
int64_t block_numel(const at::Tensor& s) {
  int64_t n = 1;
  for (int64_t d = 1; d < s.dim(); ++d) n *= s.size(d);
  return n;
}

bool block_is_contiguous(const at::Tensor& s) {
  if (block_numel(s) == 0) return true;
  int64_t expected = 1;
  for (int64_t d = s.dim() - 1; d >= 1; --d) {
    if (s.size(d) != 1 && s.stride(d) != expected) return false;
    expected *= s.size(d);
  }
  return true;
}

CopyStatesShape check_copy_states_args(at::TensorList states, at::IntArrayRef kinds, const at::Tensor& src_blocks,
                                       const at::Tensor& dst_blocks, const at::Tensor& shifts) {
  XSC_CHECK(!states.empty(), "states is empty");
  XSC_CHECK(kinds.size() == states.size(), "kinds has ", kinds.size(), " entries but states has ", states.size());
  const at::Device device = states[0].device();
  int64_t min_blocks = INT64_MAX;
  for (size_t j = 0; j < states.size(); ++j) {
    const at::Tensor& s = states[j];
    XSC_CHECK(s.device() == device, "states[", j, "] is on ", s.device(), " but states[0] is on ", device);
    XSC_CHECK(kinds[j] >= kWholeBlock && kinds[j] <= kConvDS, "kinds[", j, "] = ", kinds[j],
                " is not 0 (whole block), 1 (conv, [blocks, tokens, dim]) or 2 (conv, [blocks, dim, tokens])");
    XSC_CHECK(s.dim() >= 2, "states[", j, "] must have a block dimension and a state, got ", s.dim(), "-D");
    if (kinds[j] != kWholeBlock) {
      XSC_CHECK(s.dim() == 3, "states[", j, "] is a conv state and must be 3-D, got ", s.dim(), "-D");
    }
    // Within a block the copied bytes must be laid out as the plan says: a whole block (or SD block)
    // contiguous; for DS, each channel's tokens contiguous.
    if (kinds[j] == kConvDS) {
      XSC_CHECK(s.stride(2) == 1, "states[", j, "] (conv, [blocks, dim, tokens]) must have contiguous tokens, got "
                  "stride ", s.stride(2));
    } else {
      XSC_CHECK(block_is_contiguous(s), "states[", j, "] must be contiguous within a block (only the block "
                  "stride may be padded)");
    }
    min_blocks = std::min<int64_t>(min_blocks, s.size(0));
  }
  check_ids(src_blocks, "src_blocks", src_blocks, device);
  check_ids(dst_blocks, "dst_blocks", src_blocks, device);
  check_ids(shifts, "shifts", src_blocks, device);
  if (device.is_cpu()) {  // ids on an accelerator are not read back (no sync); the kernel skips bad ones
    for (int64_t r = 0; r < src_blocks.numel(); ++r) {
      for (auto& [name, t] : {std::pair<const char*, const at::Tensor*>{"src_blocks", &src_blocks},
                              {"dst_blocks", &dst_blocks}}) {
        const int64_t b = host_id(*t, r);
        XSC_CHECK(b >= -1 && b < min_blocks, name, "[", r, "] = ", b, " is not a block id (-1 skips; ",
                    "the smallest state has ", min_blocks, " blocks)");
      }
      XSC_CHECK(host_id(shifts, r) >= 0, "shifts[", r, "] = ", host_id(shifts, r), " is negative");
    }
  }
  return CopyStatesShape{(int64_t)states.size(), src_blocks.numel(), src_blocks.scalar_type() == at::kLong};
}

at::Tensor build_state_plan(at::TensorList states, at::IntArrayRef kinds) {
  const int64_t n = (int64_t)states.size();
  at::Tensor plan = at::empty({xsc::plan_words(n)}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = plan.data_ptr<int64_t>();
  for (size_t j = 0; j < states.size(); ++j, p += xsc::kPlanFields) {
    const at::Tensor& s = states[j];
    const int64_t es = s.element_size();
    const uint64_t base = reinterpret_cast<uintptr_t>(s.data_ptr());
    p[xsc::kBase] = (int64_t)base;  // the address's bits; the kernel reads them back as uint64
    p[xsc::kBlockStride] = s.stride(0) * es;
    p[xsc::kBlocks] = s.size(0);
    if (kinds[j] == kConvDS) {
      p[xsc::kRows] = s.size(1);
      p[xsc::kRowStride] = s.stride(1) * es;
      p[xsc::kRowBytes] = s.size(2) * es;
      p[xsc::kTokenBytes] = es;
    } else {
      p[xsc::kRows] = 1;
      p[xsc::kRowStride] = 0;
      p[xsc::kRowBytes] = block_numel(s) * es;
      p[xsc::kTokenBytes] = kinds[j] == kConvSD ? s.size(2) * es : 0;
    }
  }
  xsc::derive_plan_fields(reinterpret_cast<xsc::i64*>(plan.data_ptr<int64_t>()), n);  // int64_t may be long
  return plan;
}

namespace {

// Whether work queued now on the current stream of `device` is recorded into a graph (CUDA graphs, and XPU
// graphs where torch has them) instead of run.
bool capturing(const at::Device& device) {
#ifdef XSC_WITH_CUDA
  if (device.is_cuda()) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream(device.index()), &status));
    return status != cudaStreamCaptureStatusNone;
  }
#endif
#ifdef XSC_XPU_GRAPHS
  if (device.is_xpu()) {
    return c10::xpu::getCurrentXPUStream(device.index()).queue().ext_oneapi_get_state() ==
           sycl::ext::oneapi::experimental::queue_state::recording;
  }
#endif
  (void)device;
  return false;
}

struct CachedPlan {
  at::Tensor host, device;
};

bool same_plan(const CachedPlan& cached, const at::Tensor& host, const at::Device& device) {
  // Both host plans are small contiguous int64 CPU tensors: compare their bytes, not through the dispatcher.
  return cached.device.device() == device && cached.host.numel() == host.numel() &&
         std::memcmp(cached.host.data_ptr(), host.data_ptr(), host.nbytes()) == 0;
}

}  // namespace

at::Tensor cached_device_plan(const at::Tensor& host, const at::Device& device) {
  if (device.is_cpu()) return host;
  static std::mutex mutex;
  // Never destroyed: device memory freed after the device runtime shut down at exit crashes the process.
  // `recent`: most recent first, at most kRecentPlans. `captured`: every plan a graph capture has used. A
  // graph replays the address it captured for as long as the graph lives, which this cache cannot see, so
  // such a plan is never evicted (freed, its memory could hold anything at the next replay). Few: one per
  // distinct set of states captured.
  constexpr size_t kRecentPlans = 8;
  static auto& recent = *new std::list<CachedPlan>();
  static auto& captured = *new std::list<CachedPlan>();
  std::lock_guard<std::mutex> lock(mutex);
  const bool in_capture = capturing(device);
  at::Tensor plan;
  for (const CachedPlan& cached : captured) {
    if (same_plan(cached, host, device)) {
      plan = cached.device;
      break;
    }
  }
  if (!plan.defined()) {
    for (auto it = recent.begin(); it != recent.end(); ++it) {
      if (same_plan(*it, host, device)) {
        plan = it->device;
        // A capture pins it; otherwise it becomes the most recent.
        if (in_capture) {
          captured.splice(captured.end(), recent, it);
        } else {
          recent.splice(recent.begin(), recent, it);
        }
        break;
      }
    }
  }
  if (!plan.defined()) {
    std::list<CachedPlan>& into = in_capture ? captured : recent;
    into.push_front(CachedPlan{host, host.to(device)});
    plan = into.front().device;
    if (recent.size() > kRecentPlans) recent.pop_back();
  }
  // The caller launches a kernel that reads the plan on the current stream. The caching allocator only
  // knows the stream the plan was allocated on: once evicted, its memory could go to the next allocation
  // on that stream while the kernel, queued on another stream, has not read it yet. Recording the stream
  // makes the allocator wait for that stream's work before it reuses the memory.
  plan.record_stream(c10::impl::VirtualGuardImpl(device.type()).getStream(device));
  return plan;
}

at::Tensor device_state_plan(at::TensorList states, at::IntArrayRef kinds) {
  return cached_device_plan(build_state_plan(states, kinds), states[0].device());
}

}  // namespace xsc
