// Where a batch's entries come from: the "sources" the schedules (schedule.h) walk. Shared by the SYCL
// kernels, the CUDA twin and the native CPU path, so every backend computes the same spans.
//
// Two kinds. A table source (batch_memcpy's pointer tables) has entries of any size, known only on the
// device: its schedule scans their sizes. A row source (copy_states_, spec-decode) has rows (requests) of
// the same states, each state's units bounded by a plan built on the host: unit v of a row belongs to the
// state whose running bound passes v, so its schedule needs no scan. A row source gives each row's inputs
// as four 32-bit values (RowOf), which one work-item reads and its sub-group shares.
//
// Values read on the device (block ids, shifts, counts) are never checked on the host (that would
// synchronize), so a hostile or stale value must not make a product wrap around and turn an empty span into
// a large one: each such value is compared with a bound worked out on the host before it is multiplied.
#pragma once

#include "copy_routine.h"

namespace xsc {

// Whether [address, address + bytes) runs past 2**64 (bytes >= 0).
XSC_HOST_FN bool range_wraps(u64 address, i64 bytes) { return address + (u64)bytes < address; }

// Entries given as tables of addresses and byte counts (the batch_memcpy op).
struct PointerTableSource {
  const u64* src;
  const u64* dst;
  const void* sizes;
  int sizes_are_64bit;
  i64 n;

  XSC_FN i64 count() const { return n; }
  XSC_FN i64 bytes(i64 i) const {
    const i64 b = sizes_are_64bit ? ((const i64*)sizes)[i] : (i64)((const int*)sizes)[i];
    return b > 0 ? b : 0;  // negative sizes are refused on the host where the host can see them
  }
  XSC_FN u32 units(i64 i) const { return units_of_bytes(bytes(i)); }
  XSC_FN Span span(i64 i) const { return Span{src[i], dst[i], bytes(i), 1, 0, 0}; }
};

// A row's inputs, as one work-item reads them (a row source says what each value is).
struct RowOf {
  int a, b, c, d;
};

// A value read on the device as a non-negative int32, or -1 for anything else: every bound it is compared
// with (block counts, shifts that leave a byte) fits an int32.
XSC_FN int as_index(i64 v) { return v >= 0 && v <= 0x7fffffff ? (int)v : -1; }

// Entries computed from the state tensors themselves (the copy_states_ op): row r is request r, and its
// entries are every state's block src_blocks[r] -> dst_blocks[r], conv states shifted by shifts[r] tokens.
// Per state, the plan holds kPlanFields int64 values (built on the host from the tensors, state_plan.cpp),
// then, per state, the running total of the states' unit bounds (each state's units with no shift, which
// bound any request's: a shift only drops bytes).
// kMaxShift: the most tokens a row can drop and still copy a byte ((row_bytes - 1) / token_bytes; any shift
// for a whole-block state, whose token_bytes is 0), so that a shift is compared before it is multiplied.
enum PlanField { kBase, kBlockStride, kBlocks, kRows, kRowStride, kRowBytes, kTokenBytes, kMaxShift, kPlanFields };

XSC_HOST_FN i64 plan_words(i64 states) { return states * (kPlanFields + 1); }

XSC_HOST_FN i64 max_shift_of(i64 row_bytes, i64 token_bytes) {
  return token_bytes > 0 ? (row_bytes > 0 ? (row_bytes - 1) / token_bytes : 0) : (i64)(~0ull >> 1);
}

// What the plan derives from its states' other fields (each kMaxShift, and the running unit bounds), on
// the host once those are set.
XSC_HOST_FN void derive_plan_fields(i64* plan, i64 states) {
  i64 end = 0;
  for (i64 j = 0; j < states; ++j) {
    i64* p = plan + j * kPlanFields;
    p[kMaxShift] = max_shift_of(p[kRowBytes], p[kTokenBytes]);
    end += units_of(p[kRows], p[kRowBytes]);
    plan[states * kPlanFields + j] = end;
  }
}

struct StatePlanSource {
  const i64* plan;
  i64 states;
  const void* src_blocks;
  const void* dst_blocks;
  const void* shifts;
  int ids_are_64bit;
  i64 requests;

  XSC_FN i64 row_count() const { return requests; }
  XSC_FN u32 units_end(i64 j) const { return (u32)plan[states * kPlanFields + j]; }
  XSC_FN u32 units_per_row() const { return units_end(states - 1); }
  XSC_FN i64 id(const void* table, i64 r) const {
    return ids_are_64bit ? ((const i64*)table)[r] : (i64)((const int*)table)[r];
  }
  // Row r: its source block, destination block (-1 where out of range) and shift (-1 if negative; a shift
  // above int32 kept as the largest int32, which no conv state's kMaxShift reaches and whole-block states
  // ignore).
  XSC_FN RowOf row_of(i64 r) const {
    const i64 shift = id(shifts, r);
    return RowOf{as_index(id(src_blocks, r)), as_index(id(dst_blocks, r)),
                 shift > 0x7fffffff ? 0x7fffffff : as_index(shift), 0};
  }
  XSC_FN bool copies(const RowOf& row) const { return row.a >= 0 && row.b >= 0 && row.c >= 0; }
  // State j's span for a row: block src -> block dst, the first `shift` tokens dropped from the source and
  // the rest landing at the start of the destination (whole-block states have token_bytes 0: no shift). A
  // block id outside the pool or a shift that leaves nothing gives an empty span. A block id below the
  // pool's block count times its stride addresses the pool itself, so that product cannot wrap.
  XSC_FN Span span(const RowOf& row, i64 j) const {
    const i64* p = plan + j * kPlanFields;
    const u64 base = (u64)p[kBase], stride = (u64)p[kBlockStride], row_stride = (u64)p[kRowStride];
    const i64 blocks = p[kBlocks], token_bytes = p[kTokenBytes];
    const bool ok = row.a < blocks && row.b < blocks && row.c <= p[kMaxShift];
    const i64 shift_bytes = ok ? (i64)row.c * token_bytes : 0;  // at most row_bytes - 1
    return Span{base + (u64)(ok ? row.a : 0) * stride + (u64)shift_bytes, base + (u64)(ok ? row.b : 0) * stride,
                ok ? p[kRowBytes] - shift_bytes : 0, ok ? p[kRows] : 0, row_stride, row_stride};
  }
};

}  // namespace xsc
