// The schedule of a small batch: at most sg_size * kItems entries, and fewer entries than the grid has
// sub-groups (one request's step: 72 states on a grid of 2,112 sub-groups). Each sub-group schedules
// itself, with no group barrier, so its first load waits for one trip to the tables and nothing else.
//
// 1. Direct units. Slot w (w: the sub-group's index in the grid) is unit w / n of entry w % n, for the first
//    `per_entry` = subgroups / n units of every entry. A sub-group whose slot exists copies it straight
//    from its entry's span: the bulk of the grid is copying one trip after launch, with no scan before.
// 2. Its own scan. It then reads every entry's size (cached by now), scans the units after each entry's
//    first `per_entry` in its sub-group (running totals in its own stretch of local memory) and counts the
//    direct units of the sub-groups before it: all it needs to work out its share of the rest, which no
//    other sub-group has to tell it.
// 3. Its share of the rest. The remaining units are cut in kSmallParts parts and dealt out as runs of
//    consecutive parts, sized so that direct unit plus run is as even as it can be over the grid: a
//    sub-group that had no direct unit takes that much more, less kSmallLateParts for its late start. Its
//    lanes find the pieces of its run at once, one each, before it copies the first.
#pragma once

#include "batch_jobs.h"

namespace xsc {

#ifndef XSC_SMALL_BATCH
#define XSC_SMALL_BATCH 1  // 0 sends every batch to the group schedule (batch_schedule.h)
#endif
#ifndef XSC_SMALL_PARTS
#define XSC_SMALL_PARTS 2
#endif
constexpr int kSmallParts = XSC_SMALL_PARTS;  // parts per remaining unit
#ifndef XSC_SMALL_LATE_PARTS
#define XSC_SMALL_LATE_PARTS 1
#endif
// What a late start (a sub-group with no direct unit, which copies nothing until its scan is done) counts
// for when the rest is shared out, in parts: on an H200 one half-unit gave copy_states 2 - 3 % on `step` and
// batch_memcpy 0.3 - 1 % (docs/tuning-rounds-4-7.md, "Seventh round"); with 0 it counts for nothing.
constexpr int kSmallLateParts = XSC_SMALL_LATE_PARTS;

// Whether a batch of n entries takes this schedule on a grid of `subgroups` sub-groups of `sg_size`. The
// launchers ask it too, to pick the kernel built for this schedule (each kernel's registers are then
// allocated for its own path). The SYCL small builds ask again on the device (run_batch), so a launcher
// that guessed the sub-group size wrong costs speed, never bytes; the CUDA twin's launcher knows the warp
// size and its small builds call run_small_batch directly.
XSC_HOST_FN bool small_batch_fits(i64 n, i64 sg_size, i64 subgroups) {
  return XSC_SMALL_BATCH && n > 0 && n <= sg_size * kItems && n < subgroups;
}

template <class G, class Source>
XSC_FN void run_small_batch(G& g, const Source& src, i64 n) {
  const i64 subgroups = g.num_groups() * g.num_sgs();
  const i64 w = g.group_id() * g.num_sgs() + g.sg_id();
  const i64 per_entry = (i64)quotient((u64)subgroups, (u64)n);  // direct units per entry, >= 1
  const i64 q = (i64)quotient((u64)w, (u64)n), r = w - q * n;  // this sub-group's slot: unit q of entry r
  bool direct = false;

  // 1. This sub-group's direct unit, if its slot's entry has that many units. It is copied before anything
  //    else is read: a scan first, with every sub-group reading the same few lines of sizes at once, starts
  //    the copy later than the old group scan did (docs/tuning-rounds-1-3.md). Its units are counted as the
  //    scan counts them (counted_units), so that every sub-group agrees on which slots had a direct unit.
  const bool has_slot = w < n * per_entry;
  if (has_slot) {
    const Span s = src.span(r);
    if (counted_units(src, r, s) > q) {
      direct = true;
      run_job(g, src, job_of(s, r, (u64)q));
      XSC_MARK(kMarkUnitDone, 0);
    }
  }

  // 2. Running totals of the units after each entry's first `per_entry`, entry i of the batch held by lane
  //    i / ceil(n / lanes), and the direct units of all sub-groups and of those before this one (slot j < w). Slot
  //    d * n + e of entry e comes before w = q * n + r for d < q, and for d == q when e < r.
  // Entries are spread over every lane (ceil(n / lanes) each, not kItems): each entry's size may take loads
  // and arithmetic (copy_states' spans do), and the scan waits for its slowest lane.
  const TileEnds ends = {g.scratch() + g.sg_id() * g.sg_size() * kItems, g.sg_size()};
  const Stretch mine = stretch_of(n, per_worker(n, g.sg_size()), g.sg_lane());
  const i64 first = mine.first, end = mine.end;
  i64 u[kItems];
  entry_units(src, first, end, 0, u);
  i64 sum = 0, direct_all = 0, direct_before = 0;
#pragma unroll
  for (int k = 0; k < kItems; ++k) {  // entries not this lane's have no units, so they add nothing
    const i64 done = u[k] < per_entry ? u[k] : per_entry;  // the entry's direct units
    const i64 before = q + (first + k < r ? 1 : 0);
    u[k] -= done;
    direct_all += done;
    direct_before += done < before ? done : before;
    sum += u[k];
  }
  i64 rest_units = 0;
  ends.put(first, (u64)g.sg_exclusive_scan(sum, &rest_units), u, end);
  direct_all = g.sg_sum(direct_all);
  direct_before = g.sg_sum(direct_before);
  g.sg_barrier();  // the running totals are in local memory for every lane
  XSC_MARK(kMarkScanned, 0);

  // 3. Every sub-group is to copy `target` parts in all, a direct unit counting kSmallParts and a late start
  //    (no direct unit: it starts only after its scan) counting kSmallLateParts: a sub-group takes
  //    target - kSmallLateParts parts of the rest, or target - kSmallParts after a direct unit (never fewer
  //    than 0). Those counts add up to at least all the parts, so the runs, in sub-group order, cover them.
  const u64 parts = (u64)rest_units * kSmallParts;
  const u64 late_all = (u64)(subgroups - direct_all) * kSmallLateParts;
  const u64 target =
      quotient(parts + (u64)direct_all * kSmallParts + late_all + (u64)subgroups - 1, (u64)subgroups);
  const u64 after_direct = target > (u64)kSmallParts ? target - kSmallParts : 0;
  const u64 after_late = target > (u64)kSmallLateParts ? target - kSmallLateParts : 0;
  const u64 holes_before = (u64)(w - direct_before);
  u64 h = holes_before * after_late + (u64)direct_before * after_direct;
  u64 stop = h + (direct ? after_direct : after_late);
  if (stop > parts) stop = parts;
  // The run cut at unit boundaries: piece k covers the parts of unit h / kSmallParts + k that lie in
  // [h, stop). Lane l works out pieces l, l + sg_size(), ... (its search of the totals and its span), all
  // before the first copy, so the copies follow one another with nothing but shuffles in between and no
  // span is held in registers while a copy runs. Found one at a time, a piece ahead, copy_states on `step`
  // read 0.841 - 0.844 of cudaMemcpyAsync against 0.856 - 0.857 now (H200 sweep, same call).
  const i64 last = n - 1;
  const u64 first_unit = h / kSmallParts;
  const u64 pieces = h < stop ? (stop - 1) / kSmallParts - first_unit + 1 : 0;
  const u64 lanes = (u64)g.sg_size();
  for (u64 k0 = 0; k0 < pieces; k0 += lanes) {
    const u64 k = k0 + (u64)g.sg_lane();
    Job mine = {0, 0, 0};
    if (k < pieces) {
      const u64 unit = first_unit + k, unit_start = unit * kSmallParts;
      const u64 from = k == 0 ? h : unit_start, to = unit_start + kSmallParts < stop ? unit_start + kSmallParts : stop;
      const UnitPlace at = place_of_item(ends, last, unit, (u64)per_entry);
      mine = parts_of(job_of(src.span(at.entry), at.entry, at.unit), (int)(from - unit_start), (int)(to - unit_start),
                      kSmallParts);
    }
    XSC_MARK(kMarkFirstJob, mine.src);
    const u64 count = pieces - k0 < lanes ? pieces - k0 : lanes;
    for (u64 j = 0; j < count; ++j) {
      run_job(g, src, lane_job(g, mine, (int)j));
      XSC_MARK(kMarkUnitDone, 0);
    }
  }
}

}  // namespace xsc
