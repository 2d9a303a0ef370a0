// The copy of a range whose source and destination disagree mod 16 (copy_routine.h's sg_copy_aligned
// hands it the whole words): every load and store a full 16-byte access, each destination word merged from
// the two aligned source words that hold its bytes.
#pragma once

#include "copy_words.h"

namespace xsc {

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
  const XSC_GLOBAL Word16* s = (const XSC_GLOBAL Word16*)(src - (u64)k);
  XSC_GLOBAL Word16* d = (XSC_GLOBAL Word16*)dst;
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
    sg_store_step<Streaming>(g, d, v, base, count, ordered);
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
  const XSC_GLOBAL Word16* s = (const XSC_GLOBAL Word16*)(src - (u64)k);
  XSC_GLOBAL Word16* d = (XSC_GLOBAL Word16*)dst;
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
    sg_store_step<Streaming>(g, d, v, base, count, ordered);
  }
}

template <bool Streaming = false, class G>
XSC_FN void sg_copy_shifted(G& g, u64 src, u64 dst, int count, bool ordered) {
  if (G::kShiftedShuffle) sg_copy_shifted_shuffled<Streaming>(g, src, dst, count, ordered);
  else sg_copy_shifted_pairwise<Streaming>(g, src, dst, count, ordered);
}

}  // namespace xsc
