// Host stand-ins for the GPU side of the schedule tests (test_small_schedule.cpp, test_tile_schedule.cpp):
// host threads play the work-items of a group, a Group adapter gives the kernel body its barriers and
// collectives over them, and a random batch of spans in one arena comes with the bytes a memmove reference
// leaves there, so that a test checks every byte (and that nothing else changed).
#pragma once

#include <barrier>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "batch_schedule.h"

namespace xsc_test {

using namespace xsc;

inline std::mt19937_64& rng() {
  static std::mt19937_64 r(20261201);
  return r;
}
inline i64 pick(i64 lo, i64 hi) { return lo + (i64)(rng()() % (u64)(hi - lo + 1)); }

// What the work-items of one collective share: its barrier and the values it combines.
struct Collective {
  explicit Collective(i64 items) : sync((std::ptrdiff_t)items), values((size_t)items) {}
  std::barrier<> sync;
  std::vector<i64> values;

  void wait() { sync.arrive_and_wait(); }
  // Work-item `me`'s v among all: the sum of those before it, and of all.
  i64 exclusive_scan(i64 me, i64 v, i64* total) {
    values[(size_t)me] = v;
    wait();
    i64 before = 0, all = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if ((i64)i < me) before += values[i];
      all += values[i];
    }
    wait();  // values is rewritten by the next collective
    *total = all;
    return before;
  }
  u64 read(i64 me, u64 v, i64 from) {
    values[(size_t)me] = (i64)v;
    wait();
    const u64 r = (u64)values[(size_t)from];
    wait();
    return r;
  }
};

// A group of `sgs` sub-groups of `lanes` work-items: one collective for each sub-group and one for all.
struct HostGroup {
  HostGroup(i64 sgs, int lanes) : lanes(lanes), all(sgs * lanes) {
    for (i64 s = 0; s < sgs; ++s) subgroups.push_back(std::make_unique<Collective>(lanes));
  }
  int lanes;
  Collective all;
  std::vector<std::unique_ptr<Collective>> subgroups;
};

// The Group adapter of the kernel body for lane `lane` of sub-group `sg` of group `group`. Unroll16 and
// Shuffled as the kernel builds pick them (shifted_copy.h).
template <int Unroll16, bool Shuffled>
struct HostLane {
  static constexpr int kUnroll16 = Unroll16;
  static constexpr bool kShiftedShuffle = Shuffled;
  HostGroup* host;
  Collective* sub;  // the collective of the sub-group it plays
  i64 groups, sgs, group, sg, lane;
  u64* local;

  Collective& mine() const { return *sub; }
  i64 group_id() const { return group; }
  i64 num_groups() const { return groups; }
  i64 num_sgs() const { return sgs; }
  i64 sg_id() const { return sg; }
  i64 sg_size() const { return host->lanes; }
  i64 sg_lane() const { return lane; }
  i64 local_id() const { return sg * host->lanes + lane; }
  i64 local_size() const { return sgs * host->lanes; }
  u64* scratch() const { return local; }
  unsigned atomic_inc(unsigned* p) const { return __atomic_fetch_add(p, 1u, __ATOMIC_RELAXED); }
  void atomic_clear(unsigned* p) const { __atomic_store_n(p, 0u, __ATOMIC_RELAXED); }
  void prefetch_line(const void*) const {}
  void barrier() const { host->all.wait(); }
  void sg_barrier() const { mine().wait(); }
  u64 sg_shuffle(u64 v, int from) const { return mine().read(lane, v, from); }
  i64 sg_exclusive_scan(i64 v, i64* total) const { return mine().exclusive_scan(lane, v, total); }
  i64 sg_sum(i64 v) const {
    i64 total = 0;
    sg_exclusive_scan(v, &total);
    return total;
  }
  i64 sg_count(bool p) const { return sg_sum(p ? 1 : 0); }
  i64 exclusive_scan(i64 v, i64* total) const { return host->all.exclusive_scan(local_id(), v, total); }
  bool any(bool p) const {
    i64 total = 0;
    exclusive_scan(p ? 1 : 0, &total);
    return total > 0;
  }
};

// Runs body(g) on every work-item of `groups` groups of `sgs` sub-groups of `lanes` work-items, a group at a
// time, each work-item a host thread with the tile builds' adapter; local memory as large as the kernels'
// tables (kMaxGroupSize x kItems values, whatever the group's width).
template <class Body>
void run_groups(i64 groups, i64 sgs, int lanes, const Body& body) {
  HostGroup host(sgs, lanes);
  std::vector<u64> local((size_t)(kMaxGroupSize * kItems), ~0ull);
  std::vector<std::thread> threads;
  for (i64 t = 0; t < sgs * lanes; ++t)
    threads.emplace_back([&, t] {
      const i64 sg = t / lanes, lane = t % lanes;
      for (i64 group = 0; group < groups; ++group) {
        HostLane<kUnroll, true> g{&host, host.subgroups[(size_t)sg].get(), groups, sgs, group, sg, lane,
                                  local.data()};
        body(g);
        host.all.wait();
      }
    });
  for (std::thread& t : threads) t.join();
}

// A batch given as spans, the way the computed sources (copy_states, spec-decode) are read: with
// Spread, as those are (each span worked out whole, spread thin in a short tile); without, as pointer
// tables are. `extra`, where given, adds units to each entry's unit_bound, as copy_states' bounds do for a
// shifted state's units (or for one whose block ids leave nothing to copy).
template <bool Spread>
struct SpanList {
  const std::vector<Span>* spans;
  const std::vector<i64>* extra = nullptr;
  static constexpr bool kSpreadScan = Spread;
  i64 count() const { return (i64)spans->size(); }
  Span span(i64 i) const { return (*spans)[(size_t)i]; }
  template <class G>
  void prefetch(const G&, i64) const {}
  i64 size_word(i64 i) const { return i; }
  i64 units_of_word(i64 i) const { return units_of(span(i).rows, span(i).row_bytes); }
  static constexpr bool kUnitBound = true;  // as copy_states' source
  i64 unit_bound(i64 i) const { return units_of_word(i) + (extra ? (*extra)[(size_t)i] : 0); }
};

// Units a bound adds to each of n entries: none half the time, else 0 - 2 each.
inline std::vector<i64> random_extra_units(i64 n) {
  std::vector<i64> extra((size_t)n, 0);
  if (pick(0, 1))
    for (i64& e : extra) e = pick(0, 2);
  return extra;
}

// n random entries in one arena, each owning `room` bytes of it: plain copies at any offsets mod 16,
// overlapping shifts both ways, and strided rows. An entry is empty one time in five, else `common` units
// long or shorter half the time and up to `most` units the other half.
struct HostBatch {
  std::vector<unsigned char> arena, expect;
  std::vector<Span> spans;
  i64 room;

  HostBatch(i64 n, i64 common, i64 most) : spans((size_t)n), room(2 * kChunkBytes * (most + 1) + 4096) {
    arena.resize((size_t)(n * room));
    for (auto& b : arena) b = (unsigned char)rng()();
    const u64 base = (u64)(uintptr_t)arena.data();
    for (i64 i = 0; i < n; ++i) {
      Span& s = spans[(size_t)i];
      const u64 at = base + (u64)(i * room);
      const i64 units = pick(0, 4) == 0 ? 0 : pick(1, pick(0, 1) ? common : most);
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
  }
  // The entry holding the first byte that differs from the reference, or -1.
  i64 first_wrong_entry() const {
    if (arena == expect) return -1;
    size_t first = 0;
    while (arena[first] == expect[first]) ++first;
    return (i64)(first / (size_t)room);
  }
};

}  // namespace xsc_test
