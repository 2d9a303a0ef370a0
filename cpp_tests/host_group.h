// Host stand-ins for the GPU side of the schedule tests (test_tile_schedule.cpp, test_row_schedule.cpp):
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

#include "schedule.h"

#ifndef XSC_ALIGNED_LOADS
#define XSC_ALIGNED_LOADS 4  // or 8, as the device policy gives (CMakeLists.txt builds both)
#endif

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
  HostGroup(u32 sgs, int lanes) : lanes(lanes), all(sgs * lanes) {
    for (u32 s = 0; s < sgs; ++s) subgroups.push_back(std::make_unique<Collective>(lanes));
  }
  int lanes;
  Collective all;
  std::vector<std::unique_ptr<Collective>> subgroups;
};

// The Group adapter of the kernel body for lane `lane` of sub-group `sg` of group `group`.
struct HostLane {
  static constexpr int kAlignedLoads = XSC_ALIGNED_LOADS;
  HostGroup* host;
  Collective* sub;  // the collective of the sub-group it plays
  u32 groups, sgs, group, sg, lane;
  u32* local;

  u32 group_id() const { return group; }
  u32 num_groups() const { return groups; }
  u32 num_sgs() const { return sgs; }
  u32 sg_id() const { return sg; }
  u32 sg_size() const { return (u32)host->lanes; }
  u32 sg_lane() const { return lane; }
  u32 local_id() const { return sg * (u32)host->lanes + lane; }
  u32 local_size() const { return sgs * (u32)host->lanes; }
  u32* table() const { return local; }
  void barrier() const { host->all.wait(); }
  void sg_barrier() const { sub->wait(); }
  u32 sg_shuffle(u32 v, u32 from) const { return (u32)sub->read(lane, v, from); }
  u32 sg_sum(u32 v) const {
    u32 total = 0;
    sg_exclusive_sum(v, &total);
    return total;
  }
  u32 sg_count(bool p) const { return sg_sum(p ? 1u : 0u); }
  u32 sg_exclusive_sum(u32 v, u32* total) const {
    i64 all = 0;
    const u32 before = (u32)sub->exclusive_scan(lane, v, &all);
    *total = (u32)all;
    return before;
  }
  u32 sg_min(u32 v) const {
    u32 m = v;
    for (u32 l = 0; l < sg_size(); ++l) {
      const u32 other = sg_shuffle(v, l);
      if (other < m) m = other;
    }
    return m;
  }
  u32 exclusive_scan(u32 v, u32* total) const {
    i64 all = 0;
    const u32 before = (u32)host->all.exclusive_scan(local_id(), v, &all);
    *total = (u32)all;
    return before;
  }
};

// Runs body(g) on every work-item of `groups` groups of `sgs` sub-groups of `lanes` work-items, a group at a
// time, each work-item a host thread; local memory as large as the kernels' table.
template <class Body>
void run_groups(u32 groups, u32 sgs, int lanes, const Body& body) {
  HostGroup host(sgs, lanes);
  std::vector<u32> local((size_t)kTableEntries, ~0u);
  std::vector<std::thread> threads;
  for (u32 t = 0; t < sgs * (u32)lanes; ++t)
    threads.emplace_back([&, t] {
      const u32 sg = t / (u32)lanes, lane = t % (u32)lanes;
      for (u32 group = 0; group < groups; ++group) {
        body(HostLane{&host, host.subgroups[(size_t)sg].get(), groups, sgs, group, sg, lane, local.data()});
        host.all.wait();
      }
    });
  for (std::thread& t : threads) t.join();
}

// n random entries in one arena, each owning `room` bytes of it: plain copies at any offsets mod 16,
// overlapping shifts both ways, and (`strided`) strided rows, short and long. An entry is empty one time in
// five, else `common` units long or shorter half the time and up to `most` units the other half.
struct HostBatch {
  std::vector<unsigned char> arena, expect;
  std::vector<Span> spans;
  i64 room;

  HostBatch(i64 n, i64 common, i64 most, bool strided = true)
      : spans((size_t)n), room(2 * kChunkBytes * (most + 1) + 4096) {
    arena.resize((size_t)(n * room));
    for (auto& b : arena) b = (unsigned char)rng()();
    const u64 base = (u64)(uintptr_t)arena.data();
    for (i64 i = 0; i < n; ++i) {
      Span& s = spans[(size_t)i];
      const u64 at = base + (u64)(i * room);
      const i64 units = pick(0, 4) == 0 ? 0 : pick(1, pick(0, 1) ? common : most);
      const int kind = (int)pick(0, strided ? 9 : 7);  // 0-5 plain, 6-7 overlapping, 8-9 rows
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
