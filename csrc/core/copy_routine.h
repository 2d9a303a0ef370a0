// How a sub-group copies one unit of an entry (copy_words.h says how units are cut; schedule.h which
// sub-group copies which unit). Each kernel calls copy_unit from one place only, and copy_unit calls the
// piece copy from one place only: IGC then compiles the word loops once per kernel, which keeps the module
// small and quick to build.
//
// Overlap. A row whose source and destination overlap (a memmove with a shift, e.g. a conv state shifted
// within its own block) is copied whole by the unit holding its first chunk (by that unit's first piece,
// where units are cut in pieces), in the safe direction, with sub-group barriers between each step's loads
// and stores; its other units and pieces copy nothing.
#pragma once

#include "copy_words.h"

namespace xsc {

// At most kChunkBytes bytes, stored to the destination as 16-byte words between its head and tail bytes,
// whatever the source's alignment (sg_copy_words merges shifted words).
template <class G>
XSC_FN void sg_copy_piece(const G& g, u64 src, u64 dst, int len, bool ordered) {
  int head = (int)((16u - (u32)(dst & 15u)) & 15u);
  if (head > len) head = len;
  const int words = (len - head) >> 4;
  const int body = head + words * 16, tail = len - body;
  const int lane = (int)g.sg_lane();
  // Unordered, with a lane for every head and tail byte: those bytes are loaded before the words and stored
  // after them, so that their trips to memory overlap the words' instead of adding two of their own.
  const bool early = !ordered && g.sg_size() >= 16;
  const bool backward = ordered && dst > src;
  const XSC_GLOBAL unsigned char* s = (const XSC_GLOBAL unsigned char*)src;
  XSC_GLOBAL unsigned char* d = (XSC_GLOBAL unsigned char*)dst;
  unsigned char head_byte = 0, tail_byte = 0;
  if (early) {
    if (lane < head) head_byte = s[lane];
    if (lane < tail) tail_byte = s[body + lane];
  } else {  // the safe order: forward head, words, tail; backward tail, words, head
    const int at = backward ? body : 0;
    sg_copy_bytes(g, src + (u64)at, dst + (u64)at, backward ? tail : head, ordered);
    if (ordered) g.sg_barrier();
  }
  sg_copy_words(g, src + (u64)head, dst + (u64)head, words, ordered);
  if (early) {
    if (lane < head) d[lane] = head_byte;
    if (lane < tail) d[body + lane] = tail_byte;
  } else {
    if (ordered) g.sg_barrier();
    const int at = backward ? 0 : body;
    sg_copy_bytes(g, src + (u64)at, dst + (u64)at, backward ? head : tail, ordered);
  }
}

// A short row copied by one work-item alone, in the order that is safe for a shift within the row.
XSC_FN void item_memmove(u64 src, u64 dst, i64 len) {
  const XSC_GLOBAL unsigned char* s = (const XSC_GLOBAL unsigned char*)src;
  XSC_GLOBAL unsigned char* d = (XSC_GLOBAL unsigned char*)dst;
  if (dst <= src) {
    for (i64 i = 0; i < len; ++i) d[i] = s[i];
  } else {
    for (i64 i = len - 1; i >= 0; --i) d[i] = s[i];
  }
}

// Rows shorter than this, several to a unit, are copied one row per work-item (a 16-lane sub-group stores
// 256 bytes per word step); longer ones one row at a time by the whole sub-group.
constexpr i64 kShortRowBytes = 256;

// Piece `part` of the 2**log_parts pieces of unit `unit` of entry `e` (units_of(e.rows, e.row_bytes) of
// them; log_parts 0: the whole unit), on the calling sub-group. Units are cut in 1, 2 or 4 pieces where a
// launch's last round is dealt in pieces (schedule.h): a full 8 KiB unit's pieces are 2 KiB or more, still a
// few wide steps of a sub-group (a short unit may leave a piece empty); powers of two, so that cutting takes
// shifts, not divisions. A unit of several rows is cut between rows, a unit of one row at 16-byte offsets
// into it (so that the pieces keep the unit's alignment).
template <class G>
XSC_FN void copy_unit(const G& g, const Span& e, u32 unit, u32 part, u32 log_parts) {
  const i64 row_bytes = e.row_bytes;
  if (e.rows <= 0 || row_bytes <= 0) return;
  // The unit's rows r0 .. r1 - 1, and of each the bytes from .. to.
  u32 r0, r1;
  i64 from = 0, to = row_bytes;
  if (row_bytes > kChunkBytes) {
    const u32 chunks = chunks_per_row(row_bytes);
    r0 = unit / chunks;
    r1 = r0 + 1;
    from = (i64)(unit - r0 * chunks) * kChunkBytes;
    to = from + kChunkBytes < row_bytes ? from + kChunkBytes : row_bytes;
  } else {
    const u32 per = rows_per_unit(row_bytes);
    r0 = unit * per;
    r1 = (u64)r0 + per < (u64)e.rows ? r0 + per : (u32)e.rows;
  }
  if (r0 >= (u64)e.rows) return;
  // An overlapping row is moved whole by the piece that holds its first byte (below).
  bool holds_row_start = from == 0;
  i64 piece_from = from;
  if (log_parts > 0) {
    if (r1 - r0 > 1) {
      const u32 rows = r1 - r0;
      r1 = r0 + ((rows * (part + 1)) >> log_parts);
      r0 += (rows * part) >> log_parts;
    } else {
      const u32 len = (u32)(to - from);  // at most kChunkBytes
      holds_row_start = holds_row_start && part == 0;
      piece_from = from + (i64)(((len * part) >> log_parts) & ~15u);
      if (part + 1 < (1u << log_parts)) to = from + (i64)(((len * (part + 1)) >> log_parts) & ~15u);
    }
  }
  if (row_bytes < kShortRowBytes && r1 - r0 > 1) {
    for (u32 r = r0 + (u32)g.sg_lane(); r < r1; r += (u32)g.sg_size())
      item_memmove(e.src + (u64)r * e.src_stride, e.dst + (u64)r * e.dst_stride, row_bytes);
    return;
  }
  for (u32 r = r0; r < r1; ++r) {
    const u64 s = e.src + (u64)r * e.src_stride, d = e.dst + (u64)r * e.dst_stride;
    const bool ordered = ranges_overlap(s, d, row_bytes);
    if (s == d || (ordered && !holds_row_start)) continue;  // nothing to move / another piece moves it
    const i64 start = ordered ? 0 : piece_from, end = ordered ? row_bytes : to;
    const int pieces = (int)((end - start + kChunkBytes - 1) / kChunkBytes);  // more than one only if ordered
    const bool backward = ordered && d > s;
    for (int p = 0; p < pieces; ++p) {
      const i64 off = start + (i64)(backward ? pieces - 1 - p : p) * kChunkBytes;
      const i64 rest = end - off;
      sg_copy_piece(g, s + (u64)off, d + (u64)off, (int)(rest < kChunkBytes ? rest : kChunkBytes), ordered);
      if (ordered) g.sg_barrier();
    }
  }
}

}  // namespace xsc
