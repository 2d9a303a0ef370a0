// The per-work-item copy logic shared by every backend: the SYCL kernel source (compiled ahead of time by
// icpx or at run time by SYCL's kernel compiler) and the CUDA twin both include this header and only supply
// a small "Group" adapter (ids, barriers, group and sub-group scans, a sub-group sum and shuffle, one scratch
// array in local memory).
//
// Work model. A batch is a list of entries; entry i copies `rows` rows of `row_bytes` bytes from `src` to
// `dst` (rows == 1 is a plain memmove of row_bytes bytes). Each entry is cut into units of about
// kChunkBytes, so work is divided by bytes, not by entries. This header says how a sub-group copies one
// unit (with the words of copy_words.h, and shifted_copy.h where source and destination disagree mod 16);
// batch_schedule.h and small_batch.h say which sub-group copies which unit.
//
// Overlap. An entry whose source and destination ranges overlap (memmove) is done by a single sub-group in
// the safe direction, with a sub-group barrier between the loads and the stores of each step. Rows of one
// entry must not overlap other rows, and entries must not overlap each other (documented contract).
#pragma once

#include "shifted_copy.h"

namespace xsc {

// A range copied with 16-byte stores: bytes up to the destination's first 16-byte boundary, whole words,
// then the last bytes. The words are loaded aligned too: directly when source and destination agree mod 16,
// else through sg_copy_shifted. (Until 2026-12 a mismatch fell back to the widest common width, down to one
// byte per access: 0.26 of the roofline for odd offsets on an H200, see docs/bench-history.md.)
template <bool Streaming = false, class G>
XSC_FN void sg_copy_aligned(G& g, u64 src, u64 dst, int len, bool ordered) {
  int head = (int)((16 - (int)(dst & 15u)) & 15);
  if (head > len) head = len;
  const int words = (len - head) / 16;
  const int body = words * 16;
  const int tail = len - head - body;
  const bool word_aligned_src = ((src + (u64)head) & 15u) == 0;
  const int lane = (int)g.sg_lane();
  if (!ordered && g.sg_size() >= 16) {
    // The head and tail bytes (at most 15 each, one per work-item) are loaded before the words and stored
    // after them: their trips to memory then overlap the words' instead of adding two trips of their own
    // to every piece that does not start and end on a 16-byte boundary.
    const unsigned char* s = (const unsigned char*)src;
    unsigned char* d = (unsigned char*)dst;
    const int t = head + body + lane;
    unsigned char hb = 0, tb = 0;
    if (lane < head) hb = s[lane];
    if (lane < tail) tb = s[t];
    if (word_aligned_src) sg_copy_words<Word16, Streaming>(g, src + head, dst + head, words, false);
    else sg_copy_shifted<Streaming>(g, src + head, dst + head, words, false);
    if (lane < head) d[lane] = hb;
    if (lane < tail) d[t] = tb;
    return;
  }
  const bool backward = ordered && dst > src;
  // Safe order for an overlapping range: forward = head, body, tail; backward = tail, body, head.
  if (!backward) sg_copy_bytes(g, src, dst, head, ordered);
  else sg_copy_bytes(g, src + head + body, dst + head + body, tail, ordered);
  if (ordered) g.sg_barrier();
  if (word_aligned_src) sg_copy_words<Word16, Streaming>(g, src + head, dst + head, words, ordered);
  else sg_copy_shifted<Streaming>(g, src + head, dst + head, words, ordered);
  if (ordered) g.sg_barrier();
  if (!backward) sg_copy_bytes(g, src + head + body, dst + head + body, tail, ordered);
  else sg_copy_bytes(g, src, dst, head, ordered);
}

// One contiguous range of at most kChunkBytes, copied by one sub-group with 16-byte accesses whatever the
// alignment of either side.
template <bool Streaming = false, class G>
XSC_FN void sg_copy_piece(G& g, u64 src, u64 dst, int len, bool ordered) {
  sg_copy_aligned<Streaming>(g, src, dst, len, ordered);
}

// A range of any length, cut into pieces of kChunkBytes. An overlapping range takes its pieces in the safe
// direction (each piece only reads bytes no earlier piece has written), with a barrier between pieces.
template <class G>
XSC_FN void sg_copy_range(G& g, u64 src, u64 dst, i64 len, bool ordered) {
  const i64 pieces = (len + kChunkBytes - 1) / kChunkBytes;
  const bool backward = ordered && dst > src;
  for (i64 p = 0; p < pieces; ++p) {
    const i64 off = (backward ? pieces - 1 - p : p) * kChunkBytes;
    const i64 rest = len - off;
    sg_copy_piece(g, src + (u64)off, dst + (u64)off, (int)(rest < kChunkBytes ? rest : kChunkBytes), ordered);
    if (ordered) g.sg_barrier();
  }
}

// A short row copied by one work-item alone: a plain sequential memmove, safe for an in-row shift.
XSC_FN void item_memmove(u64 src, u64 dst, i64 len) {
  const XSC_GLOBAL unsigned char* s = (const XSC_GLOBAL unsigned char*)src;
  XSC_GLOBAL unsigned char* d = (XSC_GLOBAL unsigned char*)dst;
  if (dst <= src) {
    for (i64 i = 0; i < len; ++i) d[i] = s[i];
  } else {
    for (i64 i = len - 1; i >= 0; --i) d[i] = s[i];
  }
}

// Rows shorter than this are copied one row per work-item; longer ones one row per sub-group.
constexpr i64 kShortRowBytes = 256;

// Copy unit `unit` of entry `e` on the calling sub-group.
template <class G>
XSC_FN void copy_unit(G& g, const Span& e, i64 unit) {
  if (e.rows == 1) {
    if (e.src == e.dst) return;  // memmove onto itself
    if (ranges_overlap(e.src, e.dst, e.row_bytes)) {
      // Chunks of an overlapping range cannot run in parallel: unit 0 does it all, in order.
      if (unit == 0) sg_copy_range(g, e.src, e.dst, e.row_bytes, true);
      return;
    }
    const i64 off = unit * kChunkBytes;
    i64 len = e.row_bytes - off;
    if (len > kChunkBytes) len = kChunkBytes;
    sg_copy_piece(g, e.src + (u64)off, e.dst + (u64)off, (int)len, false);
    return;
  }
  const i64 rpu = rows_per_unit(e.row_bytes);
  const i64 first = unit * rpu;
  i64 last = first + rpu;
  if (last > e.rows) last = e.rows;
  if (e.row_bytes < kShortRowBytes) {
    for (i64 r = first + g.sg_lane(); r < last; r += g.sg_size())
      item_memmove(e.src + (u64)r * e.src_stride, e.dst + (u64)r * e.dst_stride, e.row_bytes);
    return;
  }
  for (i64 r = first; r < last; ++r) {
    u64 s = e.src + (u64)r * e.src_stride, d = e.dst + (u64)r * e.dst_stride;
    if (s != d) sg_copy_range(g, s, d, e.row_bytes, ranges_overlap(s, d, e.row_bytes));
  }
}

}  // namespace xsc
