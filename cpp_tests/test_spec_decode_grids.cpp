// The spec-decode kernel (postprocess, postprocess with precomputed counts, precopy) on the OpenCL CPU
// device over the launch plan's grid and one to seven work-groups: every byte of fresh random pools with
// poisoned outputs, and the accepted-token counts, against a host reference written from the rules at the
// top of csrc/core/spec_decode_source.h.
#include <algorithm>

#include "grid_arena.h"
#include "spec_decode_source.h"

namespace {

using namespace xsc_grid_test;

int failures = 0;

// A state pool: blocks `stride` bytes apart, `rows` rows of `row_bytes` per block, `token_bytes` dropped per
// token of bias (0: a whole-block state), its blocks named by block table `table`.
struct Pool {
  int64_t stride, rows, row_stride, row_bytes, token_bytes, table;
  int64_t at = 0;
};

constexpr int64_t kSlots = 40, kRows = 37, kColumns = 8, kBlockSize = 4, kTables = 2;
constexpr int64_t kBlocks = kSlots * kColumns;  // each table row names blocks of its own

void run(sycl::queue& q, int mode, bool by_slot, bool counts, bool copy_rest, size_t groups) {
  std::vector<Pool> pools = {{704, 1, 0, 700, 0, 0}, {480, 1, 0, 480, 160, 1}, {20 * 16, 20, 16, 12, 2, 0},
                             {12288, 1, 0, 12003, 0, 1}};
  int64_t end = 0;
  for (Pool& p : pools) {
    p.at = end + pick(0, 3) * 16;
    end = p.at + kBlocks * p.stride + 64;
  }
  Arena a((size_t)end);
  // Block tables: row t holds blocks t * kColumns ... in some order, one of them outside the pool.
  std::vector<std::vector<int>> tables(kTables, std::vector<int>((size_t)(kSlots * kColumns)));
  for (std::vector<int>& t : tables) {
    for (int64_t row = 0; row < kSlots; ++row) {
      auto first = t.begin() + row * kColumns;
      for (int64_t c = 0; c < kColumns; ++c) first[c] = (int)(row * kColumns + c);
      std::shuffle(first, first + kColumns, rng());
    }
    t[(size_t)pick(0, kSlots * kColumns - 1)] = (int)kBlocks + 3;
  }
  // Per-request inputs: a permutation of the slots with one row skipped.
  std::vector<int> idx(kSlots), state_idx(kSlots), accepted(kSlots), computed(kSlots), scheduled(kSlots),
      drafts(kSlots);
  for (int s = 0; s < kSlots; ++s) idx[(size_t)s] = s;
  std::shuffle(idx.begin(), idx.end(), rng());
  idx[(size_t)pick(0, kRows - 1)] = -1;
  for (int s = 0; s < kSlots; ++s) {
    state_idx[(size_t)s] = (int)pick(0, kColumns - 1);
    scheduled[(size_t)s] = (int)pick(1, 5);
    drafts[(size_t)s] = (int)pick(0, scheduled[(size_t)s] - 1);
    const int64_t running = pick(1, kColumns * kBlockSize);
    accepted[(size_t)s] = (int)(mode == xsc::kSpecPrecopy ? pick(-1, 5) : pick(1, 5));
    computed[(size_t)s] = (int)(mode == xsc::kSpecPrecopy ? pick(-1, kColumns - 1)
                                : mode == xsc::kSpecPostprocess ? running - scheduled[(size_t)s] + drafts[(size_t)s]
                                                                : running + accepted[(size_t)s] - 1);
  }
  std::vector<int> out(kSlots, -7), expect_out(out);
  // The reference: each row's decision, then its copies (no row reads a block another row writes).
  for (int64_t r = 0; r < kRows; ++r) {
    const int64_t slot = idx[(size_t)r];
    if (slot < 0) continue;
    const size_t s = (size_t)slot;
    int64_t src_col, dst_col, bias;
    bool copy = true;
    if (mode == xsc::kSpecPrecopy) {
      src_col = computed[s], dst_col = state_idx[s], bias = accepted[s];
      copy = src_col >= 0 && src_col != dst_col && bias >= 0;
    } else {
      const int64_t fresh = mode == xsc::kSpecPostprocess ? computed[s] + scheduled[s] - drafts[s] + accepted[s] - 1
                                                          : computed[s];
      const int64_t running = fresh - accepted[s] + 1, aligned = fresh / kBlockSize * kBlockSize;
      if (aligned < running) {
        if (copy_rest) expect_out[s] = accepted[s];
        continue;
      }
      src_col = state_idx[s], dst_col = aligned / kBlockSize - 1, bias = aligned - running;
      const bool reset = src_col == dst_col;
      expect_out[s] = reset ? 1 : copy_rest ? accepted[s] : -7;
      copy = !(reset && bias == 0);
    }
    if (!copy) continue;
    const int64_t table_row = by_slot ? slot : r;
    for (const Pool& p : pools) {
      const std::vector<int>& t = tables[(size_t)p.table];
      const int64_t from_col = p.token_bytes ? src_col : src_col + bias;
      if (from_col < 0 || from_col >= kColumns || dst_col < 0 || dst_col >= kColumns) continue;
      const int64_t from_block = t[(size_t)(table_row * kColumns + from_col)];
      const int64_t to_block = t[(size_t)(table_row * kColumns + dst_col)];
      const int64_t drop = p.token_bytes * bias;
      if (from_block >= kBlocks || to_block >= kBlocks || drop >= std::max<int64_t>(p.row_bytes, 1)) continue;
      const int64_t from = p.at + from_block * p.stride, to = p.at + to_block * p.stride;
      if (from == to && drop == 0) continue;
      if (from != to) a.poison(to, p.stride);
      for (int64_t row = 0; row < p.rows; ++row)
        a.move(to + row * p.row_stride, from + row * p.row_stride + drop, p.row_bytes - drop);
    }
  }
  // The plan: each state's fields, its table's, and the running unit bounds.
  const int64_t states = (int64_t)pools.size();
  std::vector<int64_t> plan((size_t)(states * xsc::kSpecStateFields + kTables * xsc::kSpecTableFields));
  int64_t units = 0;
  for (int64_t j = 0; j < states; ++j) {
    const Pool& p = pools[(size_t)j];
    int64_t* f = plan.data() + j * xsc::kSpecStateFields;
    units += xsc::units_of(p.rows, p.row_bytes);
    const int64_t fields[] = {(int64_t)a.address(p.at), p.stride, kBlocks, p.rows, p.row_stride, p.row_bytes,
                              p.token_bytes, xsc::max_shift_of(p.row_bytes, p.token_bytes), p.table, units,
                              (int64_t)(uintptr_t)tables[(size_t)p.table].data(), kSlots, kColumns, kColumns};
    std::copy(std::begin(fields), std::end(fields), f);
  }
  for (int64_t t = 0; t < kTables; ++t) {
    const int64_t fields[] = {(int64_t)(uintptr_t)tables[(size_t)t].data(), kSlots, kColumns, kColumns};
    std::copy(std::begin(fields), std::end(fields), plan.begin() + states * xsc::kSpecStateFields + t * xsc::kSpecTableFields);
  }
  const xsc::SpecDecodeSource source{reinterpret_cast<const xsc::i64*>(plan.data()), states, kTables, mode,
                                     by_slot ? 1 : 0, kRows,            kSlots,           kBlockSize,
                                     units,           idx.data(),       state_idx.data(), accepted.data(),
                                     computed.data(), scheduled.data(), drafts.data()};
  xsc_sycl::testing::launch_spec_decode(q, source, counts ? out.data() : nullptr, copy_rest, groups).wait_and_throw();
  const std::string what = "spec-decode mode " + std::to_string(mode) + (by_slot ? ", rows by slot" : "") +
                           (copy_rest ? ", copy_rest" : "") + ", " + grid_name(groups);
  a.check(what, &failures);
  if (counts && out != expect_out) {
    std::printf("FAIL %s: accepted-token counts differ\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  sycl::queue q{sycl::cpu_selector_v, sycl::property::queue::in_order()};
  if (!kernels_with_loads_from(argc, argv, q)) return 1;
  int cases = 0;
  for (size_t groups : kGrids)
    for (int mode : {xsc::kSpecPostprocess, xsc::kSpecPostprocessPrecomputed, xsc::kSpecPrecopy})
      for (int variant = 0; variant < 2; ++variant, ++cases)
        run(q, mode, variant == 1, mode != xsc::kSpecPrecopy, variant == (int)(groups % 2), groups);
  std::printf("spec-decode grids: %d of %d cases failed\n", failures, cases);
  return failures ? 1 : 0;
}
