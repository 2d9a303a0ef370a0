// The words every backend's kernel body is made of: integer types, what an entry is (Span) and how it is cut
// into units, and how one sub-group moves 16-byte words and bytes. Shared by the SYCL kernels (compiled by
// icpx ahead of time or at run time by SYCL's kernel compiler), the CUDA twin and the host schedule tests.
//
// Written for Intel GPUs first: a 16-byte word is four 32-bit values (dg2 has no native 64-bit integer
// arithmetic, and 32-bit lanes are what a GRF holds), indices within a piece are 32-bit, and a work-item
// keeps a step's words in flight (G::kAlignedLoads or kShiftedLoads) and nothing else across it, so that
// IGC keeps everything in registers (no spill, no scratch: tests/test_device_compile.py). Addresses are
// uint64_t: XPU pointers have bit 63 set.
#pragma once

#if defined(__CUDACC__)
#define XSC_FN __device__ __forceinline__
#define XSC_HOST_FN __host__ __device__ inline  // also called by the host code that builds plans
#else
#define XSC_FN inline
#define XSC_HOST_FN inline
#endif

// The address space of every pointer the copy loads from or stores to. In SYCL device code a plain pointer
// is generic: IGC then tests at run time which space each access hits and may split 16-byte accesses.
// Our copies only ever touch global memory.
#if defined(__SYCL_DEVICE_ONLY__)
#define XSC_GLOBAL __attribute__((opencl_global))
#else
#define XSC_GLOBAL
#endif

#ifndef XSC_CHUNK_BYTES
#define XSC_CHUNK_BYTES 8192  // bytes per unit of work; 96 in the host tests, to reach every edge cheaply
#endif

namespace xsc {

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;

constexpr int kChunkBytes = XSC_CHUNK_BYTES;

struct alignas(16) Word16 {
  u32 x, y, z, w;
};

// One entry of a batch as the copy sees it: `rows` rows of `row_bytes` bytes (rows == 1: one memmove).
// A row may overlap itself (a memmove with a shift); rows must not overlap other rows or other entries.
struct Span {
  u64 src, dst;
  i64 row_bytes;
  i64 rows;
  u64 src_stride, dst_stride;  // bytes between rows
};

XSC_HOST_FN bool ranges_overlap(u64 src, u64 dst, i64 bytes) {
  return dst < src + (u64)bytes && src < dst + (u64)bytes;
}

// How an entry is cut into units (host and device agree: plans carry unit counts). A row longer than a
// unit is cut into chunks of kChunkBytes, one unit each; shorter rows are grouped, kChunkBytes / row_bytes
// rows to a unit. Counts are 32-bit: a launch's units stay far below 2**32 for any memory a GPU has
// (2**32 units are 32 TiB).
XSC_HOST_FN u32 chunks_per_row(i64 row_bytes) { return (u32)((row_bytes + kChunkBytes - 1) / kChunkBytes); }
XSC_HOST_FN u32 rows_per_unit(i64 row_bytes) { return row_bytes > kChunkBytes ? 1u : (u32)(kChunkBytes / row_bytes); }
// units_of(1, bytes) without its division by the row size: one unit per started chunk.
XSC_HOST_FN u32 units_of_bytes(i64 bytes) { return bytes > 0 ? chunks_per_row(bytes) : 0u; }
XSC_HOST_FN u32 units_of(i64 rows, i64 row_bytes) {
  if (rows <= 0 || row_bytes <= 0) return 0;
  if (row_bytes > kChunkBytes) return (u32)rows * chunks_per_row(row_bytes);
  const u32 per = rows_per_unit(row_bytes);
  return ((u32)rows + per - 1) / per;
}

// Plain loads and stores of 16-byte words through global pointers (no backend adds cache hints: the twin
// must time what the SYCL build does).
template <class W>
XSC_FN W load_word(const XSC_GLOBAL W* p) {
  return *p;
}
template <class W>
XSC_FN void store_word(XSC_GLOBAL W* p, const W& v) {
  *p = v;
}

// The 16 bytes at byte k (1..15) of the 32 bytes a, b (little-endian): what a source word k bytes past a
// 16-byte boundary holds once the destination is aligned. Dword picks are selects on the (uniform) k, never
// an index into a private array (that would put the words in scratch); each 32-bit funnel shifts by
// s = 0..24 bits, and `hi << 1 << (31 - s)` never shifts by 32.
XSC_FN u32 funnel(u32 lo, u32 hi, int s) { return (lo >> s) | ((hi << 1) << (31 - s)); }
XSC_FN Word16 merge_words(const Word16& a, const Word16& b, int k) {
  const int q = k >> 2, s = (k & 3) * 8;
  const u32 d0 = q == 0 ? a.x : q == 1 ? a.y : q == 2 ? a.z : a.w;
  const u32 d1 = q == 0 ? a.y : q == 1 ? a.z : q == 2 ? a.w : b.x;
  const u32 d2 = q == 0 ? a.z : q == 1 ? a.w : q == 2 ? b.x : b.y;
  const u32 d3 = q == 0 ? a.w : q == 1 ? b.x : q == 2 ? b.y : b.z;
  const u32 d4 = q == 0 ? b.x : q == 1 ? b.y : q == 2 ? b.z : b.w;
  return Word16{funnel(d0, d1, s), funnel(d1, d2, s), funnel(d2, d3, s), funnel(d3, d4, s)};
}

template <class G>
XSC_FN Word16 sg_shuffle_word(const G& g, const Word16& v, u32 from) {
  return Word16{g.sg_shuffle(v.x, from), g.sg_shuffle(v.y, from), g.sg_shuffle(v.z, from), g.sg_shuffle(v.w, from)};
}

// `count` 16-byte words to an aligned `d` from the aligned words s[0 ..]: steps of kLoads words per
// work-item, all loaded before any is stored; lane l of slot u copies word i = base + u * lanes + l.
// kShifted: the source is k = 1..15 bytes past s, and each destination word merges the source words s[i]
// and s[i + 1]: a lane loads only s[i] and takes s[i + 1] from the next lane (the last lane from lane 0's
// word of the next slot, or, for the step's last slot, loads the word after the step itself), so every
// source word is loaded once, as a full 16-byte access, and no load touches a word outside s[0 .. count]
// (the words holding [src, src + 16 * count)).
// With `ordered` the range may overlap itself: the steps go in the safe direction and a sub-group barrier
// separates each step's loads from its stores. Every read of a step precedes that barrier, and the word read
// past the step holds only bytes the safe direction has not written yet or bytes the merge drops.
template <int kLoads, bool kShifted, class G>
XSC_FN void sg_copy_word_steps(const G& g, const XSC_GLOBAL Word16* s, XSC_GLOBAL Word16* d, int count, int k,
                               bool backward, bool ordered) {
  const int lanes = (int)g.sg_size(), lane = (int)g.sg_lane();
  const bool last_lane = lane == lanes - 1;
  const u32 next_lane = last_lane ? 0u : (u32)lane + 1u;
  const int step = lanes * kLoads;
  const int steps = (count + step - 1) / step;
  // The last source word the copy needs. Past it a lane loads that word again instead of branching around
  // the load (a load per lane either way; no branch and no phi per word, which keeps the module small).
  // Only the copy's last step reaches past it, and that step loads the word anyway.
  const int last = kShifted ? count : count - 1;
  for (int n = 0; n < steps; ++n) {
    const int base = (backward ? steps - 1 - n : n) * step;
    Word16 v[kLoads];
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int i = base + u * lanes + lane;
      v[u] = load_word(s + (i < last ? i : last));
    }
    if (kShifted) {
      // s[base + step], which the step's last word needs when it is < count (else any word: unused).
      const int past = base + step;
      Word16 after = {0, 0, 0, 0};
      if (last_lane) after = load_word(s + (past < last ? past : last));
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        // Lane 0 sends the last lane its word of the next slot; every other lane its word of this one.
        // Picked field by field: a pick between whole words went through the stack in nvcc 13.
        const bool ahead = lane == 0 && u + 1 < kLoads;
        const Word16& later = v[u + 1 < kLoads ? u + 1 : u];
        const Word16 sent = {ahead ? later.x : v[u].x, ahead ? later.y : v[u].y, ahead ? later.z : v[u].z,
                             ahead ? later.w : v[u].w};
        Word16 right = sg_shuffle_word(g, sent, next_lane);
        if (u + 1 == kLoads && last_lane) right = after;
        v[u] = merge_words(v[u], right, k);
      }
    }
    if (ordered) g.sg_barrier();
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int i = base + u * lanes + lane;
      if (i < count) store_word(d + i, v[u]);
    }
  }
}

// Words in flight per work-item from a shifted source, on every device: each also holds its merge's
// neighbour and temporaries (on dg2 and mtl, where a sub-group's 32-bit value takes two 32-byte registers,
// eight shifted words spill; on the twin eight measured nothing over four).
constexpr int kShiftedLoads = 4;

// `count` 16-byte words to an aligned `dst` from `src`, aligned too or k = src mod 16 bytes past a
// boundary: G::kAlignedLoads words in flight per work-item (a device policy) or kShiftedLoads.
// Every lane of the sub-group calls it together (shuffles, barriers).
template <class G>
XSC_FN void sg_copy_words(const G& g, u64 src, u64 dst, int count, bool ordered) {
  const int k = (int)(src & 15u);
  const XSC_GLOBAL Word16* s = (const XSC_GLOBAL Word16*)(src - (u64)k);
  XSC_GLOBAL Word16* d = (XSC_GLOBAL Word16*)dst;
  const bool backward = ordered && dst > src;
  if (k == 0)
    sg_copy_word_steps<G::kAlignedLoads, false>(g, s, d, count, k, backward, ordered);
  else
    sg_copy_word_steps<kShiftedLoads, true>(g, s, d, count, k, backward, ordered);
}

// `count` bytes (a piece's head or tail, below 16), one per work-item per step; `ordered` as above.
template <class G>
XSC_FN void sg_copy_bytes(const G& g, u64 src, u64 dst, int count, bool ordered) {
  const XSC_GLOBAL unsigned char* s = (const XSC_GLOBAL unsigned char*)src;
  XSC_GLOBAL unsigned char* d = (XSC_GLOBAL unsigned char*)dst;
  const int lanes = (int)g.sg_size(), lane = (int)g.sg_lane();
  const int steps = (count + lanes - 1) / lanes;
  const bool backward = ordered && dst > src;
  for (int n = 0; n < steps; ++n) {
    const int i = (backward ? steps - 1 - n : n) * lanes + lane;
    unsigned char b = 0;
    if (i < count) b = s[i];
    if (ordered) g.sg_barrier();
    if (i < count) d[i] = b;
  }
}

}  // namespace xsc
