// Which sub-group copies which unit: the scheduling half of the shared kernel body (copy_routine.h says how
// a sub-group copies a unit). Included by the SYCL kernel source and the CUDA twin.
#pragma once

#include "copy_routine.h"

namespace xsc {

#ifndef XSC_ITEMS
#define XSC_ITEMS 8
#endif
constexpr int kItems = XSC_ITEMS;  // entries per work-item per tile: one tile covers local_size * kItems

// The running unit totals of the current tile's entries, as the group keeps them in local memory. Entry i
// of the tile sits at position (i % kItems) * local_size + i / kItems: the work-item that scans entries
// t * kItems .. t * kItems + kItems - 1 writes each of them next to where its neighbours write theirs, so
// the writes meet no local-memory bank conflicts.
struct TileEnds {
  u64* slots;
  i64 items;  // local_size()

  XSC_FN u64& operator[](i64 i) const { return slots[(i % kItems) * items + i / kItems]; }
};

// What a sub-group copies next, in few registers (they bound how many work-items a compute unit holds):
// a slice of a plain memmove as its addresses and length, any other unit as its entry and unit number.
struct Job {
  u64 src, dst;  // a slice: its addresses; otherwise: the entry index and the unit
  int len;       // a slice: bytes (1..kChunkBytes); otherwise -1
};

// The job for unit r of the current tile (tile-relative numbering): the entry holding it is the first of
// entries 0..last whose running total exceeds r (entries with no units share their neighbour's total).
template <class Source>
XSC_FN Job job_at(const Source& src, const TileEnds& ends, i64 last, i64 base, u64 r) {
  i64 lo = 0, hi = last;
  while (lo < hi) {
    const i64 mid = (lo + hi) / 2;
    if (ends[mid] > r) hi = mid;
    else lo = mid + 1;
  }
  const u64 unit = r - (lo > 0 ? ends[lo - 1] : 0);
  const Span s = src.span(base + lo);
  Job job;
  if (s.rows == 1 && !ranges_overlap(s.src, s.dst, s.row_bytes)) {
    const u64 off = unit * (u64)kChunkBytes;
    const i64 rest = s.row_bytes - (i64)off;
    job.src = s.src + off;
    job.dst = s.dst + off;
    job.len = (int)(rest < kChunkBytes ? rest : kChunkBytes);
  } else {
    job.src = (u64)(base + lo);
    job.dst = unit;
    job.len = -1;
  }
  return job;
}

template <class G, class Source>
XSC_FN void run_job(G& g, const Source& src, const Job& job) {
  if (job.len > 0) sg_copy_piece(g, job.src, job.dst, job.len, false);
  else copy_unit(g, src.span((i64)job.src), (i64)job.dst);
}

// The whole batch, called by every work-item of every group. `Source` yields count() and span(i).
// Unit k of the batch (numbered across all entries in order) belongs to group k % groups, so a huge entry
// is spread over every group, many small ones are dealt out a few per group, and the units copied at one
// moment lie close together in memory. Per tile of entries, one group scan puts each entry's running unit
// total in g.scratch() (local_size() * kItems values); each sub-group then takes every num_sgs-th of the
// group's units and finds its entry by binary search there, the next one found before the current one is
// copied so that the search and the span's read hide behind the copy.
template <class G, class Source>
XSC_FN void run_batch(G& g, const Source& src) {
  const i64 n = src.count();
  const i64 groups = g.num_groups();
  const i64 tile = g.local_size() * kItems;
  const TileEnds ends = {g.scratch(), g.local_size()};
  // `skew` is (units of all tiles so far) % groups: the group that owns a tile's first unit. Kept up to
  // date per tile, so no 64-bit division sits between the scan and the first copy.
  i64 skew = 0;
  for (i64 base = 0; base < n; base += tile) {
    const i64 first = g.local_id() * kItems;  // this work-item's entries: first .. first + kItems - 1
    i64 u[kItems];
    i64 sum = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      u[k] = 0;
      if (base + first + k < n) {
        const Span s = src.span(base + first + k);
        u[k] = units_of(s.rows, s.row_bytes);
      }
      sum += u[k];
    }
    i64 tile_total = 0;
    u64 end = (u64)g.exclusive_scan(sum, &tile_total);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      end += (u64)u[k];
      ends[first + k] = end;
    }
    g.barrier();
    // This group owns tile units r = (group_id - skew) mod groups, + groups, ...; sub-group s takes the
    // s-th of those and then every num_sgs-th.
    const u64 tile_units = (u64)tile_total;
    const i64 last = (n - base < tile ? n - base : tile) - 1;  // the tile's last entry
    const u64 step = (u64)(groups * g.num_sgs());
    const i64 me = g.group_id();
    u64 r = (u64)(me >= skew ? me - skew : me + groups - skew) + (u64)(g.sg_id() * groups);
    Job job = {0, 0, 0};
    if (r < tile_units) job = job_at(src, ends, last, base, r);
    while (r < tile_units) {
      const u64 next_r = r + step;
      Job next = {0, 0, 0};
      if (next_r < tile_units) next = job_at(src, ends, last, base, next_r);
      run_job(g, src, job);
      job = next;
      r = next_r;
    }
    g.barrier();  // the running totals are rewritten by the next tile
    skew = (i64)((tile_units + (u64)skew) % (u64)groups);
  }
}

}  // namespace xsc
