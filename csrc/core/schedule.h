// Which sub-group copies which unit: the scheduling half of the kernel body (copy_routine.h says how a
// sub-group copies a unit). Each op's kernel runs one of the two schedules below over its source
// (entry_sources.h), with one copy_unit call in its loop.
//
// Units are dealt round-robin over every sub-group of the grid, in the order the entries come: unit k of
// the launch goes to sub-group k mod S (S sub-groups in all). A huge entry is then spread over the whole
// device, many small ones a few to each sub-group, and no sub-group copies more than one unit above any
// other. The grid is one resident grid (the launchers size it from the device), so every sub-group runs
// from launch to end.
//
// The Group adapter each backend supplies (SyclGroup, CudaGroup, the host tests' HostLane):
//   group_id, num_groups, local_id, local_size, sg_id, num_sgs, sg_lane, sg_size: u32 ids and counts;
//   barrier(), sg_barrier(); sg_shuffle(u32, lane); sg_count(bool), sg_min(u32): over the sub-group;
//   exclusive_scan(u32, u32* total): over the work-group; table(): local memory of kTableEntries u32;
//   kLoads: 16-byte loads in flight per work-item (copy_words.h).
#pragma once

#include "entry_sources.h"

namespace xsc {

// Entries each work-item counts per tile of the table schedule (a loop, not an array: nothing stays live),
// and the local memory a work-group of up to kMaxGroupSize work-items keeps their running unit totals in.
constexpr u32 kItems = 8;
constexpr u32 kMaxGroupSize = 256;
constexpr u32 kTableEntries = kMaxGroupSize * kItems;  // 8 KiB of u32

// The sub-group's global index and the sub-group count.
template <class G>
XSC_FN u32 subgroup_index(const G& g) { return g.group_id() * g.num_sgs() + g.sg_id(); }
template <class G>
XSC_FN u32 subgroup_count(const G& g) { return g.num_groups() * g.num_sgs(); }

// The first k >= 0 with k = w - phase (mod S): a sub-group's first unit of a stretch whose unit 0 goes to
// sub-group `phase`.
XSC_FN u32 first_of(u32 w, u32 phase, u32 S) { return w >= phase ? w - phase : w + S - phase; }

// The first of entries 0 .. n-1 whose running unit total ends(e) exceeds r (the totals never fall, and
// ends(n - 1) > r). Every lane of the sub-group calls it with the same r: each step the lanes probe one
// total each and count those at or below r, which narrows the range sg_size() times (1,152 entries take 3
// steps where a binary search takes 11, each a trip to memory the copy waits for).
template <class G, class Ends>
XSC_FN u32 find_entry(const G& g, const Ends& ends, u32 n, u32 r) {
  const u32 lanes = g.sg_size(), lane = g.sg_lane();
  u32 lo = 0, hi = n - 1;
  while (lo < hi) {
    const u32 step = (hi - lo + lanes - 1) / lanes;
    const u32 probe = lo + (lane + 1) * step - 1;
    lo += g.sg_count(probe < hi && ends(probe) <= r) * step;
    if (lo + step - 1 < hi) hi = lo + step - 1;
  }
  return lo;
}

// The table schedule (batch_memcpy): entries of any size. Per tile of local_size() * kItems entries, a group
// scan of their unit counts puts the running totals in local memory; each sub-group then copies its units of
// the tile, finding each one's entry there. Every group scans every tile (the tables are read from the
// cache), so no group waits for another and no counter in global memory is needed.
template <class G>
XSC_FN void run_tiles(const G& g, const PointerTableSource& src) {
  const i64 n = src.count();
  const u32 tile = g.local_size() * kItems, S = subgroup_count(g), w = subgroup_index(g);
  const u32 first = g.local_id() * kItems;
  u32* ends = g.table();
  u32 phase = 0;  // the sub-group that copies the tile's unit 0: (units of the tiles before) mod S
  for (i64 base = 0; base < n; base += tile) {
    const u32 tile_n = n - base < (i64)tile ? (u32)(n - base) : tile;
    // Unrolled by 4: a work-item's size loads go four at a time rather than one after another (by 8, the
    // 64-bit addresses of the loads spill on dg2, which emulates 64-bit integer arithmetic).
    u32 units = 0;
#pragma unroll 4
    for (u32 t = 0; t < kItems; ++t) units += first + t < tile_n ? src.units(base + first + t) : 0u;
    u32 total = 0;
    u32 end = g.exclusive_scan(units, &total);
#pragma unroll 4
    for (u32 t = 0; t < kItems; ++t) {
      // A second read, from the cache: no array of counts stays live across the scan.
      end += first + t < tile_n ? src.units(base + first + t) : 0u;
      if (first + t < tile_n) ends[first + t] = end;
    }
    g.barrier();
    for (u32 k = first_of(w, phase, S); k < total; k += S) {
      const u32 e = find_entry(g, [ends](u32 i) { return ends[i]; }, tile_n, k);
      copy_unit(g, src.span(base + e), k - (e > 0 ? ends[e - 1] : 0u));
    }
    g.barrier();  // the totals are rewritten for the next tile
    phase = (u32)(((u64)phase + total) % S);
  }
}

// The row schedule (copy_states_, spec-decode): rows of the same states. Unit v of a row lies in the state
// whose running unit bound passes v, read from the plan, so no scan is needed. Each sub-group walks the rows
// in order, sg_size() at a time: each work-item reads one row's inputs, and the rows that copy are taken in
// turn, their units numbered on from the copying rows before them (a row that copies nothing takes no unit:
// a spec-decode step where a few of many rows copy deals out only theirs). A unit past a state's actual
// units (a shifted conv state's last) copies nothing.
template <class G, class Source>
XSC_FN void run_rows(const G& g, const Source& src) {
  const i64 rows = src.row_count();
  const u32 per_row = src.units_per_row(), states = (u32)src.states;
  if (per_row == 0) return;
  const u32 S = subgroup_count(g), w = subgroup_index(g), lanes = g.sg_size(), lane = g.sg_lane();
  const u32 per_row_phase = per_row % S;
  u32 phase = 0;  // the sub-group that copies the next copying row's unit 0
  for (i64 base = 0; base < rows; base += lanes) {
    const bool mine_exists = base + lane < rows;
    const RowOf mine = mine_exists ? src.row_of(base + lane) : RowOf{-1, -1, -1, -1};
    const bool copies = mine_exists && src.copies(mine);
    for (u32 l = g.sg_min(copies ? lane : lanes); l < lanes; l = g.sg_min(copies && lane > l ? lane : lanes)) {
      const RowOf row{(int)g.sg_shuffle((u32)mine.a, l), (int)g.sg_shuffle((u32)mine.b, l),
                      (int)g.sg_shuffle((u32)mine.c, l), (int)g.sg_shuffle((u32)mine.d, l)};
      for (u32 k = first_of(w, phase, S); k < per_row; k += S) {
        const u32 j = find_entry(g, [&src](u32 i) { return src.units_end(i); }, states, k);
        copy_unit(g, src.span(row, j), k - (j > 0 ? src.units_end(j - 1) : 0u));
      }
      phase += per_row_phase;
      if (phase >= S) phase -= S;
    }
  }
}

}  // namespace xsc
