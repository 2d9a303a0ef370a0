// The tile schedule (run_tiles, csrc/core/batch_schedule.h) on the host, in both builds, over many grid
// shapes and batch sizes around the grid's sub-group count, where the direct build's pass changes: none
// below three quarters of it, the first kDirectUnits units of each entry up to it, the first unit above
// (the plain tile build: the first unit from the count on). Host threads play the work-items of one group,
// the groups run one after another (they share nothing but the batch), and each case checks every byte
// against a memmove reference. Built with the real 8 KiB units and with 96-byte ones.
#include <cstdio>

#include "host_group.h"

namespace {

using namespace xsc_test;

template <bool Spread, bool Direct>
bool run_case(int c) {
  const int lanes = 1 << pick(0, 4);
  const i64 sgs = pick(1, 6);
  const i64 groups = pick(1, 24);
  const i64 subgroups = groups * sgs;
  // Around the direct pass's bounds (3/4 and 1 x the sub-groups), and now and then anywhere up to 3 x.
  const i64 n = pick(0, 3) ? pick(1 + subgroups / 2, subgroups + 2) : pick(1, 3 * subgroups + 8);
  const bool small_units = kChunkBytes < 1024;
  HostBatch batch(n, kDirectUnits + 1, small_units ? 12 : 4);

  const std::vector<i64> extra = random_extra_units(n);
  const SpanList<Spread> source{&batch.spans, &extra};
  run_groups(groups, sgs, lanes, [&](auto& g) { run_tiles<Direct>(g, source, n); });
  const i64 wrong = batch.first_wrong_entry();
  if (wrong < 0) return true;
  std::printf("case %d FAIL (%s scan, %s build): %d lanes x %lld sub-groups x %lld groups, %lld entries (%llu"
              " direct units each): entry %lld differs\n", c, Spread ? "spread" : "packed", Direct ? "direct" : "tile",
              lanes, (long long)sgs, (long long)groups, (long long)n,
              (unsigned long long)(Direct ? direct_units(n, subgroups) : n >= subgroups), (long long)wrong);
  return false;
}

}  // namespace

int main() {
  int failures = 0;
  const int cases = kChunkBytes > 1024 ? 60 : 200;  // real-size units make big arenas
  for (int c = 0; c < cases; ++c) {
    switch (c % 4) {
      case 0: failures += !run_case<false, true>(c); break;
      case 1: failures += !run_case<true, true>(c); break;
      case 2: failures += !run_case<false, false>(c); break;
      default: failures += !run_case<true, false>(c);
    }
  }
  std::printf("tile schedule, %lld-byte units: %d of %d cases wrong\n", (long long)kChunkBytes, failures, cases);
  return failures ? 1 : 0;
}
