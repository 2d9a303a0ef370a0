// The small-batch schedule (csrc/core/small_batch.h) on the host, over many grid shapes: the SYCL CPU device
// runs it on one grid only. Host threads play the lanes of one sub-group, the grid's sub-groups run one
// after another (the schedule has no group barrier), and each case checks every byte of every destination
// (and that nothing else changed) against a memmove reference. Built twice: with the real 8 KiB units and
// with 96-byte units, so that small buffers already hold many units per entry.
#include <cstdio>
#include <thread>

#include "host_group.h"

namespace {

using namespace xsc_test;

// One random batch on one random grid; returns whether every byte came out as memmove would have it.
bool run_case(int c) {
  const int lanes = 1 << pick(0, 5);
  const i64 sgs = pick(1, 8);
  const i64 n = pick(1, lanes * kItems);
  const i64 groups = (pick(n + 1, 3 * n + 40) + sgs - 1) / sgs;
  const i64 subgroups = groups * sgs;
  if (!small_batch_fits(n, lanes, subgroups)) return true;  // n >= subgroups: the tile schedule's case
  const i64 per_entry = subgroups / n;
  HostBatch batch(n, per_entry + 1, 2 * per_entry + 2);

  HostGroup host(1, lanes);  // one sub-group's lanes at a time
  std::vector<std::vector<u64>> local((size_t)groups, std::vector<u64>((size_t)(sgs * lanes * kItems), ~0ull));
  const std::vector<i64> extra = random_extra_units(n);
  const SpanList<false> source{&batch.spans, &extra};
  std::vector<std::thread> threads;
  for (int lane = 0; lane < lanes; ++lane)
    threads.emplace_back([&, lane] {
      for (i64 w = 0; w < subgroups; ++w) {  // sub-groups one after another: none waits for another
        HostLane<kSmallUnroll16, false> g{&host, host.subgroups[0].get(), groups, sgs, w / sgs, w % sgs, lane,
                                          local[(size_t)(w / sgs)].data()};
        run_small_batch(g, source, n);
        host.all.wait();
      }
    });
  for (std::thread& t : threads) t.join();
  const i64 wrong = batch.first_wrong_entry();
  if (wrong < 0) return true;
  std::printf("case %d FAIL: %d lanes, %lld sub-groups, %lld entries: entry %lld differs\n", c, lanes,
              (long long)subgroups, (long long)n, (long long)wrong);
  return false;
}

}  // namespace

int main() {
  int failures = 0;
  const int cases = kChunkBytes > 1024 ? 100 : 300;  // real-size units make big arenas
  for (int c = 0; c < cases; ++c) failures += !run_case(c);
  std::printf("small-batch schedule, %lld-byte units, %d parts: %d of %d cases wrong\n", (long long)kChunkBytes,
              kSmallParts, failures, cases);
  return failures ? 1 : 0;
}
