// The launcher on the OpenCL CPU device: the grid its plan chooses (several groups from the device's compute
// units; the OpenCL backend does not answer the resident-group query), then batch_memcpy's table schedule and
// copy_states_'s row schedule run over that grid and over one to seven work-groups, every byte of fresh
// random inputs with poisoned outputs compared with a memmove reference.
#include <algorithm>

#include "grid_arena.h"
#include "schedule.h"

namespace {

using namespace xsc_grid_test;

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what.c_str());
    ++failures;
  }
}

// What the plan chose for each kernel, and that it is the device rule's grid of several groups.
void check_plan(sycl::queue& q) {
  expect(q.get_backend() == sycl::backend::opencl, "the SYCL CPU device is reached through OpenCL");
  const size_t units = q.get_device().get_info<sycl::info::device::max_compute_units>();
  for (const xsc_sycl::KernelLaunch& l : xsc_sycl::kernel_launches(q)) {
    std::printf("%-18s %zu groups of %zu (compute units %zu, resident-group query %s)\n", l.name.c_str(),
                l.plan.groups, l.plan.local, l.facts.compute_units,
                l.facts.resident_groups == xsc_sycl::KernelFacts::kUnknown ? "not asked"
                                                                           : std::to_string(l.facts.resident_groups).c_str());
    expect(l.facts.resident_groups == xsc_sycl::KernelFacts::kUnknown,
           l.name + ": the resident-group query is asked only of Level Zero");
    expect(l.plan.local == (size_t)xsc::kMaxGroupSize, l.name + ": work-groups of kMaxGroupSize");
    expect(l.plan.groups == 2 * units && l.plan.groups >= 2, l.name + ": two groups per compute unit");
  }
}

// batch_memcpy: `sizes` entries, each source and destination at `src_mod` / `dst_mod` (-1: random) mod 16.
void batch_memcpy(sycl::queue& q, const char* name, const std::vector<int64_t>& sizes, int src_mod, int dst_mod,
                  bool sizes64, size_t groups) {
  int64_t end = 0;
  std::vector<int64_t> src_off, dst_off;
  const auto next_line = [](int64_t off) { return (off + 32 + 15) / 16 * 16; };  // a gap, then 16-aligned
  for (int64_t s : sizes) {
    src_off.push_back(end + (src_mod < 0 ? pick(0, 15) : src_mod));
    dst_off.push_back(next_line(src_off.back() + s) + (dst_mod < 0 ? pick(0, 15) : dst_mod));
    end = next_line(dst_off.back() + s);
  }
  Arena a((size_t)end);
  std::vector<uint64_t> src, dst;
  std::vector<int64_t> s64(sizes);
  std::vector<int32_t> s32(sizes.begin(), sizes.end());
  for (size_t i = 0; i < sizes.size(); ++i) {
    a.poison(dst_off[i], sizes[i]);
    a.move(dst_off[i], src_off[i], sizes[i]);
    src.push_back(a.address(src_off[i]));
    dst.push_back(a.address(dst_off[i]));
  }
  const xsc_sycl::BatchMemcpyArgs args{src.data(), dst.data(), sizes64 ? (const void*)s64.data() : s32.data(),
                                       sizes64, (int64_t)sizes.size()};
  xsc_sycl::testing::launch_batch_memcpy(q, args, groups).wait_and_throw();
  a.check(std::string("batch_memcpy ") + name + ", " + grid_name(groups), &failures);
}

void every_batch_memcpy_schedule(sycl::queue& q, size_t groups) {
  std::vector<int64_t> aligned, shifted, tiny, huge = {(3 << 20) + 5, 7, 0, 20000};
  for (int i = 0; i < 40; ++i) aligned.push_back(16 * pick(0, 3000));
  for (int i = 0; i < 40; ++i) shifted.push_back(pick(0, 40000));
  for (int i = 0; i < 5000; ++i) tiny.push_back(pick(0, 70));  // three tiles of entries
  batch_memcpy(q, "aligned", aligned, 0, 0, false, groups);
  batch_memcpy(q, "shifted", shifted, -1, -1, true, groups);
  batch_memcpy(q, "tiny", tiny, -1, -1, false, groups);
  batch_memcpy(q, "huge", huge, 3, 11, true, groups);
}

// A state pool of copy_states_: `blocks` blocks `stride` bytes apart, each `rows` rows of `row_bytes`
// (`row_stride` apart), shifted `token_bytes` per token (0: a whole-block state, never shifted).
struct Pool {
  int64_t blocks, stride, rows, row_stride, row_bytes, token_bytes;
  int64_t at = 0;  // offset in the arena
};

// copy_states_ over the three layouts (whole block, conv [blocks, tokens, dim], conv [blocks, dim, tokens])
// and a whole block of several units, for `requests` requests: one shifts its block in place, one is
// skipped, shifts go past what a row holds.
void copy_states(sycl::queue& q, int64_t requests, bool ids64, size_t groups) {
  const int64_t blocks = 2 * requests;
  std::vector<Pool> pools = {{blocks, 704, 1, 0, 700, 0},          {blocks, 480, 1, 0, 480, 160},
                             {blocks, 20 * 16, 20, 16, 12, 2},     {blocks, 20480, 1, 0, 20000 + 3, 0}};
  int64_t end = 0;
  for (Pool& p : pools) {
    p.at = end + pick(0, 3) * 16;
    end = p.at + p.blocks * p.stride + 64;
  }
  Arena a((size_t)end);
  std::vector<int64_t> plan((size_t)xsc::plan_words((int64_t)pools.size()));
  for (size_t j = 0; j < pools.size(); ++j) {
    const Pool& p = pools[j];
    int64_t* f = plan.data() + j * xsc::kPlanFields;
    f[xsc::kBase] = (int64_t)a.address(p.at);
    f[xsc::kBlockStride] = p.stride;
    f[xsc::kBlocks] = p.blocks;
    f[xsc::kRows] = p.rows;
    f[xsc::kRowStride] = p.row_stride;
    f[xsc::kRowBytes] = p.row_bytes;
    f[xsc::kTokenBytes] = p.token_bytes;
  }
  xsc::derive_plan_fields(reinterpret_cast<xsc::i64*>(plan.data()), (int64_t)pools.size());
  // Sources from the first half of the blocks, distinct destinations from the second (request 4's in-place
  // shift among them), so no request reads what another writes.
  std::vector<int64_t> src, dst, shift;
  std::vector<int64_t> free_dst;
  for (int64_t b = requests; b < blocks; ++b) free_dst.push_back(b);
  std::shuffle(free_dst.begin(), free_dst.end(), rng());
  for (int64_t r = 0; r < requests; ++r) {
    dst.push_back(free_dst[(size_t)r]);
    src.push_back(r == 7 ? -1 : r == 4 ? dst.back() : pick(0, requests - 1));
    shift.push_back(r == 4 ? 1 : pick(0, 6));  // beyond 5 no conv row here keeps a byte
  }
  for (size_t r = 0; r < src.size(); ++r) {
    if (src[r] < 0) continue;
    for (const Pool& p : pools) {
      const int64_t max_shift = p.token_bytes ? (p.row_bytes - 1) / p.token_bytes : 0;
      if (p.token_bytes && shift[r] > max_shift) continue;
      const int64_t drop = p.token_bytes * shift[r];
      const int64_t from = p.at + src[r] * p.stride, to = p.at + dst[r] * p.stride;
      if (from != to) a.poison(to, p.stride);
      for (int64_t row = 0; row < p.rows; ++row)
        a.move(to + row * p.row_stride, from + row * p.row_stride + drop, p.row_bytes - drop);
    }
  }
  std::vector<int32_t> src32(src.begin(), src.end()), dst32(dst.begin(), dst.end()), shift32(shift.begin(), shift.end());
  const auto ids = [&](const std::vector<int64_t>& v64, const std::vector<int32_t>& v32) {
    return ids64 ? (const void*)v64.data() : (const void*)v32.data();
  };
  const xsc_sycl::CopyStatesArgs args{plan.data(),        (int64_t)pools.size(), ids(src, src32), ids(dst, dst32),
                                      ids(shift, shift32), ids64,                (int64_t)src.size()};
  xsc_sycl::testing::launch_copy_states(q, args, groups).wait_and_throw();
  a.check("copy_states_, " + std::to_string(requests) + " requests, " + (ids64 ? "int64" : "int32") + " ids, " +
              grid_name(groups), &failures);
}

}  // namespace

int main(int argc, char** argv) {
  sycl::queue q{sycl::cpu_selector_v, sycl::property::queue::in_order()};
  if (!kernels_with_loads_from(argc, argv, q)) return 1;
  std::printf("device: %s\n", q.get_device().get_info<sycl::info::device::name>().c_str());
  check_plan(q);
  for (size_t groups : kGrids) {
    every_batch_memcpy_schedule(q, groups);
    copy_states(q, 9, groups % 2 == 1, groups);   // fewer units than the grid has sub-groups
    copy_states(q, 41, groups % 2 == 0, groups);  // more, and rows past one sub-group's width
  }
  std::printf("launch grids: %d failed\n", failures);
  return failures ? 1 : 0;
}
