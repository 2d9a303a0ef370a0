// The spec-decode launch's own schedule (run_large_batch for SpecDecodeRecordSource,
// csrc/core/spec_decode_schedule.h) on the host, over many grid shapes: every byte of every span the source
// yields must be copied, once, and nothing else touched. Whole-block, token-shifted and row-by-row (DS)
// states in pools of their own, one or two block tables, rows that copy or not, block ids outside the
// table or the pool. Each request row's table row names blocks of its own, so no copy reads what another
// writes and the reference can apply the spans in any order. The decisions themselves are tested against
// vLLM's kernels elsewhere (tests/test_spec_decode.py); here the precopy mode gives each row its columns
// and bias directly. Half the cases claim their last units from a counter, which must end at 0. Built with
// the real 8 KiB units and with 96-byte ones.
#include <cstdio>

#include "host_group.h"
#include "spec_decode_schedule.h"

namespace {

using namespace xsc_test;

bool run_case(int c) {
  const int lanes = 1 << pick(0, 4);
  const i64 sgs = pick(1, 6), groups = pick(1, 12);
  const i64 tables = pick(1, 2), states = pick(1, 12), rows = pick(1, 40), columns = pick(2, 5);
  const i64 blocks = rows * columns;  // row r's table row names blocks r * columns .. (and some outside)
  const bool small_units = kChunkBytes < 1024;
  std::vector<std::vector<unsigned char>> pools((size_t)states);
  std::vector<i64> plan((size_t)(states * kSpecStateFields + tables * kSpecTableFields));
  std::vector<std::vector<int>> ids((size_t)tables, std::vector<int>((size_t)blocks));
  for (auto& t : ids)
    for (i64 r = 0; r < rows; ++r)
      for (i64 k = 0; k < columns; ++k) {
        const i64 pick_id = pick(0, 19);
        t[(size_t)(r * columns + k)] = (int)(pick_id == 0 ? -1 : pick_id == 1 ? blocks + pick(0, 3) : r * columns + k);
      }
  i64 before = 0;
  for (i64 j = 0; j < states; ++j) {
    i64* p = &plan[(size_t)(j * kSpecStateFields)];
    const int kind = (int)pick(0, 2);  // 0 whole block, 1 token-shifted conv, 2 row by row (DS)
    const i64 most = small_units ? 2000 : 40000;
    p[kSpecRows] = kind == 2 ? pick(2, 6) : 1;
    p[kSpecRowBytes] = pick(0, 9) == 0 ? 0 : pick(1, most / p[kSpecRows]);
    p[kSpecRowStride] = kind == 2 ? p[kSpecRowBytes] + pick(0, 9) : 0;
    p[kSpecTokenBytes] = kind == 0 ? 0 : kind == 1 ? pick(1, 64) : pick(1, 4);
    p[kSpecBlockStride] = (kind == 2 ? p[kSpecRows] * p[kSpecRowStride] : p[kSpecRowBytes]) + pick(0, 40);
    p[kSpecBlocks] = blocks;
    p[kSpecMaxShift] = max_shift_of(p[kSpecRowBytes], p[kSpecTokenBytes]);
    p[kSpecGroup] = pick(0, tables - 1);
    p[kSpecUnitsBefore] = before;
    before += units_of(p[kSpecRows], p[kSpecRowBytes]);
    pools[(size_t)j].resize((size_t)(blocks * p[kSpecBlockStride] + 64));
    for (auto& b : pools[(size_t)j]) b = (unsigned char)rng()();
    p[kSpecBase] = (i64)(uintptr_t)pools[(size_t)j].data();
    i64* t = p + kSpecTableBase;
    t[kTableBase] = (i64)(uintptr_t)ids[(size_t)p[kSpecGroup]].data();
    t[kTableRows] = rows, t[kTableColumns] = columns, t[kTableRowStride] = columns;
  }
  for (i64 t = 0; t < tables; ++t) {
    i64* f = &plan[(size_t)(states * kSpecStateFields + t * kSpecTableFields)];
    f[kTableBase] = (i64)(uintptr_t)ids[(size_t)t].data();
    f[kTableRows] = rows, f[kTableColumns] = columns, f[kTableRowStride] = columns;
  }
  std::vector<int> dst_cols((size_t)rows), src_cols((size_t)rows), bias((size_t)rows);
  for (i64 r = 0; r < rows; ++r) {
    src_cols[(size_t)r] = (int)pick(-1, columns - 1);
    dst_cols[(size_t)r] = (int)pick(0, columns - 1);
    bias[(size_t)r] = (int)pick(0, 3);
  }
  SpecDecodeSource source;
  std::memset(&source, 0, sizeof source);
  source.plan = plan.data(), source.states = states, source.tables = tables, source.mode = kSpecPrecopy;
  source.table_row_by_slot = 0, source.rows = rows, source.slots = rows, source.row_units = before;
  source.state_idx = dst_cols.data(), source.computed = src_cols.data(), source.accepted = bias.data();
  // Half the cases claim their last units from a counter (which the launch must leave at 0), half deal
  // every unit out in advance.
  unsigned counter = 0;
  const bool claims = pick(0, 1);
  source.claims = claims ? &counter : nullptr;

  // The reference: every entry's span, from global memory, applied in turn.
  std::vector<std::vector<unsigned char>> expect = pools;
  for (i64 i = 0; i < source.count(); ++i) {
    const Span s = source.span(i);
    const i64 j = i % states;
    const u64 base = (u64)(uintptr_t)pools[(size_t)j].data();
    unsigned char* out = expect[(size_t)j].data();
    for (i64 r = 0; r < s.rows; ++r)
      std::memmove(out + (s.dst + (u64)r * s.dst_stride - base), out + (s.src + (u64)r * s.src_stride - base),
                   (size_t)s.row_bytes);
  }
  std::vector<SpecRowRecord> records((size_t)(rows * tables));
  std::vector<i64> plan_words((size_t)kSpecMaxPlanWords);
  const i64* plan_read = source.fill_local(0, 1, records.data(), plan_words.data());
  const SpecDecodeRecordSource from_records{source, records.data(), plan_read};

  run_groups(groups, sgs, lanes, [&](auto& g) { run_large_batch(g, from_records); });
  if (counter != 0) {
    std::printf("case %d FAIL: the claim counter was left at %u\n", c, counter);
    return false;
  }
  for (i64 j = 0; j < states; ++j) {
    if (pools[(size_t)j] == expect[(size_t)j]) continue;
    std::printf("case %d FAIL: %d lanes x %lld sub-groups x %lld groups, %lld rows x %lld states%s: state %lld "
                "differs\n", c, lanes, (long long)sgs, (long long)groups, (long long)rows, (long long)states,
                claims ? " (claims)" : "", (long long)j);
    return false;
  }
  return true;
}

}  // namespace

int main() {
  int failures = 0;
  const int cases = kChunkBytes > 1024 ? 60 : 200;
  for (int c = 0; c < cases; ++c) failures += !run_case(c);
  std::printf("spec-decode schedule, %lld-byte units: %d of %d cases wrong\n", (long long)kChunkBytes, failures,
              cases);
  return failures ? 1 : 0;
}
