// The small-batch schedule (csrc/core/small_batch.h) on the host, over many grid shapes: the SYCL CPU device
// runs it on one grid only. Host threads play the lanes of one sub-group, the grid's sub-groups run one
// after another, and each case checks every byte of every destination (and that nothing else changed)
// against a memmove reference. Built twice: with the real 8 KiB units and with 96-byte units, so that small
// buffers already hold many units per entry.
#include <barrier>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "small_batch.h"

namespace {

using namespace xsc;

// One sub-group's lanes share this: the barrier and the values a collective combines.
struct SubgroupState {
  explicit SubgroupState(int lanes) : lanes(lanes), sync(lanes), values(lanes) {}
  int lanes;
  std::barrier<> sync;
  std::vector<i64> values;
};

// The Group adapter small_batch.h needs, for lane `lane` of sub-group `sg` of group `group`.
struct HostLane {
  static constexpr int kUnroll16 = kSmallUnroll16;  // as the kernels' small-batch builds
  static constexpr bool kShiftedShuffle = false;
  SubgroupState* sg_state;
  i64 groups, sgs, group, sg, lane;
  u64* local;

  i64 group_id() const { return group; }
  i64 num_groups() const { return groups; }
  i64 num_sgs() const { return sgs; }
  i64 sg_id() const { return sg; }
  i64 sg_size() const { return sg_state->lanes; }
  i64 sg_lane() const { return lane; }
  i64 local_size() const { return sgs * sg_state->lanes; }
  u64* scratch() const { return local; }
  void sg_barrier() const { sg_state->sync.arrive_and_wait(); }
  u64 sg_shuffle(u64 v, int from) const {
    sg_state->values[lane] = (i64)v;
    sg_barrier();
    const u64 r = (u64)sg_state->values[from];
    sg_barrier();  // values is rewritten by the next collective
    return r;
  }
  i64 sg_exclusive_scan(i64 v, i64* total) const {
    sg_state->values[lane] = v;
    sg_barrier();
    i64 before = 0, all = 0;
    for (i64 i = 0; i < sg_size(); ++i) {
      if (i < lane) before += sg_state->values[i];
      all += sg_state->values[i];
    }
    sg_barrier();  // values is rewritten by the next collective
    *total = all;
    return before;
  }
  i64 sg_sum(i64 v) const {
    i64 total = 0;
    sg_exclusive_scan(v, &total);
    return total;
  }
};

struct SpanList {
  const std::vector<Span>* spans;
  i64 count() const { return (i64)spans->size(); }
  Span span(i64 i) const { return (*spans)[i]; }
};

std::mt19937_64 rng(20261201);
i64 pick(i64 lo, i64 hi) { return lo + (i64)(rng() % (u64)(hi - lo + 1)); }

// One random batch on one random grid; returns whether every byte came out as memmove would have it.
bool run_case(int c) {
  const int lanes = 1 << pick(0, 5);
  const i64 sgs = pick(1, 8);
  const i64 n = pick(1, lanes * kItems);
  const i64 groups = (pick(n + 1, 3 * n + 40) + sgs - 1) / sgs;
  const i64 subgroups = groups * sgs;
  if (!small_batch_fits(n, lanes, subgroups)) return true;  // n >= subgroups: the tile schedule's case
  const i64 per_entry = subgroups / n;
  // Entry i owns arena bytes [i * room, (i + 1) * room): source, then destination, or one shifted range.
  const i64 most_units = 2 * per_entry + 2;
  const i64 room = 2 * kChunkBytes * (most_units + 1) + 4096;
  std::vector<unsigned char> arena((size_t)(n * room)), expect;
  for (auto& b : arena) b = (unsigned char)rng();
  std::vector<Span> spans((size_t)n);
  const u64 base = (u64)(uintptr_t)arena.data();
  for (i64 i = 0; i < n; ++i) {
    Span& s = spans[(size_t)i];
    const u64 at = base + (u64)(i * room);
    const i64 units = pick(0, 4) == 0 ? 0 : pick(1, pick(0, 1) ? per_entry + 1 : most_units);
    const int kind = (int)pick(0, 9);  // 0-5 plain, 6-7 overlapping, 8-9 rows
    s.rows = 1;
    s.src_stride = s.dst_stride = 0;
    s.row_bytes = units == 0 ? 0 : (units - 1) * kChunkBytes + pick(1, kChunkBytes);
    if (kind < 6) {
      s.src = at + (u64)pick(0, 15);
      s.dst = at + (u64)(room / 2) + (u64)pick(0, 15);
    } else if (kind < 8) {
      const u64 shift = (u64)pick(1, 40);
      const bool left = pick(0, 1);
      s.src = left ? at + shift : at;
      s.dst = left ? at : at + shift;
    } else {
      s.row_bytes = pick(0, 1) ? pick(1, 255) : pick(256, 256 + kChunkBytes);
      s.rows = pick(2, (room / 2 - 16) / (s.row_bytes + 8));
      s.src_stride = (u64)(s.row_bytes + pick(0, 7));
      s.dst_stride = (u64)(s.row_bytes + pick(0, 7));
      s.src = at;
      s.dst = at + (u64)(room / 2);
    }
  }
  expect = arena;
  for (const Span& s : spans)
    for (i64 r = 0; r < s.rows; ++r)
      std::memmove(expect.data() + (s.dst + (u64)r * s.dst_stride - base),
                   expect.data() + (s.src + (u64)r * s.src_stride - base), (size_t)s.row_bytes);

  SubgroupState state(lanes);
  std::vector<std::vector<u64>> local((size_t)groups, std::vector<u64>((size_t)(sgs * lanes * kItems), ~0ull));
  const SpanList source{&spans};
  std::vector<std::thread> threads;
  for (int lane = 0; lane < lanes; ++lane)
    threads.emplace_back([&, lane] {
      for (i64 w = 0; w < subgroups; ++w) {  // sub-groups one after another: none waits for another
        HostLane g{&state, groups, sgs, w / sgs, w % sgs, lane, local[(size_t)(w / sgs)].data()};
        run_small_batch(g, source, n);
        state.sync.arrive_and_wait();
      }
    });
  for (std::thread& t : threads) t.join();
  if (arena == expect) return true;
  size_t first = 0;
  while (arena[first] == expect[first]) ++first;
  std::printf("case %d FAIL: %d lanes, %lld sub-groups, %lld entries: byte %zu (entry %lld) differs\n", c, lanes,
              (long long)subgroups, (long long)n, first, (long long)(first / (size_t)room));
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
