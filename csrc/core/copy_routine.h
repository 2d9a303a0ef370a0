// The per-work-item copy logic shared by every backend: the SYCL kernel source (compiled ahead of time by
// icpx or at run time by SYCL's kernel compiler) and the CUDA twin both include this header and only supply
// a small "Group" adapter (ids, barriers, a group scan and two scratch arrays in local memory).
//
// Work model. A batch is a list of entries; entry i copies `rows` rows of `row_bytes` bytes from `src` to
// `dst` (rows == 1 is a plain memmove of row_bytes bytes). Each entry is cut into units of about
// kChunkBytes, so work is divided by bytes, not by entries. Unit k of the whole batch belongs to work-group
// k % num_groups: a huge entry is spread over every group, and thousands of tiny entries are shared out a
// few per group. Nothing about the sizes has to be known on the host: every group scans the entries' unit
// counts itself (one group scan per tile of entries) and then its sub-groups take its units round-robin.
//
// Overlap. An entry whose source and destination ranges overlap (memmove) is done by a single sub-group in
// the safe direction, with a sub-group barrier between the loads and the stores of each step. Rows of one
// entry must not overlap other rows, and entries must not overlap each other (documented contract).
//
// All address arithmetic is on uint64_t: XPU device pointers have bit 63 set.
#pragma once

#ifndef XSC_CHUNK_BYTES
#define XSC_CHUNK_BYTES 8192  // tuned on an H200: see docs/performance.md
#endif

#if defined(__CUDACC__)
#define XSC_FN __device__ __forceinline__
#else
#define XSC_FN inline
#endif

namespace xsc {

typedef unsigned long long u64;
typedef long long i64;

#ifndef XSC_UNROLL
#define XSC_UNROLL 4
#endif

constexpr i64 kChunkBytes = XSC_CHUNK_BYTES;
constexpr int kUnroll = XSC_UNROLL;  // independent loads in flight per work-item before its stores

struct alignas(16) Word16 {
  u64 lo, hi;
};

// One entry of a batch, as the kernel sees it.
struct Span {
  u64 src, dst;
  i64 row_bytes;  // bytes per row (the whole entry when rows == 1)
  i64 rows;
  u64 src_stride, dst_stride;  // bytes between rows
};

XSC_FN i64 rows_per_unit(i64 row_bytes) {
  i64 r = kChunkBytes / (row_bytes > 0 ? row_bytes : 1);
  return r > 0 ? r : 1;
}

// Units an entry is cut into; 0 for an empty entry.
XSC_FN i64 units_of(i64 rows, i64 row_bytes) {
  if (rows <= 0 || row_bytes <= 0) return 0;
  if (rows == 1) return (row_bytes + kChunkBytes - 1) / kChunkBytes;
  i64 rpu = rows_per_unit(row_bytes);
  return (rows + rpu - 1) / rpu;
}

// Widest access (1..16 bytes) that keeps both sides aligned once the destination is aligned.
XSC_FN int common_width(u64 src, u64 dst) {
  u64 mis = (src ^ dst) & 15u;
  if (mis == 0) return 16;
  if ((mis & 7u) == 0) return 8;
  if ((mis & 3u) == 0) return 4;
  if ((mis & 1u) == 0) return 2;
  return 1;
}

XSC_FN bool ranges_overlap(u64 src, u64 dst, i64 bytes) {
  return dst < src + (u64)bytes && src < dst + (u64)bytes;
}

// Sub-group copy of `count` words of type W; both pointers W-aligned. With `ordered`, the range may overlap
// and is walked in the safe direction, loads of a step separated from its stores by a sub-group barrier.
// Counts are 32-bit: callers hand over at most kChunkBytes at a time, which keeps registers (and so
// occupancy) in check.
template <class W, class G>
XSC_FN void sg_copy_words(G& g, u64 src, u64 dst, int count, bool ordered) {
  const W* s = (const W*)src;
  W* d = (W*)dst;
  const int lanes = (int)g.sg_size();
  const int lane = (int)g.sg_lane();
  const int step = lanes * kUnroll;
  const bool backward = ordered && dst > src;
  const int steps = (count + step - 1) / step;
  for (int n = 0; n < steps; ++n) {
    const int base = (backward ? steps - 1 - n : n) * step;
    W v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int i = base + u * lanes + lane;
      if (i < count) v[u] = s[i];
    }
    if (ordered) g.sg_barrier();
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      int i = base + u * lanes + lane;
      if (i < count) d[i] = v[u];
    }
  }
}

template <class G>
XSC_FN void sg_copy_bytes(G& g, u64 src, u64 dst, int count, bool ordered) {
  sg_copy_words<unsigned char>(g, src, dst, count, ordered);
}

template <class W, class G>
XSC_FN void sg_copy_aligned(G& g, u64 src, u64 dst, int len, bool ordered) {
  const int w = (int)sizeof(W);
  int head = (int)((w - (int)(dst & (u64)(w - 1))) & (w - 1));
  if (head > len) head = len;
  const int words = (len - head) / w;
  const int body = words * w;
  const int tail = len - head - body;
  const bool backward = ordered && dst > src;
  // Safe order for an overlapping range: forward = head, body, tail; backward = tail, body, head.
  if (!backward) sg_copy_bytes(g, src, dst, head, ordered);
  else sg_copy_bytes(g, src + head + body, dst + head + body, tail, ordered);
  if (ordered) g.sg_barrier();
  sg_copy_words<W>(g, src + head, dst + head, words, ordered);
  if (ordered) g.sg_barrier();
  if (!backward) sg_copy_bytes(g, src + head + body, dst + head + body, tail, ordered);
  else sg_copy_bytes(g, src, dst, head, ordered);
}

// One contiguous range of at most kChunkBytes, copied by one sub-group with the widest accesses its
// alignment allows.
template <class G>
XSC_FN void sg_copy_piece(G& g, u64 src, u64 dst, int len, bool ordered) {
  switch (common_width(src, dst)) {
    case 16: sg_copy_aligned<Word16>(g, src, dst, len, ordered); break;
    case 8: sg_copy_aligned<u64>(g, src, dst, len, ordered); break;
    case 4: sg_copy_aligned<unsigned int>(g, src, dst, len, ordered); break;
    case 2: sg_copy_aligned<unsigned short>(g, src, dst, len, ordered); break;
    default: sg_copy_bytes(g, src, dst, len, ordered); break;
  }
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
  const unsigned char* s = (const unsigned char*)src;
  unsigned char* d = (unsigned char*)dst;
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

// Unit k of the batch belongs to group k % groups. For an entry whose units are [k0, k0 + u), the first one
// this group owns is k0 + first_owned(...), and it owns owned_count(...) of them, every `groups`-th.
XSC_FN i64 first_owned(i64 k0, i64 me, i64 groups) { return ((me - k0 % groups) % groups + groups) % groups; }
XSC_FN i64 owned_count(i64 k0, i64 u, i64 me, i64 groups) {
  const i64 r = first_owned(k0, me, groups);
  return r < u ? (u - 1 - r) / groups + 1 : 0;
}

#ifndef XSC_ITEMS
#define XSC_ITEMS 8
#endif
constexpr int kItems = XSC_ITEMS;  // entries per work-item per tile: one tile covers local_size * kItems
// Positions in one group's unit list of one tile fit 32 bits: that would take 2^32 units of kChunkBytes.

// The entry holding position j of this group's unit list (the last entry of the tile whose start is <= j:
// entries owning none share the next one's start), its span, and which of its units that position is.
template <class Source>
XSC_FN void locate(const Source& src, const unsigned int* start, const unsigned int* offset, i64 tile, i64 base,
                   i64 groups, i64 j, Span& span, i64& unit) {
  i64 lo = 0, hi = tile - 1;
  while (lo < hi) {
    const i64 mid = (lo + hi + 1) / 2;
    if ((i64)start[mid] <= j) lo = mid;
    else hi = mid - 1;
  }
  span = src.span(base + lo);
  unit = (i64)offset[lo] + (j - (i64)start[lo]) * groups;
}

// The whole batch, called by every work-item of every group. `Source` yields count(), units(i), span(i).
// g.scratch_start() / g.scratch_first() are local-memory arrays of local_size() * kItems entries: for each
// entry of the current tile, the position of its first owned unit in this group's unit list, and the
// offset (< groups) of that unit within the entry. Lookups then touch local memory only.
template <class G, class Source>
XSC_FN void run_batch(G& g, const Source& src) {
  const i64 n = src.count();
  const i64 groups = g.num_groups();
  const i64 me = g.group_id();
  const i64 t = g.local_id();
  const i64 tile = g.local_size() * kItems;
  unsigned int* start = g.scratch_start();
  unsigned int* offset = g.scratch_first();
  i64 units_before = 0;  // units of all entries before this tile (same on every work-item)
  for (i64 base = 0; base < n; base += tile) {
    const i64 e0 = base + t * kItems;  // this work-item's entries: e0 .. e0 + kItems - 1
    i64 u[kItems];
    i64 sum = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      u[k] = e0 + k < n ? src.units(e0 + k) : 0;
      sum += u[k];
    }
    i64 tile_units = 0;
    i64 kk = units_before + g.exclusive_scan(sum, &tile_units);  // global index of e0's first unit
    i64 mine[kItems];
    i64 my_sum = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      mine[k] = owned_count(kk, u[k], me, groups);
      offset[t * kItems + k] = (unsigned int)first_owned(kk, me, groups);
      my_sum += mine[k];
      kk += u[k];
    }
    i64 my_units = 0;
    i64 pos = g.exclusive_scan(my_sum, &my_units);
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      start[t * kItems + k] = (unsigned int)pos;
      pos += mine[k];
    }
    g.barrier();
    // Sub-group w takes positions w, w + num_sgs, ... of this group's unit list. The next unit's entry is
    // looked up (and its span loaded) before the current unit is copied, so that latency overlaps the copy.
    i64 j = g.sg_id();
    Span span;
    i64 unit = 0;
    if (j < my_units) locate(src, start, offset, tile, base, groups, j, span, unit);
    while (j < my_units) {
      const i64 next_j = j + g.num_sgs();
      Span next_span;
      i64 next_unit = 0;
      if (next_j < my_units) locate(src, start, offset, tile, base, groups, next_j, next_span, next_unit);
      copy_unit(g, span, unit);
      span = next_span;
      unit = next_unit;
      j = next_j;
    }
    g.barrier();  // the scratch arrays are rewritten by the next tile
    units_before += tile_units;
  }
}

}  // namespace xsc
