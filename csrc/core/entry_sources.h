// Where a batch's entries come from: the "Source" types run_batch (batch_schedule.h) walks. Shared by the
// SYCL kernels, the CUDA twin and the native CPU path, so every backend computes the same spans.
#pragma once

#include "copy_routine.h"

namespace xsc {

// Overflow-safe arithmetic for sizes and offsets derived from values held on the device (block ids, shifts,
// sizes): those are never checked on the host (that would synchronize), so a hostile or stale value must
// not make a product wrap around and turn an empty or shrinking span into a large one. Every helper
// compares before it multiplies. Entry sources (this file, and any new one) build their spans with them.

// a * b when 0 <= a, 0 <= b and a * b <= limit; otherwise -1. Both factors below 2**31 (the usual case)
// cannot overflow, so the division that the general check needs runs only for large values.
XSC_FN i64 checked_product(i64 a, i64 b, i64 limit) {
  if (a < 0 || b < 0 || limit < 0) return -1;
  if ((((u64)a | (u64)b) >> 31) != 0 && b != 0 && a > limit / b) return -1;
  const i64 p = a * b;
  return p <= limit ? p : -1;
}

// The byte offset of item `index` of `count` items `stride` bytes apart (a block of a pool, a row of a
// block), or -1 when index is outside [0, count) or the offset does not fit in an int64.
XSC_FN i64 checked_offset(i64 index, i64 count, i64 stride) {
  if (index < 0 || index >= count) return -1;
  return checked_product(index, stride, (i64)(~0ull >> 1));
}

// Whether [address, address + bytes) runs past 2**64 (bytes >= 0).
XSC_FN bool range_wraps(u64 address, i64 bytes) { return address + (u64)bytes < address; }

// Entries given as tables of addresses and byte counts (the batch_memcpy op).
struct PointerTableSource {
  const u64* src;
  const u64* dst;
  const void* sizes;
  int sizes_are_64bit;
  i64 n;

  XSC_FN i64 count() const { return n; }
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
// from the tensors, see state_plan.h); per request, the block ids and the token shift live on the device.
enum PlanField { kBase, kBlockStride, kBlocks, kRows, kRowStride, kRowBytes, kTokenBytes, kPlanFields };

struct StatePlanSource {
  const i64* plan;
  i64 states;
  const void* src_blocks;
  const void* dst_blocks;
  const void* shifts;
  int ids_are_64bit;
  i64 requests;

  XSC_FN i64 count() const { return requests * states; }
  // Nothing to ask for early: the scan's size reads already read everything span() reads.
  template <class G>
  XSC_FN void prefetch(const G&, i64) const {}
  // A size takes loads and a division here, so the word is the entry's index and nothing is read ahead
  // (see PointerTableSource::size_word).
  XSC_FN i64 size_word(i64 i) const { return i; }
  XSC_FN i64 units_of_word(i64 i) const {
    const Span s = span(i);
    return units_of(s.rows, s.row_bytes);
  }
  XSC_FN i64 id(const void* table, i64 r) const {
    return ids_are_64bit ? ((const i64*)table)[r] : (i64)((const int*)table)[r];
  }
  // Block src -> block dst of state j, the first `shift` tokens dropped from the source and the rest landing
  // at the start of the destination. Whole-block states have token_bytes 0, so the shift is ignored. A
  // negative or out-of-range block id, a negative shift or one that leaves nothing (however large: it is
  // compared before it is multiplied) yields an empty span at the state's base, which copies nothing.
  XSC_FN Span span(i64 i) const {
    const i64 r = (i64)quotient((u64)i, (u64)states), j = i - r * states;
    const i64* p = plan + j * kPlanFields;
    const i64 sb = id(src_blocks, r), db = id(dst_blocks, r), shift = id(shifts, r);
    const i64 src_off = checked_offset(sb, p[kBlocks], p[kBlockStride]);
    const i64 dst_off = checked_offset(db, p[kBlocks], p[kBlockStride]);
    // Bytes dropped from each row: at most row_bytes - 1, so that something is left.
    const i64 shift_bytes = checked_product(shift, p[kTokenBytes], p[kRowBytes] - 1);
    Span s;
    s.src = s.dst = (u64)p[kBase];
    s.src_stride = s.dst_stride = (u64)p[kRowStride];
    if (src_off < 0 || dst_off < 0 || shift_bytes < 0) {
      s.rows = 0;
      s.row_bytes = 0;
      return s;
    }
    s.rows = p[kRows];
    s.row_bytes = p[kRowBytes] - shift_bytes;
    s.src += (u64)src_off + (u64)shift_bytes;
    s.dst += (u64)dst_off;
    return s;
  }
};

}  // namespace xsc
