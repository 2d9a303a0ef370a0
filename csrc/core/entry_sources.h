// Where a batch's entries come from: the "Source" types run_batch (batch_schedule.h) walks. Shared by the
// SYCL kernels, the CUDA twin and the native CPU path, so every backend computes the same spans.
#pragma once

#include "copy_routine.h"

namespace xsc {

// Sizes and offsets derived from values held on the device (block ids, shifts) are never checked on the
// host (that would synchronize), so a hostile or stale value must not make a product wrap around and turn an
// empty or shrinking span into a large one. Entry sources compare such a value with a bound worked out on the
// host before they multiply it, so no product can overflow and the device does no division for it.

// Whether [address, address + bytes) runs past 2**64 (bytes >= 0).
XSC_FN bool range_wraps(u64 address, i64 bytes) { return address + (u64)bytes < address; }

// Units of entry i of a source whose size word is the entry's index: its size takes loads and arithmetic,
// so the span is worked out whole.
template <class Source>
XSC_FN i64 units_of_entry(const Source& src, i64 i) {
  const Span s = src.span(i);
  return units_of(s.rows, s.row_bytes);
}

// Entries given as tables of addresses and byte counts (the batch_memcpy op).
struct PointerTableSource {
  const u64* src;
  const u64* dst;
  const void* sizes;
  int sizes_are_64bit;
  i64 n;

  XSC_FN i64 count() const { return n; }
  static constexpr bool kSpreadScan = false;  // see run_tiles: the size loads of a work-item's entries overlap
  // The lines holding entries i .. i + 15 of the address tables, which run_tiles reads only after its scan.
  template <class G>
  XSC_FN void prefetch(const G& g, i64 i) const {
    g.prefetch_line(src + i);
    g.prefetch_line(dst + i);
  }
  // Entry i's size as loaded, with no arithmetic on it yet, and its units from that word: run_tiles reads
  // the words of its first tile while a copy is in flight and only works out the units after it, so that
  // nothing waits for the load in between.
  XSC_FN i64 size_word(i64 i) const {
    return sizes_are_64bit ? ((const i64*)sizes)[i] : (i64)((const int*)sizes)[i];
  }
  XSC_FN i64 units_of_word(i64 word) const { return units_of(1, word); }
  static constexpr bool kUnitBound = false;  // see counted_units
  XSC_FN i64 bytes(i64 i) const {
    const i64 b = size_word(i);
    return b > 0 ? b : 0;  // negative sizes are rejected on the host where the host can see them
  }
  XSC_FN Span span(i64 i) const {
    Span s;
    s.src = src[i];
    s.dst = dst[i];
    s.row_bytes = bytes(i);
    s.rows = 1;
    s.src_stride = s.dst_stride = 0;
    return s;
  }
};

// Entries computed from the state tensors themselves (the copy_states_ op): entry i is (request r, state j)
// with r = i / states, j = i % states. Per state, the plan holds kPlanFields int64 values (built on the host
// from the tensors, see state_plan.h), and after those each state's unit bound; per request, the block ids
// and the token shift live on the device.
// kMaxShift: the most tokens a row can drop and still copy a byte ((row_bytes - 1) / token_bytes; any shift
// for a whole-block state, whose token_bytes is 0), so that a shift is compared before it is multiplied.
enum PlanField { kBase, kBlockStride, kBlocks, kRows, kRowStride, kRowBytes, kTokenBytes, kMaxShift, kPlanFields };

// The plan's int64 words for `states` states: their fields, then their unit bounds (each state's units with
// no shift, which bound any request's: a shift only drops bytes). The bounds are an array of their own
// because the small-batch scan reads every state's: 72 states' bounds lie in 5 lines, where a word among
// each state's fields spread the scan's loads over 41 (copy_states on one request's step, 72 states: 0.865
// of cudaMemcpyAsync that way, 0.877 - 0.881 this way; H200 sweep).
XSC_HOST_FN i64 plan_words(i64 states) { return states * (kPlanFields + 1); }

// The plan's kMaxShift for a row of row_bytes from which each token of shift drops token_bytes (on the host).
XSC_HOST_FN i64 max_shift_of(i64 row_bytes, i64 token_bytes) {
  return token_bytes > 0 ? (row_bytes > 0 ? (row_bytes - 1) / token_bytes : 0) : (i64)(~0ull >> 1);
}

// What the plan derives from its states' other fields (each kMaxShift, and the unit bounds), on the host
// once those are set.
XSC_HOST_FN void derive_plan_fields(i64* plan, i64 states) {
  for (i64 j = 0; j < states; ++j) {
    i64* p = plan + j * kPlanFields;
    p[kMaxShift] = max_shift_of(p[kRowBytes], p[kTokenBytes]);
    plan[states * kPlanFields + j] = units_of(p[kRows], p[kRowBytes]);
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

  XSC_FN i64 count() const { return requests * states; }
  static constexpr bool kSpreadScan = true;  // see run_tiles: each span takes dependent loads and a division
  // Nothing to ask for early: the scan reads a word of every state's plan, which brings in its lines.
  template <class G>
  XSC_FN void prefetch(const G&, i64) const {}
  // A size takes loads and a division here, so the word is the entry's index and nothing is read ahead
  // (see PointerTableSource::size_word).
  XSC_FN i64 size_word(i64 i) const { return i; }
  XSC_FN i64 units_of_word(i64 i) const { return units_of_entry(*this, i); }
  // One plan word where the span takes eleven loads (see counted_units): the small-batch scan of one
  // request's step (72 states) counted units from whole spans before.
  static constexpr bool kUnitBound = true;
  XSC_FN i64 unit_bound(i64 i) const {
    const i64 r = i < states ? 0 : (i64)quotient((u64)i, (u64)states);
    return plan[states * kPlanFields + (i - r * states)];
  }
  XSC_FN i64 id(const void* table, i64 r) const {
    return ids_are_64bit ? ((const i64*)table)[r] : (i64)((const int*)table)[r];
  }
  // Block src -> block dst of state j, the first `shift` tokens dropped from the source and the rest landing
  // at the start of the destination. Whole-block states have token_bytes 0, so the shift is ignored. A
  // negative or out-of-range block id, a negative shift or one that leaves nothing (however large: it is
  // compared with kMaxShift before it is multiplied) yields an empty span, which copies nothing. A block id
  // below the pool's block count times its stride addresses the pool itself, so that product cannot wrap.
  // (Checked products in their place cost copy_states_ 2 - 4 % of the roofline on an H200, one request 0.742
  // against 0.771: the scans compute every span.)
  XSC_FN Span span(i64 i) const {
    // Every load first and no early return (as SpecDecodeSource::span_of): the plan's fields and the ids
    // then travel together, one trip before the copy.
    // No division for the first request's entries: one request's step is the common call, and there each
    // span lies on the way to a first copy (step_p: 0.857 / 0.859 of cudaMemcpyAsync with the division,
    // 0.864 / 0.869 without; H200 sweep). unit_bound splits i the same way.
    const i64 r = i < states ? 0 : (i64)quotient((u64)i, (u64)states), j = i - r * states;
    const i64* p = plan + j * kPlanFields;
    const i64 sb = id(src_blocks, r), db = id(dst_blocks, r), shift = id(shifts, r);
    const u64 base = (u64)p[kBase], stride = (u64)p[kBlockStride], row_stride = (u64)p[kRowStride];
    const i64 blocks = p[kBlocks], rows = p[kRows], row_bytes = p[kRowBytes];
    const i64 token_bytes = p[kTokenBytes], max_shift = p[kMaxShift];
    const bool ok = sb >= 0 && db >= 0 && sb < blocks && db < blocks && shift >= 0 && shift <= max_shift;
    const i64 shift_bytes = (ok ? shift : 0) * token_bytes;  // at most row_bytes - 1
    Span s;
    s.src = base + (u64)(ok ? sb : 0) * stride + (u64)shift_bytes;
    s.dst = base + (u64)(ok ? db : 0) * stride;
    s.src_stride = s.dst_stride = row_stride;
    s.rows = ok ? rows : 0;
    s.row_bytes = ok ? row_bytes - shift_bytes : 0;
    return s;
  }
};

}  // namespace xsc
