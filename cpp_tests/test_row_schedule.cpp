// The row schedule (run_rows, csrc/core/schedule.h) on the host, as copy_states_ and spec-decode run it:
// rows of states whose spans are random entries (plain, misaligned, overlapping shifts, strided rows short
// and long), some rows copying nothing, each state's unit bound at or above its spans' units (a shifted
// state copies fewer units than its bound). Many grid shapes; every byte is checked against a memmove
// reference of the rows that copy. Built with the real 8 KiB units and with 96-byte ones.
#include <algorithm>
#include <cstdio>

#include "host_group.h"

namespace {

using namespace xsc_test;

// Rows x states entries taken from a HostBatch; row r copies unless skip[r].
struct SpanGrid {
  const std::vector<Span>* spans;
  std::vector<u32> ends;  // running unit bounds per state
  std::vector<char> skip;
  i64 states;
  i64 rows;

  i64 row_count() const { return rows; }
  u32 units_end(i64 j) const { return ends[(size_t)j]; }
  u32 units_per_row() const { return ends.back(); }
  RowOf row_of(i64 r) const { return RowOf{(int)r, skip[(size_t)r] ? -1 : 0, 0, 0}; }
  bool copies(const RowOf& row) const { return row.b >= 0; }
  Span span(const RowOf& row, i64 j) const { return (*spans)[(size_t)(row.a * states + j)]; }
};

bool run_case(int c) {
  const int lanes = 1 << pick(0, 4);
  const u32 sgs = (u32)pick(1, 4), groups = (u32)pick(1, 12);
  const i64 states = pick(1, 9), rows = pick(1, 40);
  HostBatch batch(states * rows, 2, kChunkBytes < 1024 ? 12 : 4);
  SpanGrid grid{&batch.spans, {}, std::vector<char>((size_t)rows), states, rows};
  for (char& s : grid.skip) s = pick(0, 3) == 0;
  u32 end = 0;
  for (i64 j = 0; j < states; ++j) {
    u32 most = 0;
    for (i64 r = 0; r < rows; ++r) {
      const Span& s = batch.spans[(size_t)(r * states + j)];
      most = std::max(most, units_of(s.rows, s.row_bytes));
    }
    end += most + (u32)(pick(0, 2) == 0 ? pick(1, 2) : 0);
    grid.ends.push_back(end);
  }
  // The reference copied every entry; undo the rows that copy nothing.
  for (i64 r = 0; r < rows; ++r)
    if (grid.skip[(size_t)r])
      for (i64 j = 0; j < states; ++j) {
        const i64 at = (r * states + j) * batch.room;
        std::copy(batch.arena.begin() + at, batch.arena.begin() + at + batch.room, batch.expect.begin() + at);
      }
  if (end > 0) run_groups(groups, sgs, lanes, [&](const auto& g) { run_rows(g, grid); });
  const i64 wrong = batch.first_wrong_entry();
  if (wrong < 0) return true;
  std::printf("case %d FAIL: %d lanes x %u sub-groups x %u groups, %lld rows x %lld states: entry %lld differs\n",
              c, lanes, sgs, groups, (long long)rows, (long long)states, (long long)wrong);
  return false;
}

}  // namespace

int main() {
  int failures = 0;
  const int cases = kChunkBytes > 1024 ? 15 : 80;
  for (int c = 0; c < cases; ++c) failures += !run_case(c);
  std::printf("row schedule, %d-byte units: %d of %d cases wrong\n", kChunkBytes, failures, cases);
  return failures ? 1 : 0;
}
