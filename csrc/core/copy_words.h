// The words of the copy routine (copy_routine.h) that every backend shares: the integer types, the unit
// of work (kChunkBytes) and what an entry's units are, the loads a work-item keeps in flight, and how a
// sub-group copies words to which source and destination are both aligned. All address arithmetic is on
// uint64_t: XPU device pointers have bit 63 set.
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

// The address space of every pointer the copy loads from or stores to. In SYCL device code a plain pointer
// is generic: IGC then tests at run time which space each access hits (extra control flow) and, in the
// spec-decode kernels, split the 16-byte loads into 8-byte ones. Our copies only ever touch global memory.
#if defined(__SYCL_DEVICE_ONLY__)
#define XSC_GLOBAL __attribute__((opencl_global))
#else
#define XSC_GLOBAL
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
XSC_FN W load_word(const XSC_GLOBAL W* p) {
  return *p;
}
template <bool Streaming, class W>
XSC_FN void store_word(XSC_GLOBAL W* p, const W& v) {
  *p = v;
}

// The stores of one step of a sub-group's word copy: word base + u * lanes + lane of the destination, for
// every u, from v[u] (none from `count` on); with `ordered`, after every lane's loads of the step (see
// sg_copy_words). Every word copy (here and shifted_copy.h) ends its steps with it.
template <bool Streaming, int Unroll, class G, class W>
XSC_FN void sg_store_step(G& g, XSC_GLOBAL W* d, const W (&v)[Unroll], int base, int count, bool ordered) {
  const int lanes = (int)g.sg_size(), lane = (int)g.sg_lane();
  if (ordered) g.sg_barrier();
#pragma unroll
  for (int u = 0; u < Unroll; ++u) {
    const int i = base + u * lanes + lane;
    if (i < count) store_word<Streaming>(d + i, v[u]);
  }
}

// Sub-group copy of `count` words of type W; both pointers W-aligned. With `ordered`, the range may overlap
// and is walked in the safe direction, loads of a step separated from its stores by a sub-group barrier.
// `Streaming`: see load_word (callers pass it only for ranges that do not overlap).
// Counts are 32-bit: callers hand over at most kChunkBytes at a time, which keeps registers (and so
// occupancy) in check.
template <class W, bool Streaming = false, class G>
XSC_FN void sg_copy_words(G& g, u64 src, u64 dst, int count, bool ordered) {
  const XSC_GLOBAL W* s = (const XSC_GLOBAL W*)src;
  XSC_GLOBAL W* d = (XSC_GLOBAL W*)dst;
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
    sg_store_step<Streaming>(g, d, v, base, count, ordered);
  }
}

template <class G>
XSC_FN void sg_copy_bytes(G& g, u64 src, u64 dst, int count, bool ordered) {
  sg_copy_words<unsigned char>(g, src, dst, count, ordered);
}

}  // namespace xsc
