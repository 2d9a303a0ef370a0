// The vocabulary both schedules share (batch_schedule.h: a group per tile of entries; small_batch.h: each
// sub-group on its own): a unit of an entry as a job, running unit totals in local memory, finding a unit's
// entry there, cutting a unit in parts, and running a job (copy_routine.h says how bytes are copied).
#pragma once

#include "copy_routine.h"

namespace xsc {

#ifndef XSC_ITEMS
#define XSC_ITEMS 8
#endif
constexpr int kItems = XSC_ITEMS;  // entries per work-item per scan: a group scan covers local_size * kItems
// The widest work-group the SYCL kernel's tile table (kMaxGroupSize x kItems running totals, 32 KiB of
// local memory) holds. Here, not in the kernel source, because the launcher needs it too (to pick the group
// size and to ask whether local memory holds more beside the table) and the run-time compiler builds that
// source alone, from these headers.
constexpr int kMaxGroupSize = 512;
constexpr i64 kMaxTableBytes = (i64)kMaxGroupSize * kItems * (i64)sizeof(u64);
// Timeline hook: benchmarks/tuning/cuda_marks.cuh defines it to record when each sub-group passes a point
// (`after` is a value the point must wait for); empty everywhere else.
#ifndef XSC_MARK
#define XSC_MARK(point, after)
#endif
// kMarkRecords: a spec-decode launch's records are in local memory (cuda_spec_timeline.cu); kMarkCounted:
// a work-item has its entries' units, before the group scan.
enum MarkPoint { kMarkScanned = 1, kMarkFirstJob = 2, kMarkUnitDone = 3, kMarkRecords = 6, kMarkCounted = 7 };

// The running unit totals of the current tile's entries, as a group (or, in small_batch.h, one sub-group)
// keeps them in local memory. Entry i of the tile sits at position (i % kItems) * items + i / kItems: the
// work-item that scans entries t * kItems .. t * kItems + kItems - 1 writes each of them next to where its
// neighbours write theirs, so the writes meet no local-memory bank conflicts.
struct TileEnds {
  u64* slots;
  i64 items;  // work-items that scan: local_size(), or sg_size() for a sub-group's own scan

  XSC_FN u64& operator[](i64 i) const { return slots[(i % kItems) * items + i / kItems]; }
  // The running totals of entries first .. first + kItems - 1 (none from `end` on: they belong to another
  // work-item), whose units are u, after `before` units.
  XSC_FN void put(i64 first, u64 before, const i64 (&u)[kItems], i64 end = (i64)(~0ull >> 1)) const {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      before += (u64)u[k];
      if (first + k < end) (*this)[first + k] = before;
    }
  }
};

#ifndef XSC_TAIL_PARTS
#define XSC_TAIL_PARTS 2
#endif
// A group's units that do not fill a round (fewer than one per sub-group) are cut in this many parts and
// the parts dealt out evenly, so that no sub-group copies a whole unit more than its neighbours while they
// wait at the end of the batch.
constexpr int kTailParts = XSC_TAIL_PARTS;

// What a sub-group copies next, in few registers (they bound how many work-items a compute unit holds):
// a slice of a plain memmove as its addresses and length, any other unit as its entry and unit number.
constexpr int kGeneralUnit = -1;
struct Job {
  u64 src, dst;  // a slice: its addresses; a general unit: the entry index and the unit
  int len;       // a slice: bytes (1..kChunkBytes, or units x kChunkBytes, below); kGeneralUnit; 0: nothing
};

// Unit `unit` of entry `e` (whose span is `s`) as a job; of a plain slice, also the `units` - 1 units after
// it, as one piece (batch_schedule.h's direct pass; a general unit stays one unit).
XSC_FN Job job_of(const Span& s, i64 e, u64 unit, u64 units = 1) {
  Job job;
  if (s.rows == 1 && !ranges_overlap(s.src, s.dst, s.row_bytes)) {
    const u64 off = unit * (u64)kChunkBytes;
    const i64 rest = s.row_bytes - (i64)off, most = (i64)units * kChunkBytes;
    job.src = s.src + off;
    job.dst = s.dst + off;
    job.len = rest <= 0 ? 0 : (int)(rest < most ? rest : most);
  } else {
    job.src = (u64)e;
    job.dst = unit;
    job.len = units_of(s.rows, s.row_bytes) > (i64)unit ? kGeneralUnit : 0;
  }
  return job;
}

// The entries first .. end - 1 of n that worker `index` scans when each takes `per` consecutive ones; and
// the fewest per worker that cover n entries with `workers` of them. The scans spread entries whose spans
// take loads and arithmetic this thinly, since they wait for their slowest worker.
struct Stretch {
  i64 first, end;
};
XSC_FN Stretch stretch_of(i64 n, i64 per, i64 index) {
  const i64 first = index * per;
  return Stretch{first, first + per < n ? first + per : n};
}
XSC_FN i64 per_worker(i64 n, i64 workers) { return (i64)quotient((u64)(n + workers - 1), (u64)workers); }

// The units the schedules count for entry i, whose span is s: the span's own, or, for a source with
// kUnitBound, its unit_bound(i), which may count more (units past the span's end copy nothing). A source
// whose spans take loads and arithmetic can give a bound read from one word where the span needs them all.
template <class Source>
XSC_FN i64 counted_units(const Source& src, i64 i, const Span& s) {
  if constexpr (Source::kUnitBound) return src.unit_bound(i);
  else return units_of(s.rows, s.row_bytes);
}

// Units of entries at .. at + kItems - 1 (none past n; as counted_units counts them), less the `skipped`
// first ones of each.
template <class Source>
XSC_FN void entry_units(const Source& src, i64 at, i64 n, u64 skipped, i64 (&u)[kItems]) {
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    u[k] = 0;
    if (at + k < n) {
      Span s{};
      if constexpr (!Source::kUnitBound) s = src.span(at + k);
      u[k] = counted_units(src, at + k, s) - (i64)skipped;
      if (u[k] < 0) u[k] = 0;
    }
  }
}

// Where unit r of the current tile (tile-relative numbering) lies: the entry holding it is the first of
// entries 0..last whose running total exceeds r (entries with no units share their neighbour's total), at
// `unit` of that entry. `skipped` units at the start of every entry were copied before the scan and are not
// counted in it. Every lane of a sub-group calls it together, with the same r: the lanes probe one total
// each and count the probes at or below r (the totals only grow, so those come first), which narrows the
// range sg_size() times per step. 1,152 entries take 3 steps where a binary search takes 11, each a trip
// to local memory that the sub-group waits for before it can copy the unit.
struct UnitPlace {
  i64 entry;  // tile-relative
  u64 unit;
};
template <class G, class Ends>
XSC_FN UnitPlace place_of(const G& g, const Ends& ends, i64 last, u64 r, u64 skipped) {
  i64 lo = 0, hi = last;  // the entry is one of lo..hi
  const u64 lanes = (u64)g.sg_size(), lane = (u64)g.sg_lane();
  while (lo < hi) {
    // lo..hi-1 cut in `lanes` stretches of `step`; lane l probes the last entry of stretch l. The first
    // stretch whose probe exceeds r (or runs past hi-1) holds the entry, or hi does.
    const i64 step = (i64)quotient((u64)(hi - lo) + lanes - 1, lanes);
    const i64 probe = lo + (i64)(lane + 1) * step - 1;
    const i64 below = g.sg_count(probe < hi && ends[probe] <= r);
    lo += below * step;
    if (lo + step - 1 < hi) hi = lo + step - 1;
  }
  return UnitPlace{lo, r - (lo > 0 ? ends[lo - 1] : 0) + skipped};
}

// The job for unit r of the current tile, whose entries start at `base`.
template <class G, class Source>
XSC_FN Job job_at(const G& g, const Source& src, const TileEnds& ends, i64 last, i64 base, u64 r, u64 skipped) {
  const UnitPlace at = place_of(g, ends, last, r, skipped);
  return job_of(src.span(base + at.entry), base + at.entry, at.unit);
}

// The same place found by one work-item on its own, by a binary search: the small-batch schedule has each
// lane of a sub-group find a different piece of its run at once, so the whole run is found before its first
// copy. (The tile schedule tried the same and lost 1 - 1.5 % on step16 and states16, H200: see
// docs/performance.md; its sub-groups find each unit as they go.)
XSC_FN UnitPlace place_of_item(const TileEnds& ends, i64 last, u64 r, u64 skipped) {
  i64 lo = 0, hi = last;  // the entry is one of lo..hi
  while (lo < hi) {
    const i64 mid = lo + (hi - lo) / 2;
    if (ends[mid] <= r) lo = mid + 1;
    else hi = mid;
  }
  return UnitPlace{lo, r - (lo > 0 ? ends[lo - 1] : 0) + skipped};
}

// Piece `j` of the pieces the lanes of the sub-group hold one each (`mine`): every lane calls it together.
template <class G>
XSC_FN Job lane_job(const G& g, const Job& mine, int j) {
  Job job;
  job.src = g.sg_shuffle(mine.src, j);
  job.dst = g.sg_shuffle(mine.dst, j);
  job.len = (int)(i64)g.sg_shuffle((u64)(i64)mine.len, j);
  return job;
}

// Parts [lo, hi) of a unit cut in `parts` parts. A general unit (rows, or an overlapping range) is not cut:
// the sub-group holding its part 0 copies all of it.
XSC_FN Job parts_of(Job job, int lo, int hi, int parts) {
  if (job.len == kGeneralUnit) {
    if (lo != 0) job.len = 0;
    return job;
  }
  const i64 part_bytes = kChunkBytes / parts;
  const i64 begin = lo * part_bytes;
  // The last part runs to the unit's end, whatever kChunkBytes / parts rounded away.
  const i64 end = hi >= parts || hi * part_bytes > job.len ? job.len : hi * part_bytes;
  job.len = end > begin ? (int)(end - begin) : 0;
  job.src += (u64)begin;
  job.dst += (u64)begin;
  return job;
}

// A plain slice never overlaps itself (job_of makes overlapping entries general units), so `Streaming`
// applies to slices only.
template <bool Streaming = false, class G, class Source>
XSC_FN void run_job(G& g, const Source& src, const Job& job) {
  if (job.len > 0) sg_copy_piece<Streaming>(g, job.src, job.dst, job.len, false);
  else if (job.len == kGeneralUnit) copy_unit(g, src.span((i64)job.src), (i64)job.dst);
}

}  // namespace xsc
