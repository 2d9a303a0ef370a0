// Which sub-group copies which unit: the scheduling half of the shared kernel body (copy_routine.h says how
// a sub-group copies a unit). Included by the SYCL kernel source and the CUDA twin. A batch of a few
// entries, fewer than the grid has sub-groups, is scheduled by each sub-group on its own (small_batch.h);
// any other batch by the groups, a tile of entries at a time (run_tiles, below).
#pragma once

#include "batch_jobs.h"
#include "small_batch.h"

namespace xsc {

constexpr i64 kLineEntries = 16;  // 8-byte table entries per 128-byte line

// The units one sub-group copies in a tile, in order: whole units `first`, `first + stride`, ... while
// every sub-group has one (`whole` of them), then its even share of the parts of the units left over.
struct SubgroupShare {
  u64 first, stride;  // tile units of the group: first + k * groups; this sub-group's: k = s, s + num_sgs...
  u64 whole;          // whole units this sub-group copies
  u64 tail_unit;      // tile unit holding the first of its tail parts
  unsigned part_lo, part_hi;  // its tail parts, counted from part 0 of tail_unit
  u64 count;          // whole + tail pieces (a share of parts spans at most two units)
};

template <class G>
XSC_FN SubgroupShare share_of(const G& g, u64 group_first, u64 tile_units) {
  const u64 groups = (u64)g.num_groups(), sgs = (u64)g.num_sgs(), s = (u64)g.sg_id();
  const u64 units = group_first < tile_units ? quotient(tile_units - 1 - group_first, groups) + 1 : 0;
  const u64 rounds = quotient(units, sgs);  // rounds in which every sub-group copies a whole unit
  const unsigned parts = (unsigned)(units - rounds * sgs) * kTailParts;  // below num_sgs * kTailParts
  const unsigned lo = (unsigned)s * parts / (unsigned)sgs, hi = ((unsigned)s + 1) * parts / (unsigned)sgs;
  SubgroupShare sh;
  sh.first = group_first + s * groups;
  sh.stride = groups * sgs;
  sh.whole = rounds;
  sh.tail_unit = group_first + (rounds * sgs + lo / kTailParts) * groups;
  sh.part_lo = lo % kTailParts;
  sh.part_hi = hi - (lo - lo % kTailParts);
  sh.count = rounds + (hi > lo ? (hi - 1) / kTailParts - lo / kTailParts + 1 : 0);
  return sh;
}

// Piece k (< count) of a share as a job; job_for(u) is the job of unit u of the units shared out.
template <class UnitJob>
XSC_FN Job share_job(const SubgroupShare& sh, u64 groups, u64 k, const UnitJob& job_for) {
  if (k < sh.whole) return job_for(sh.first + k * sh.stride);
  const u64 t = k - sh.whole;  // 0 or 1: the tail pieces
  const int lo = t == 0 ? (int)sh.part_lo : 0;
  const int hi = t == 0 ? (int)sh.part_hi : (int)sh.part_hi - kTailParts;  // parts_of stops at the unit's end
  return parts_of(job_for(sh.tail_unit + t * groups), lo, hi, kTailParts);
}

// A share's pieces copied in order, each found before the one before it is copied (`Streaming` as run_job).
template <class G, class Source, class UnitJob>
XSC_FN void copy_share(G& g, const Source& src, const SubgroupShare& sh, u64 groups, const UnitJob& job_for) {
  Job job = {0, 0, 0};
  if (sh.count > 0) job = share_job(sh, groups, 0, job_for);
  XSC_MARK(kMarkFirstJob, job.src);
  for (u64 k = 0; k < sh.count; ++k) {
    Job next = {0, 0, 0};
    if (k + 1 < sh.count) next = share_job(sh, groups, k + 1, job_for);
    run_job(g, src, job);
    XSC_MARK(kMarkUnitDone, 0);
    job = next;
  }
}

// The passes before the scan copy with streaming hints (load_word): their thousands of small entries are
// each read and written once, and on an H200 the hints gave `tiny` 2 - 2.5 % there. Everywhere else they lost
// (docs/tuning-rounds-4-7.md, "Sixth round"), so the tile loop and the small-batch schedule copy plainly.
constexpr bool kStreamFirstUnits = true;

// The size words of entries at .. at + kItems - 1 (none past n), for the vote after the passes below.
template <class Source>
XSC_FN void ask_size_words(const Source& src, i64 n, i64 at, i64 (&words)[kItems]) {
#pragma unroll
  for (int k = 0; k < kItems; ++k)
    if (at + k < n) words[k] = src.size_word(at + k);
}

// Unit 0 of entries w, w + subgroups, ... (w: the calling sub-group's index in the grid), straight from the
// tables: no scan needed. Used when entries outnumber sub-groups, so that every sub-group starts copying one
// trip to the tables after launch instead of after the scan and a lookup; the scan then deals out the other
// units. Before its last copy each work-item also asks for the size words of its entries at .. at + kItems - 1
// (of the first tile, for the vote that follows), so that they arrive while the copy runs.
template <class G, class Source>
XSC_FN void copy_first_units(G& g, const Source& src, i64 n, i64 at, i64 (&words)[kItems]) {
  const i64 subgroups = g.num_groups() * g.num_sgs();
  const i64 w = g.group_id() * g.num_sgs() + g.sg_id();
  Job job = job_of(src.span(w), w, 0);
  for (i64 e = w; e < n; e += subgroups) {
    Job next = {0, 0, 0};
    if (e + subgroups < n) next = job_of(src.span(e + subgroups), e + subgroups, 0);
    else ask_size_words(src, n, at, words);
    run_job<kStreamFirstUnits>(g, src, job);
    XSC_MARK(kMarkUnitDone, 0);
    job = next;
  }
}

#ifndef XSC_DIRECT_UNITS
#define XSC_DIRECT_UNITS 2
#endif
// Units at the start of each entry that the direct build's pass (copy_direct_units) copies before any scan,
// for a batch of n entries on a grid of `subgroups` sub-groups: with at least one entry per sub-group, the
// first unit of each, as copy_first_units; with one entry for nearly every sub-group (three quarters or
// more), the first kDirectUnits of each. Entries of a unit or two (2,000 of 12,345 bytes on 2,112
// sub-groups) are then copied whole with no scan at all, where the scan and the lookups before each entry's
// second unit held `odd` to 0.76 of cudaMemcpyAsync (0.93 with the pass, H200). Fewer entries: none (0).
// That pass lives in a kernel build of its own (run_tiles<true>), which the launchers pick by this count
// for batch_memcpy: `tiny` never runs it, yet in the tile build it cost `tiny` 4 % on an H200, and the
// two passes side by side, the first-unit one exactly as before, 6 % (0.84 against 0.90).
constexpr u64 kDirectUnits = XSC_DIRECT_UNITS;
XSC_HOST_FN u64 direct_units(i64 n, i64 subgroups) {
  if (n >= subgroups) return 1;
  return kDirectUnits > 0 && 4 * n >= 3 * subgroups ? kDirectUnits : 0;
}

// The first `units` units of entries w, w + subgroups, ..., as copy_first_units does the first; a sub-group
// with no entry (fewer entries than sub-groups) only asks for its work-items' size words.
template <class G, class Source>
XSC_FN void copy_direct_units(G& g, const Source& src, i64 n, u64 units, i64 at, i64 (&words)[kItems]) {
  const i64 subgroups = g.num_groups() * g.num_sgs();
  const i64 w = g.group_id() * g.num_sgs() + g.sg_id();
  Job job = {0, 0, 0};
  if (w < n) job = job_of(src.span(w), w, 0, units);
  for (i64 e = w;; e += subgroups) {
    const bool more = e + subgroups < n;
    Job next = {0, 0, 0};
    if (more) next = job_of(src.span(e + subgroups), e + subgroups, 0, units);
    else ask_size_words(src, n, at, words);
    // A plain slice goes as one piece (cut into units, odd_p lost 2.5 % on an H200: 0.925 -> 0.902); a
    // general unit (rows, or an overlapping range, whose unit 0 copies it all) is one unit per job, and
    // its next units go through the same call: a second one inlines the rows and overlap paths again.
    const u64 jobs = e >= n ? 0 : job.len == kGeneralUnit ? units : 1;
    for (u64 u = 0; u < jobs; ++u, ++job.dst) run_job<kStreamFirstUnits>(g, src, job);
    XSC_MARK(kMarkUnitDone, 0);
    if (!more) return;
    job = next;
  }
}

// The group schedule, for any batch. Unit k of the batch (numbered across all entries in order) belongs to
// group k % groups, so a huge entry is spread over every group, many small ones are dealt out a few per
// group, and the units copied at one moment lie close together in memory. Per tile of entries, one group
// scan puts each entry's running unit total in g.scratch() (local_size() * kItems values); each sub-group
// then takes its share of the group's units (share_of) and finds each unit's entry there (place_of, all
// its lanes probing at once), the next one found before the current one is copied.
// Direct: the build with the direct pass (direct_units); without, only batches with an entry for every
// sub-group copy their first units before the scan.
template <bool Direct = false, class G, class Source>
XSC_FN void run_tiles(G& g, const Source& src, i64 n) {
  const i64 groups = g.num_groups();
  const i64 tile = g.local_size() * kItems;
  const TileEnds ends = {g.scratch(), g.local_size()};
  const i64 subgroups = groups * g.num_sgs();
  // Units at the start of each entry copied first.
  const u64 skipped = Direct ? direct_units(n, subgroups) : (n >= subgroups ? 1 : 0);
  i64 from = 0;  // the first tile that may have units left
  if (skipped) {
    // After those copies a tile often has nothing left (4096 entries of 4 KiB, 2,000 of 12 KiB). One group
    // vote says so for a fraction of what the scan, its barriers and its lookups cost (tiny:
    // docs/tuning-rounds-4-7.md).
    // For the first tile it votes on size words asked for before the last copy: for pointer tables the sizes
    // themselves, so that no trip to memory comes after that copy.
    const i64 at = g.local_id() * kItems;
    i64 words[kItems];
#pragma unroll
    for (int k = 0; k < kItems; ++k) words[k] = 0;
    if constexpr (Direct) copy_direct_units(g, src, n, skipped, at, words);
    else copy_first_units(g, src, n, at, words);
    bool left = false;
#pragma unroll
    for (int k = 0; k < kItems; ++k)
      left = left || (at + k < n && src.units_of_word(words[k]) > (Direct ? (i64)skipped : 1));
    if (!g.any(left)) from = tile;  // every group votes alike, so every group skips it (skew stays 0)
  }
  // `skew` is (units of all tiles so far) % groups: the group that owns a tile's first unit. Kept up to
  // date per tile, so no 64-bit division sits between the scan and the first copy.
  i64 skew = 0;
  for (i64 base = from; base < n; base += tile) {
    const i64 tile_n = n - base < tile ? n - base : tile;
    // Ask for the tile's table lines now, so that the lookups after the scan find them in the cache: each
    // 128-byte line (16 entries) is asked for once, by one work-item of one group (without it `step` lost
    // 1 - 2 % on an H200, docs/tuning-rounds-1-3.md).
    for (i64 line = g.group_id() + g.local_id() * groups; line * kLineEntries < tile_n; line += groups * g.local_size())
      src.prefetch(g, base + line * kLineEntries);
    // This work-item's entries, first .. end - 1: kItems of them, or, for a source whose spans take
    // arithmetic and dependent loads (Source::kSpreadScan) in a tile the group's work-items could share more
    // thinly, ceil(tile_n / local_size): the scan waits for its slowest work-item. The spec-decode step's
    // 1,152 entries took 8 in turn on 144 work-items, 3 on 384 now (H200: 0.1768 -> 0.1734 ms); pointer
    // tables keep 8, whose size loads are in flight at once (spread, `odd` lost 3 %).
    const i64 per_item = Source::kSpreadScan && tile_n < tile ? per_worker(tile_n, g.local_size()) : kItems;
    const Stretch mine = stretch_of(tile_n, per_item, g.local_id());
    const i64 first = mine.first, end = mine.end;
    i64 u[kItems];
    entry_units(src, base + first, base + end, skipped, u);
    i64 sum = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) sum += u[k];
    XSC_MARK(kMarkCounted, sum);
    // The vote for the later tiles, on their sizes read just now (the first tile's came before the loop,
    // which reaches it only when it has units left).
    if (skipped && base > 0 && !g.any(sum > 0)) continue;  // no running totals written: no barrier owed
    i64 tile_total = 0;
    ends.put(first, (u64)g.exclusive_scan(sum, &tile_total), u, end);
    g.barrier();
    XSC_MARK(kMarkScanned, 0);
    // This group owns tile units (group_id - skew) mod groups, + groups, ...: see share_of for how its
    // sub-groups divide them.
    const u64 tile_units = (u64)tile_total;
    const i64 last = tile_n - 1;  // the tile's last entry
    const i64 me = g.group_id();
    const SubgroupShare sh = share_of(g, (u64)(me >= skew ? me - skew : me + groups - skew), tile_units);
    copy_share(g, src, sh, (u64)groups, [&](u64 r) { return job_at(g, src, ends, last, base, r, skipped); });
    g.barrier();  // the running totals are rewritten by the next tile
    skew = (i64)((tile_units + (u64)skew) % (u64)groups);
  }
}

// A batch too large for small_batch.h: the tile schedule, unless the source brings its own
// (spec_decode_schedule.h; found by argument-dependent lookup where run_batch calls it).
template <class G, class Source>
XSC_FN void run_large_batch(G& g, const Source& src) {
  run_tiles(g, src, src.count());
}

// The whole batch, called by every work-item of every group. `Source` yields count() and span(i). The
// choice depends only on the batch and the grid, so every work-item takes the same path (run_tiles has
// group barriers). The kernels built for batches that are not small call run_large_batch (or, batch_memcpy's
// direct build, run_tiles<true>) directly.
template <class G, class Source>
XSC_FN void run_batch(G& g, const Source& src) {
  const i64 n = src.count();
  if (small_batch_fits(n, g.sg_size(), g.num_groups() * g.num_sgs())) run_small_batch(g, src, n);
  else run_large_batch(g, src);
}

}  // namespace xsc
