// The per-work-item copy logic shared by every backend: the SYCL kernel source (compiled ahead of time by
// icpx or at run time by SYCL's kernel compiler) and the CUDA twin both include this header and only supply
// a small "Group" adapter (ids, barriers, group and sub-group scans, a sub-group sum and shuffle, one scratch
// array in local memory).
//
// Work model. A batch is a list of entries; entry i copies `rows` rows of `row_bytes` bytes from `src` to
// `dst` (rows == 1 is a plain memmove of row_bytes bytes). Each entry is cut into units of about
// kChunkBytes, so work is divided by bytes, not by entries. This header says how a sub-group copies one
// unit; batch_schedule.h and small_batch.h say which sub-group copies which unit.
//
// Overlap. An entry whose source and destination ranges overlap (memmove) is done by a single sub-group in
// the safe direction, with a sub-group barrier between the loads and the stores of each step. Rows of one
// entry must not overlap other rows, and entries must not overlap each other (documented contract).
//
// All address arithmetic is on uint64_t: XPU device pointers have bit 63 set.
#pragma once

#ifndef XSC_CHUNK_BYTES
#define XSC_CHUNK_BYTES 8192  // tuned on an H200: see docs/tuning-rounds-1-3.md
#endif

#if defined(__CUDACC__)
#define XSC_FN __device__ __forceinline__
#define XSC_HOST_FN __host__ __device__ inline  // also called by the launchers
#else
#define XSC_FN inline
#define XSC_HOST_FN inline
#endif

namespace xsc {

typedef unsigned long long u64;
typedef long long i64;

#ifndef XSC_UNROLL
#define XSC_UNROLL 4
#endif

#ifndef XSC_SMALL_UNROLL16
#define XSC_SMALL_UNROLL16 8
#endif

constexpr i64 kChunkBytes = XSC_CHUNK_BYTES;
constexpr int kUnroll = XSC_UNROLL;  // independent loads in flight per work-item before its stores
// The same for 16-byte loads in the small-batch builds (small_batch.h). Each sub-group there copies only
// two or three units, so a unit taken in fewer round trips to memory ends the batch sooner; in the tile
// builds, which stream long runs of units, 8 loads lost to 4 (docs/tuning-rounds-1-3.md). The Group adapter
// says which applies: G::kUnroll16. Every op's small build takes it: copy_states' kept 4 until its scan
// counted units from one plan word (with 8 it had spilled, then lost; now 8 gains, docs/performance.md).
constexpr int kSmallUnroll16 = XSC_SMALL_UNROLL16;

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

// a / b without a 64-bit division in the common case (both fit in 32 bits). A GPU has no 64-bit divide:
// each one is a routine of about a hundred instructions, and the scans run them for every entry
// (copy_states on `step`, whose spans divide by the state count: 0.711 of the roofline with them, 0.746
// with none, on an H200).
XSC_HOST_FN u64 quotient(u64 a, u64 b) {
  if ((a | b) >> 32) return a / b;
  return (u64)((unsigned)a / (unsigned)b);
}

XSC_HOST_FN i64 rows_per_unit(i64 row_bytes) {
  i64 r = (i64)quotient((u64)kChunkBytes, (u64)(row_bytes > 0 ? row_bytes : 1));
  return r > 0 ? r : 1;
}

// Units an entry is cut into; 0 for an empty entry. (Also on the host: the plans carry units.)
XSC_HOST_FN i64 units_of(i64 rows, i64 row_bytes) {
  if (rows <= 0 || row_bytes <= 0) return 0;
  if (rows == 1) return (row_bytes + kChunkBytes - 1) / kChunkBytes;
  i64 rpu = rows_per_unit(row_bytes);
  return (i64)quotient((u64)(rows + rpu - 1), (u64)rpu);
}

XSC_FN bool ranges_overlap(u64 src, u64 dst, i64 bytes) {
  return dst < src + (u64)bytes && src < dst + (u64)bytes;
}

// How the plain copy loads and stores a word. With `Streaming` a backend may give the memory system hints
// that the data is read once and written once (the CUDA twin does, for 16-byte words: batch_memcpy_kernel.cuh);
// these plain versions are what every other backend and word type gets. Only a range that no other part of
// the launch writes may be read with Streaming (non-coherent loads): overlapping ranges never are.
template <bool Streaming, class W>
XSC_FN W load_word(const W* p) {
  return *p;
}
template <bool Streaming, class W>
XSC_FN void store_word(W* p, const W& v) {
  *p = v;
}

// Sub-group copy of `count` words of type W; both pointers W-aligned. With `ordered`, the range may overlap
// and is walked in the safe direction, loads of a step separated from its stores by a sub-group barrier.
// `Streaming`: see load_word (callers pass it only for ranges that do not overlap).
// Counts are 32-bit: callers hand over at most kChunkBytes at a time, which keeps registers (and so
// occupancy) in check.
template <class W, bool Streaming = false, class G>
XSC_FN void sg_copy_words(G& g, u64 src, u64 dst, int count, bool ordered) {
  const W* s = (const W*)src;
  W* d = (W*)dst;
  const int lanes = (int)g.sg_size();
  const int lane = (int)g.sg_lane();
  constexpr int unroll = sizeof(W) == 16 ? G::kUnroll16 : kUnroll;
  const int step = lanes * unroll;
  const bool backward = ordered && dst > src;
  const int steps = (count + step - 1) / step;
  for (int n = 0; n < steps; ++n) {
    const int base = (backward ? steps - 1 - n : n) * step;
    W v[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      int i = base + u * lanes + lane;
      if (i < count) v[u] = load_word<Streaming>(s + i);
    }
    if (ordered) g.sg_barrier();
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      int i = base + u * lanes + lane;
      if (i < count) store_word<Streaming>(d + i, v[u]);
    }
  }
}

template <class G>
XSC_FN void sg_copy_bytes(G& g, u64 src, u64 dst, int count, bool ordered) {
  sg_copy_words<unsigned char>(g, src, dst, count, ordered);
}

// Bytes k .. k + 15 of the 32 bytes a, b (little-endian, as every GPU and CPU we build for): the word a
// source at k bytes past a 16-byte boundary has once the destination is aligned. `s` is 0..63 bits; the
// shift of `hi` is split in two so that s == 0 shifts by 63 + 1, never by 64 (undefined in C++).
XSC_FN u64 funnel_right(u64 lo, u64 hi, int s) { return (lo >> s) | ((hi << 1) << (63 - s)); }
XSC_FN Word16 merge_words(const Word16& a, const Word16& b, int k) {
  const int s = (k & 7) * 8;
  const u64 w0 = k < 8 ? a.lo : a.hi, w1 = k < 8 ? a.hi : b.lo, w2 = k < 8 ? b.lo : b.hi;
  Word16 r;
  r.lo = funnel_right(w0, w1, s);
  r.hi = funnel_right(w1, w2, s);
  return r;
}

// A 16-byte word of lane `from` of the sub-group, by two 8-byte shuffles (G::sg_shuffle). Every lane of the
// sub-group must call it together.
template <class G>
XSC_FN Word16 sg_shuffle_word(G& g, const Word16& w, int from) {
  Word16 r;
  r.lo = g.sg_shuffle(w.lo, from);
  r.hi = g.sg_shuffle(w.hi, from);
  return r;
}

// Sub-group copy of `count` 16-byte words to a 16-byte aligned `dst` from a `src` that is not aligned
// (k = src mod 16, 1..15). Each destination word i is built from the two aligned source words s[i], s[i+1]
// that hold its bytes, so every load and store is a full 16-byte access. Only aligned words that hold at
// least one byte of [src, src + 16 * count) are read: s[0 .. count], since k > 0. No load reaches a page
// the range does not touch.
//
// Each work-item loads only s[i] of its words, all of them before any merge, as sg_copy_words does, and
// takes s[i + 1] from the next lane by a shuffle; the last lane takes lane 0's word of the next slot, and
// for its last slot loads the word after the step itself. Loading both words per destination word instead
// read every source word twice, and nvcc 13 (sm_90) put each word's merge right after its two loads, so a
// work-item waited one trip to memory per word (0.55 of the roofline on an H200 for odd offsets, against
// 0.77 aligned); loading all 2 x unroll words first spilled in the small-batch builds. The shuffles need
// the Group adapter's sg_shuffle (8 bytes from another lane).
// `ordered` as in sg_copy_words: every read of a step comes before its barrier, and the only word read
// beyond the step's own (the word after it) carries bytes the safe direction has not yet written or bytes
// that are dropped. Called by every lane of the sub-group together (the shuffles), like sg_copy_words.
template <bool Streaming = false, class G>
XSC_FN void sg_copy_shifted_shuffled(G& g, u64 src, u64 dst, int count, bool ordered) {
  const int k = (int)(src & 15u);
  const Word16* s = (const Word16*)(src - (u64)k);
  Word16* d = (Word16*)dst;
  const int lanes = (int)g.sg_size();
  const int lane = (int)g.sg_lane();
  const bool last_lane = lane == lanes - 1;
  const int next_lane = last_lane ? 0 : lane + 1;
  constexpr int unroll = G::kUnroll16;
  const int step = lanes * unroll;
  const bool backward = ordered && dst > src;
  const int steps = (count + step - 1) / step;
  for (int n = 0; n < steps; ++n) {
    const int base = (backward ? steps - 1 - n : n) * step;
    Word16 own[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      int i = base + u * lanes + lane;
      own[u] = Word16{0, 0};
      if (i <= count) own[u] = load_word<Streaming>(s + i);
    }
    Word16 after = {0, 0};  // s[base + step]: needed by the step's last word when it is < count
    if (last_lane && base + step <= count) after = load_word<Streaming>(s + base + step);
    Word16 v[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      // Lane 0 sends the last lane its word of the next slot; every other lane sends its word of this one.
      // (Chosen field by field: a choice between whole words went through the stack in nvcc 13.)
      const bool ahead = lane == 0 && u + 1 < unroll;
      Word16 sent;
      sent.lo = ahead ? own[u + 1 < unroll ? u + 1 : u].lo : own[u].lo;
      sent.hi = ahead ? own[u + 1 < unroll ? u + 1 : u].hi : own[u].hi;
      Word16 right = sg_shuffle_word(g, sent, next_lane);
      if (u + 1 == unroll && last_lane) right = after;
      v[u] = merge_words(own[u], right, k);
    }
    if (ordered) g.sg_barrier();
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      int i = base + u * lanes + lane;
      if (i < count) store_word<Streaming>(d + i, v[u]);
    }
  }
}

// The same copy with each work-item loading both source words of each of its destination words, and
// merging them, word by word: the second read of each source word is the cache's. nvcc 13 (sm_90) puts
// each word's merge right after its two loads, so a work-item waits one trip to memory per word; but it
// needs fewer registers: the small-batch builds, whose schedule holds more live state, spill with the
// shuffled copy (nvcc 13, sm_90, -Xptxas -v: 4 - 288 bytes at 2 - 8 words per step), so they keep this one.
// The tile builds, which every batch of more than a few hundred entries takes, set G::kShiftedShuffle.
template <bool Streaming = false, class G>
XSC_FN void sg_copy_shifted_pairwise(G& g, u64 src, u64 dst, int count, bool ordered) {
  const int k = (int)(src & 15u);
  const Word16* s = (const Word16*)(src - (u64)k);
  Word16* d = (Word16*)dst;
  const int lanes = (int)g.sg_size();
  const int lane = (int)g.sg_lane();
  constexpr int unroll = G::kUnroll16;
  const int step = lanes * unroll;
  const bool backward = ordered && dst > src;
  const int steps = (count + step - 1) / step;
  for (int n = 0; n < steps; ++n) {
    const int base = (backward ? steps - 1 - n : n) * step;
    Word16 v[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      int i = base + u * lanes + lane;
      if (i < count) v[u] = merge_words(load_word<Streaming>(s + i), load_word<Streaming>(s + i + 1), k);
    }
    if (ordered) g.sg_barrier();
#pragma unroll
    for (int u = 0; u < unroll; ++u) {
      int i = base + u * lanes + lane;
      if (i < count) store_word<Streaming>(d + i, v[u]);
    }
  }
}

template <bool Streaming = false, class G>
XSC_FN void sg_copy_shifted(G& g, u64 src, u64 dst, int count, bool ordered) {
  if (G::kShiftedShuffle) sg_copy_shifted_shuffled<Streaming>(g, src, dst, count, ordered);
  else sg_copy_shifted_pairwise<Streaming>(g, src, dst, count, ordered);
}

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

}  // namespace xsc
