// The table schedule (run_tiles, csrc/core/schedule.h) on the host, as batch_memcpy's kernel runs it: random
// batches of plain, misaligned and overlapping entries given as pointer tables (int32 and int64 sizes), over
// many grid shapes and batch sizes from one entry to several tiles. Host threads play the work-items of one
// group, the groups run one after another (they share nothing but the batch), and each case checks every
// byte against a memmove reference. Built with the real 8 KiB units and with 96-byte ones.
#include <cstdio>

#include "host_group.h"

namespace {

using namespace xsc_test;

bool run_case(int c) {
  const int lanes = 1 << pick(0, 4);
  const u32 sgs = (u32)pick(1, 4), groups = (u32)pick(1, 12);
  const u32 tile = sgs * (u32)lanes * kItems;
  const i64 n = pick(0, 2) ? pick(1, 3 * tile + 5) : pick(1, 8);
  HostBatch batch(n, 2, kChunkBytes < 1024 ? 12 : 4, false);
  std::vector<u64> src((size_t)n), dst((size_t)n);
  std::vector<i64> sizes64((size_t)n);
  std::vector<int> sizes32((size_t)n);
  for (i64 i = 0; i < n; ++i) {
    const Span& s = batch.spans[(size_t)i];
    src[(size_t)i] = s.src;
    dst[(size_t)i] = s.dst;
    sizes64[(size_t)i] = s.row_bytes;
    sizes32[(size_t)i] = (int)s.row_bytes;
  }
  const bool wide = pick(0, 1);
  const PointerTableSource source{src.data(), dst.data(), wide ? (const void*)sizes64.data() : sizes32.data(),
                                  wide ? 1 : 0, n};
  run_groups(groups, sgs, lanes, [&](const auto& g) { run_tiles(g, source); });
  const i64 wrong = batch.first_wrong_entry();
  if (wrong < 0) return true;
  std::printf("case %d FAIL: %d lanes x %u sub-groups x %u groups, %lld entries: entry %lld differs\n", c, lanes,
              sgs, groups, (long long)n, (long long)wrong);
  return false;
}

}  // namespace

int main() {
  int failures = 0;
  const int cases = kChunkBytes > 1024 ? 20 : 80;  // real-size units make big arenas
  for (int c = 0; c < cases; ++c) failures += !run_case(c);
  std::printf("table schedule, %d-byte units: %d of %d cases wrong\n", kChunkBytes, failures, cases);
  return failures ? 1 : 0;
}
