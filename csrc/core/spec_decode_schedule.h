// The schedule of a spec-decode launch whose rows' records a work-group keeps in local memory
// (SpecDecodeRecordSource): no scan. Included by the SYCL kernel source and the CUDA twin; batches small
// enough for small_batch.h keep that schedule.
//
// Why not the tile schedule: its group scan counts every entry's units before the first copy, and here each
// count is a span worked out from the plan and a record. On an H200 the bench's spec-decode step knew its
// first job 8.6 µs after launch against 3.0 µs for the same spans as pointer tables, and took 2.7 % longer
// than those tables (1.1 % with this schedule; torch-free, docs/performance.md). No state's copy is
// longer than its unshifted block (a shift only drops bytes), so the plan carries each state's unit bound
// (kSpecUnitsBefore), and a row that copies takes at most row_units units. Unit v of the copying rows is
// then found from v alone: the row is v / row_units in the list of rows that copy, the state the one whose
// bounds hold v's rest. The only work before the first copy is that list: one group scan over the rows'
// records, not over every entry. A unit past a state's actual units (a shifted conv state's last) copies
// nothing. With a claim counter (SpecDecodeSource::claims) the last quarter of the units is not dealt out but
// claimed by the sub-groups that finish their share first (copy_claimed_units).
#pragma once

#include "batch_schedule.h"
#include "spec_decode_source.h"

namespace xsc {

// The running unit bounds of the states as place_of reads them: entry j's total is the bounds of states
// 0..j summed.
struct StateUnitEnds {
  const i64* plan;  // state fields, kSpecStateFields apart
  i64 states;
  u64 row_units;
  XSC_FN u64 operator[](i64 j) const {
    return j + 1 < states ? (u64)plan[(j + 1) * kSpecStateFields + kSpecUnitsBefore] : row_units;
  }
};

// Unit v of the copying rows (listed in `rows`) as a job; every lane of the sub-group calls it together.
template <class G>
XSC_FN Job spec_unit_job(const G& g, const SpecDecodeRecordSource& src, const u64* rows, u64 v) {
  const SpecDecodeSource& s = src.source;
  const u64 per_row = (u64)s.row_units;
  const u64 c = quotient(v, per_row);
  const i64 row = (i64)rows[c];
  const StateUnitEnds ends{src.plan, s.states, per_row};
  const UnitPlace at = place_of(g, ends, s.states - 1, v - c * per_row, 0);
  const i64* p = src.plan + at.entry * kSpecStateFields;
  const Span span = SpecDecodeSource::span_of(p, src.records[row * s.tables + p[kSpecGroup]]);
  return job_of(span, row * s.states + at.entry, at.unit);
}

// The share of a launch's units claimed one at a time when it has a claim counter: 1 / kClaimedShare.
// Dealt out in advance, the units ended when memory had served each sub-group its share, and it serves
// some compute units far sooner than others: on an H200 the bench's step had its blocks done between
// 152.1 and 165.7 µs, and with the last quarter claimed between 160.5 and 163.5 (0.1699 - 0.1714 ms ->
// 0.1650 - 0.1652, torch-free). The last tenth or half claimed measured as the quarter did
// (docs/spec-decode-tuning.md, "Claimed units").
constexpr u64 kClaimedShare = 4;
// The most claims a launch may make on its 32-bit counter (units claimed + sub-groups); a launch that would
// make more (over 4 billion units: 32 TiB of copies) claims none.
constexpr u64 kMaxClaims = 0xffffffffull;

// Units first .. first + count - 1 of the copying rows, claimed one at a time from the launch's counter until
// none is left. Each claim is asked for before the unit claimed last is copied, and its answer taken after.
// Every sub-group of the grid claims until its first answer of count or more, so a launch makes count +
// sub-groups claims in all: the one answered with the last of them puts the counter back to 0, after every
// other claim of the launch (they are all ordered on that one word), with no fence and no wait for the
// copies' stores.
template <class G>
XSC_FN void copy_claimed_units(G& g, const SpecDecodeRecordSource& src, const u64* rows, u64 first, u64 count) {
  unsigned* const counter = src.source.claims;
  const bool leader = g.sg_lane() == 0;
  u64 asked = leader ? g.atomic_inc(counter) : 0;
  for (u64 t = g.sg_shuffle(asked, 0); t < count; t = g.sg_shuffle(asked, 0)) {
    const Job job = spec_unit_job(g, src, rows, first + t);
    if (leader) asked = g.atomic_inc(counter);
    run_job(g, src, job);
    XSC_MARK(kMarkUnitDone, 0);
  }
  if (leader && asked == count + (u64)(g.num_groups() * g.num_sgs()) - 1) g.atomic_clear(counter);
}

static_assert(kSpecMaxRecords <= kMaxGroupSize * kItems, "the copying rows' list lives in the tile table");

// Every work-item of every group calls it, after the group's records are in (fill_local and a barrier).
template <class G>
XSC_FN void run_large_batch(G& g, const SpecDecodeRecordSource& src) {
  const SpecDecodeSource& s = src.source;
  // The rows that copy, in order, into g.scratch() (at most kSpecMaxRecords: records_fit; every kernel's
  // table holds kMaxGroupSize * kItems values whatever its group's width). A row copies when its records
  // have a bias (the decision is the same for every table: the first's says it).
  u64* rows = g.scratch();
  i64 copying = 0;
  for (i64 base = 0; base < s.rows; base += g.local_size()) {
    const i64 r = base + g.local_id();
    const bool copies = r < s.rows && src.records[r * s.tables].bias >= 0;
    i64 total = 0;
    const i64 before = g.exclusive_scan(copies ? 1 : 0, &total);
    if (copies) rows[copying + before] = (u64)r;
    copying += total;
  }
  g.barrier();
  XSC_MARK(kMarkScanned, 0);
  // Unit v belongs to group v % groups, its sub-groups dividing them as in the tile schedule; with a claim
  // counter only the units before the last 1 / kClaimedShare are dealt out so, and the rest are claimed.
  const u64 groups = (u64)g.num_groups(), units = (u64)copying * (u64)s.row_units;
  const u64 subgroups = groups * (u64)g.num_sgs();
  const u64 claimed = s.claims && units / kClaimedShare + subgroups <= kMaxClaims ? units / kClaimedShare : 0;
  const SubgroupShare sh = share_of(g, (u64)g.group_id(), units - claimed);
  copy_share(g, src, sh, groups, [&](u64 v) { return spec_unit_job(g, src, rows, v); });
  if (s.claims) copy_claimed_units(g, src, rows, units - claimed, claimed);
}

}  // namespace xsc
