// Which sub-group copies which unit: the scheduling half of the kernel body (copy_routine.h says how a
// sub-group copies a unit). Each op's kernel runs one of the two schedules below over its source
// (entry_sources.h), with one copy_unit call in its loop.
//
// Units are dealt round-robin over every sub-group of the grid, in the order the entries come: unit k of
// the launch goes to sub-group k mod S (S sub-groups in all). A huge entry is then spread over the whole
// device, many small ones a few to each sub-group, and no sub-group copies more than one unit above any
// other. batch_memcpy deals each entry's first units by position first (its direct slots, below: T per
// sub-group) and only the rest round-robin, so a sub-group there may copy up to T + 1 units above another,
// though about as many as any other unless the entries' sizes repeat with the grid's size.
// The grid is one resident grid (the launchers size it from the device), so every sub-group runs from
// launch to end.
//
// The Group adapter each backend supplies (SyclGroup, CudaGroup, the host tests' HostLane):
//   group_id, num_groups, local_id, local_size, sg_id, num_sgs, sg_lane, sg_size: u32 ids and counts;
//   barrier(), sg_barrier(); sg_shuffle(u32, lane); sg_count(bool), sg_min(u32),
//   sg_exclusive_sum(u32, u32* total): over the sub-group;
//   exclusive_scan(u32, u32* total): over the work-group; table(): local memory of kTableEntries u32;
//   kAlignedLoads: 16-byte loads in flight per work-item from an aligned source (copy_words.h).
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

// Direct slots of the table schedule. Slot v (v = 0, 1, ...) is unit v / n of entry v mod n, and sub-group w
// of S holds slots w, w + S, ..., T of them: T * S slots in all, which deal every entry's first units out
// without reading any size but their own. A sub-group copies each of its slots that holds a unit before
// anything else, one trip to the tables each, rather than after a scan of every size and a lookup. Short
// batches have T = 1 (S / n slots an entry, or one more); longer ones T = ceil(2n / S), so that every entry
// has at least two, and a batch of entries of one or two units (thousands of 4 - 16 KiB entries) needs no
// scan at all to be copied. Only the units past an entry's slots go through a count.
struct DirectSlots {
  i64 n;
  u64 per, extra;  // entry e has per slots, one more if e < extra
  u32 T, w, S;

  template <class G>
  XSC_FN static DirectSlots of(const G& g, i64 n, bool short_batch) {
    const u32 S = subgroup_count(g);
    const u32 T = short_batch ? 1u : (u32)((2 * (u64)n + S - 1) / S);
    const u64 total = (u64)T * S;
    return DirectSlots{n, total / (u64)n, total % (u64)n, T, subgroup_index(g), S};
  }
  // The caller's slot t < T.
  XSC_FN void slot(u32 t, i64* entry, u32* unit) const {
    const u64 v = w + (u64)t * S;
    *entry = (i64)(v % (u64)n);
    *unit = (u32)(v / (u64)n);
  }
  XSC_FN u32 slots(i64 e) const { return (u32)(per + ((u64)e < extra ? 1u : 0u)); }
  XSC_FN u32 direct(i64 e, u32 units) const {
    const u32 s = slots(e);
    return units < s ? units : s;
  }
  // Of entry e's slots held by sub-groups before the caller, those that find a unit there (T = 1).
  XSC_FN u32 busy_before(u32 e, u32 units) const {
    const u32 q = w / (u32)n, mine = w % (u32)n;  // n <= kShortEntries
    const u32 before = q + (e < mine ? 1u : 0u);
    return before < units ? before : units;
  }
};

// Batches of at most this many entries (and at most sg_size() squared: a lane's stretch then fits in one
// pass of the sub-group) find the units after the direct ones by each sub-group alone: every lane counts
// ceil(n / sg_size()) entries, from the cache, and shuffles combine them. No group barrier, so a sub-group
// whose slot held no unit starts on the rest while its neighbours still copy.
constexpr u32 kShortEntries = 256;

// How positions 0 .. P-1 are dealt over S sub-groups: position c to rank c mod S, whole, except that the
// last round's L positions (when that leaves at least half the grid idle) are cut in 2 or 4 pieces (at most
// S / L), piece h to rank h: one request's step (4,824 units on 2,112 sub-groups: two rounds and 600 units)
// then ends after 2 1/2 units' time instead of 3, with 1,200 sub-groups copying to the end instead of 600.
struct Rounds {
  u32 whole_end;  // positions dealt whole
  u32 piece;      // the caller's piece of the last round: position << 4 | log2(parts) << 2 | part, or ~0u

  // For the sub-group of rank `rank`. `first_round`: whether the first round may be cut too (not where it
  // holds units already copied).
  XSC_FN static Rounds of(u32 positions, u32 S, u32 rank, bool first_round) {
    const u32 tail = positions % S, whole = positions - tail;
    const u32 log_parts = tail * 4 <= S ? 2u : tail * 2 <= S ? 1u : 0u;  // 2**log_parts * tail <= S
    if (tail == 0 || log_parts == 0 || (whole == 0 && !first_round) || positions >= 1u << 28)
      return Rounds{positions, ~0u};  // (positions past 2**28 do not fit a piece's code)
    if (rank >= tail << log_parts) return Rounds{whole, ~0u};
    return Rounds{whole, (whole + (rank >> log_parts)) << 4 | log_parts << 2 | (rank & ((1u << log_parts) - 1))};
  }
  // The position of the caller's piece (when piece != ~0u), and which part of how many it is.
  XSC_FN u32 piece_at(u32* part, u32* log_parts) const {
    *part = piece & 3u;
    *log_parts = (piece >> 2) & 3u;
    return piece >> 4;
  }
};

// The rest of a short batch (after the direct slots), as one sub-group sees it. Sub-groups are ranked
// idle-first (those whose slot held no unit, in order, then the others), and the rest is dealt as positions
// (Rounds): rank r holds position r of the first round (its direct unit, if it had one) and r + S, r + 2S,
// ... after it, so one request's step (72 entries on thousands of sub-groups) hands its first rest units to
// sub-groups that copied nothing yet. Each lane holds the rest units of its stretch of entries.
struct ShortRest {
  u32 per, before, mine;  // entries per lane; rest units of the lanes before; of this lane
  u32 total;              // rest units in all
  u32 busy;               // sub-groups whose slot held a unit: positions S - busy .. S - 1 of the first round
  u32 next;               // this sub-group's next position
  Rounds rounds;

  template <class G>
  XSC_FN static ShortRest of(const G& g, const PointerTableSource& src, const DirectSlots& slots, bool idle) {
    const u32 n = (u32)src.count(), lanes = g.sg_size(), per = (n + lanes - 1) / lanes;
    const u32 first = g.sg_lane() * per, S = subgroup_count(g);
    u32 mine = 0, busy_before = 0, busy = 0;
    for (u32 t = 0; t < per; ++t) {
      const u32 e = first + t, units = e < n ? src.units(e) : 0u, direct = slots.direct(e, units);
      mine += units - direct;
      busy += direct;
      busy_before += slots.busy_before(e, units);
    }
    ShortRest r{per, 0, mine, 0, 0, 0, Rounds{0, ~0u}};
    u32 busy_ahead = 0;  // sub-groups before this one whose slot holds a unit
    r.before = g.sg_exclusive_sum(mine, &r.total);
    g.sg_exclusive_sum(busy_before, &busy_ahead);
    g.sg_exclusive_sum(busy, &r.busy);
    const u32 w = subgroup_index(g), rank = idle ? w - busy_ahead : (S - r.busy) + busy_ahead;
    r.next = idle ? rank : rank + S;
    r.rounds = Rounds::of(r.total + r.busy, S, rank, false);
    return r;
  }
  // The entry, unit and piece of this sub-group's next position, if it has one left: the lane whose
  // stretch holds it is found from the lanes' running totals, then the lanes look at that stretch's entries
  // together.
  template <class G>
  XSC_FN bool take(const G& g, const PointerTableSource& src, const DirectSlots& slots, i64* entry, u32* unit,
                   u32* part, u32* log_parts) {
    const u32 S = subgroup_count(g);
    u32 c = next;
    if (next < rounds.whole_end) {
      next += S;
    } else if (rounds.piece == ~0u) {
      return false;
    } else {
      c = rounds.piece_at(part, log_parts);
      rounds.piece = ~0u;
    }
    const u32 k = c < S - busy ? c : c - busy;  // the rest unit at position c
    if (k >= total) return false;  // an idle rank of a first round with fewer rest units than idle ranks
    const u32 n = (u32)src.count(), lane = g.sg_lane();
    const u32 owner = g.sg_count(before + mine <= k);  // the lanes whose rest units all come before k
    const u32 e = owner * per + lane, units = lane < per && e < n ? src.units(e) : 0u;  // per <= lanes
    const u32 direct = slots.direct(e, units), rest = units - direct;
    u32 ignored = 0;
    const u32 ahead = g.sg_shuffle(before, owner) + g.sg_exclusive_sum(rest, &ignored);
    const u32 holder = g.sg_count(ahead + rest <= k);
    *entry = g.sg_shuffle(e, holder);
    *unit = g.sg_shuffle(direct + (k - ahead), holder);
    return true;
  }
};

// The rest of a longer batch, a tile of local_size() * kItems entries at a time: a group scan of their rest
// units puts the running totals in local memory, and each sub-group copies its units of the tile (unit k of
// the launch's rest goes to sub-group k mod S), finding each one's entry there. Every group scans every tile
// (the tables are read from the cache), so no group waits for another and no counter in global memory is
// needed. A tile with no rest units (every entry copied from its slots) costs one scan.
struct TileRest {
  i64 base;        // the tile's first entry; the next tile's once this one's units are taken
  u32 tile_n, total, next, phase;

  template <class G>
  XSC_FN bool take(const G& g, const PointerTableSource& src, const DirectSlots& slots, i64* entry, u32* unit) {
    const i64 n = src.count();
    const u32 tile = g.local_size() * kItems, S = subgroup_count(g), first = g.local_id() * kItems;
    u32* ends = g.table();
    while (next >= total) {
      if (tile_n > 0) {
        g.barrier();  // the totals are rewritten for the next tile
        base += tile_n;
        phase = (u32)(((u64)phase + total) % S);
      }
      if (base >= n) return false;
      tile_n = n - base < (i64)tile ? (u32)(n - base) : tile;
      // Unrolled by 4: a work-item's size loads go four at a time rather than one after another (by 8, the
      // 64-bit addresses of the loads spill on dg2, which emulates 64-bit integer arithmetic).
      u32 units = 0;
#pragma unroll 4
      for (u32 t = 0; t < kItems; ++t) units += first + t < tile_n ? rest_units(src, slots, base + first + t) : 0u;
      u32 end = g.exclusive_scan(units, &total);
      next = first_of(subgroup_index(g), phase, S);
      if (total == 0) continue;  // the same on every work-item: nothing to write or wait for
      // Not unrolled: its reads hit the cache, and unrolled by four it took 3.3 KB of the SPIR-V image.
#pragma unroll 1
      for (u32 t = 0; t < kItems; ++t) {
        // A second read, from the cache: no array of counts stays live across the scan.
        end += first + t < tile_n ? rest_units(src, slots, base + first + t) : 0u;
        if (first + t < tile_n) ends[first + t] = end;
      }
      g.barrier();
    }
    const u32 k = next;
    next += S;
    const u32 e = find_entry(g, [ends](u32 i) { return ends[i]; }, tile_n, k);
    *entry = base + e;
    *unit = slots.direct(base + e, src.units(base + e)) + (k - (e > 0 ? ends[e - 1] : 0u));
    return true;
  }
  XSC_FN static u32 rest_units(const PointerTableSource& src, const DirectSlots& slots, i64 e) {
    const u32 units = src.units(e);
    return units - slots.direct(e, units);
  }
};

// The table schedule (batch_memcpy): entries of any size. Each sub-group copies its direct slots' units,
// then its share of the rest (ShortRest or TileRest). One copy_unit call for all of them, so IGC compiles
// the copy once.
template <class G>
XSC_FN void run_tiles(const G& g, const PointerTableSource& src) {
  const i64 n = src.count();
  if (n <= 0) return;
  const bool short_batch = n <= (i64)kShortEntries && n <= (i64)g.sg_size() * g.sg_size();
  const DirectSlots slots = DirectSlots::of(g, n, short_batch);
  ShortRest short_rest{0, 0, 0, 0, 0, 0, Rounds{0, ~0u}};
  TileRest tile_rest{0, 0, 0, 0, 0};
  bool idle = true;  // no slot of this sub-group held a unit
  for (u32 t = 0;;) {
    i64 entry;
    u32 unit, part = 0, log_parts = 0;
    if (t < slots.T) {
      slots.slot(t++, &entry, &unit);
      if (unit >= src.units(entry)) continue;
      idle = false;
    } else if (short_batch) {
      if (short_rest.per == 0) short_rest = ShortRest::of(g, src, slots, idle);
      if (!short_rest.take(g, src, slots, &entry, &unit, &part, &log_parts)) return;
    } else if (!tile_rest.take(g, src, slots, &entry, &unit)) {
      return;
    }
    copy_unit(g, src.span(entry), unit, part, log_parts);
  }
}

// The row schedule (copy_states_, spec-decode): rows of the same states. Unit v of a row lies in the state
// whose running unit bound passes v, read from the plan, so no scan is needed. Each sub-group walks the rows
// in order, sg_size() at a time: each work-item reads one row's inputs, and the rows that copy are taken in
// turn, their units numbered on from the copying rows before them (a row that copies nothing takes no unit:
// a spec-decode step where a few of many rows copy deals out only theirs). Where every row fits in one pass,
// the launch's units are known before the first copy and dealt by Rounds, the last round in pieces. A unit
// past a state's actual units (a shifted conv state's last) copies nothing.
template <class G, class Source>
XSC_FN void run_rows(const G& g, const Source& src) {
  const i64 rows = src.row_count();
  const u32 per_row = src.units_per_row(), states = (u32)src.states;
  if (per_row == 0) return;
  const u32 S = subgroup_count(g), w = subgroup_index(g), lanes = g.sg_size(), lane = g.sg_lane();
  const u32 per_row_phase = per_row % S;
  const auto ends = [&src](u32 i) { return src.units_end(i); };
  u32 phase = 0;  // the sub-group that copies the next copying row's unit 0
  u32 done = 0;   // units of the copying rows before the next one (read only where rows fit one pass)
  Rounds rounds{~0u, ~0u};
  for (i64 base = 0; base < rows; base += lanes) {
    const bool mine_exists = base + lane < rows;
    const RowOf mine = mine_exists ? src.row_of(base + lane) : RowOf{-1, -1, -1, -1};
    const bool copies = mine_exists && src.copies(mine);
    if (rows <= (i64)lanes && per_row < (1u << 28) / lanes)  // (so that the product below fits)
      rounds = Rounds::of(g.sg_count(copies) * per_row, S, w, true);
    for (u32 l = g.sg_min(copies ? lane : lanes); l < lanes; l = g.sg_min(copies && lane > l ? lane : lanes)) {
      const RowOf row{(int)g.sg_shuffle((u32)mine.a, l), (int)g.sg_shuffle((u32)mine.b, l),
                      (int)g.sg_shuffle((u32)mine.c, l), (int)g.sg_shuffle((u32)mine.d, l)};
      for (u32 k = first_of(w, phase, S), part = 0, log_parts = 0; log_parts == 0; k += S) {
        if (k >= per_row || done + k >= rounds.whole_end) {  // this row's whole units are copied
          const u32 at = rounds.piece_at(&part, &log_parts);  // its piece of the last round, if in this row
          if (rounds.piece == ~0u || at < done || at - done >= per_row) break;
          k = at - done;
        }
        const u32 j = find_entry(g, ends, states, k);
        copy_unit(g, src.span(row, j), k - (j > 0 ? src.units_end(j - 1) : 0u), part, log_parts);
      }
      done += per_row;
      phase += per_row_phase;
      if (phase >= S) phase -= S;
    }
  }
}

}  // namespace xsc
