// The copy_states_ spans of csrc/core/entry_sources.h (ids and shifts compared before they are multiplied) on
// the host, at the int32 / int64 limits: every span either lies inside its state's block (source and
// destination) or is empty. Shifts and block ids live on the device and are never checked on the host, so
// this is the only thing between a bad value and a write outside the state.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "entry_sources.h"

namespace {

using namespace xsc;

int failures = 0;

void expect(bool ok, const char* what, long long a, long long b) {
  if (!ok) {
    std::printf("FAILED: %s (%lld, %lld)\n", what, a, b);
    ++failures;
  }
}

constexpr i64 kMax = std::numeric_limits<i64>::max();
constexpr i64 kMin = std::numeric_limits<i64>::min();

void test_range_wraps() {
  expect(!range_wraps(0, 0), "range_wraps 0 + 0", 0, 0);
  expect(!range_wraps(~0ull - 15, 15), "range_wraps below the top", 15, 0);
  expect(range_wraps(~0ull - 15, 16), "range_wraps reaching 2**64", 16, 0);
  expect(range_wraps(~0ull, 1), "range_wraps at the top", 1, 0);
  expect(!range_wraps(1ull << 63, kMax), "range_wraps ending at 2**64 - 1", kMax, 0);
  expect(range_wraps((1ull << 63) + 1, kMax), "range_wraps reaching 2**64 from above half", kMax, 0);
}

// A pool of 4 blocks of 4 tokens x 4 floats (the case); the state is its first 3 blocks.
void test_state_spans_at_the_limits() {
  const u64 base = 1ull << 40;
  const i64 block = 4 * 4 * 4, blocks = 3;
  for (int kind = 1; kind <= 2; ++kind) {
    std::vector<i64> plan(plan_words(1));
    plan[kBase] = (i64)base;
    plan[kBlockStride] = block;
    plan[kBlocks] = blocks;
    plan[kRows] = kind == 1 ? 1 : 4;
    plan[kRowStride] = kind == 1 ? 0 : 16;
    plan[kRowBytes] = kind == 1 ? block : 16;
    plan[kTokenBytes] = kind == 1 ? 16 : 4;
    derive_plan_fields(plan.data(), 1);
    const i64 tb = plan[kTokenBytes];
    std::vector<i64> ids = {kMin, -2, -1, 0, 2, 3, (1ll << 31) - 1, 1ll << 62, kMax};
    std::vector<i64> shifts = {kMin, -1, 0, 1, 3, 4, 5, (1ll << 31) - 1, (1ll << 60) - 1, 1ll << 62, kMax};
    for (i64 wrap_to : {-64, -16, -4, 4, 16}) shifts.push_back((i64)((((unsigned __int128)1 << 64) + wrap_to) / tb));
    for (i64 sb : ids)
      for (i64 db : ids)
        for (i64 shift : shifts) {
          if (shift < 0 && shift != kMin && shift != -1) continue;
          const i64 s_ids[1] = {sb}, d_ids[1] = {db}, sh[1] = {shift};
          const StatePlanSource source{plan.data(), 1, s_ids, d_ids, sh, 1, 1};
          const RowOf row = source.row_of(0);
          const Span s = source.copies(row) ? source.span(row, 0) : Span{0, 0, 0, 0, 0, 0};
          // The schedule deals out the plan's bound; a span with more units would lose its last ones.
          expect(units_of(s.rows, s.row_bytes) <= source.units_per_row(), "units within the plan's bound", sb, shift);
          if (s.rows == 0 || s.row_bytes == 0) continue;  // empty: copies nothing
          const bool valid = sb >= 0 && sb < blocks && db >= 0 && db < blocks && shift >= 0;
          expect(valid, "a span for an invalid request", sb, shift);
          expect(s.row_bytes > 0 && s.row_bytes <= plan[kRowBytes], "row bytes", s.row_bytes, shift);
          const u64 last = (u64)(s.rows - 1) * s.src_stride;
          const u64 src_block = base + (u64)sb * block, dst_block = base + (u64)db * block;
          expect(s.src >= src_block && s.src + last + s.row_bytes <= src_block + block, "source inside its block",
                 sb, shift);
          expect(s.dst >= dst_block && s.dst + last + s.row_bytes <= dst_block + block,
                 "destination inside its block", db, shift);
        }
  }
}

}  // namespace

int main() {
  test_range_wraps();
  test_state_spans_at_the_limits();
  if (failures) return 1;
  std::printf("checked spans: all cases OK\n");
  return 0;
}
