// Entries of the speculative-decoding state copies (the mamba_spec_decode_* ops): per (request row, state),
// whether and what to copy is decided on the device from block tables and per-request token counts, and
// every address is computed here on uint64 from a per-state plan. Shared by the SYCL kernel, the CUDA twin
// and the native CPU path (entry_sources.h's other sources work the same way), so they agree on every span.
//
// The decision (the same for every state of a request, recomputed by each entry from the unchanged inputs,
// so no entry waits for another):
//   postprocess: running = computed + scheduled - drafts (or, precomputed: computed - accepted + 1),
//     new = running + accepted - 1 (precomputed: computed); aligned = new / block_size * block_size.
//     Nothing happens unless aligned >= running. Then bias = aligned - running, dst column =
//     aligned / block_size - 1, src column = state_idx; the request's count is reset to 1 when the columns
//     are equal, and a copy is made unless the columns are equal and bias is 0.
//   precopy: src column = src_cols, dst column = state_idx, bias = token_bias; a copy unless the src
//     column is negative or equals the dst column.
// The copy of state j from the request's block-table row (block table of the state's group):
//   whole block: block[src column + bias] -> block[dst column];
//   conv [blocks, tokens, dim] / [blocks, dim, tokens]: block[src column] with its first `bias` tokens
//     dropped -> the start of block[dst column] (a left shift in place when the blocks are the same).
// Anything out of range (a column outside the table, a block id outside the pool, a bias that leaves no
// token, a request slot outside the inputs) gives an empty span: the entry copies nothing.
//
// Every bound is compared before it is multiplied, so no product below can overflow: the host checked that
// each pool's blocks x block stride and each table's rows x row stride address memory that exists.
#pragma once

#include "entry_sources.h"

namespace xsc {

// Per state, kSpecStateFields int64 values (built on the host from the state tensors and block tables). Each
// state carries its block table's fields itself, so that a span reads no field that depends on another.
enum SpecStateField {
  kSpecBase,            // the pool's address bits
  kSpecBlockStride,     // bytes between blocks
  kSpecBlocks,          // blocks in the pool
  kSpecRows,            // rows copied per block (DS conv: dim; otherwise 1)
  kSpecRowStride,       // bytes between those rows
  kSpecRowBytes,        // bytes per row with no shift
  kSpecTokenBytes,      // bytes one token of shift drops from a row (0: a whole-block state)
  kSpecMaxShift,        // the most tokens a row can drop and still copy a byte (entry_sources.h's max_shift_of)
  kSpecTableBase,       // the state's block table (int32 [rows, columns], columns contiguous): its address bits,
  kSpecTableRows,       //   rows,
  kSpecTableColumns,    //   columns
  kSpecTableRowStride,  //   and elements between rows
  kSpecStateFields
};

enum SpecDecodeMode : int { kSpecPostprocess = 0, kSpecPostprocessPrecomputed = 1, kSpecPrecopy = 2 };

// What one request row does this step.
struct SpecDecision {
  i64 slot;      // the request's slot in the per-request inputs (-1: nothing at all)
  i64 src_col, dst_col, bias;
  bool copy;     // copy its states
  bool reset;    // set its accepted-token count to 1 (postprocess)
};

struct SpecDecodeSource {
  const i64* plan;       // [states][kSpecStateFields]
  i64 states;
  int mode;              // SpecDecodeMode
  int table_row_by_slot; // 1: the block-table row is the request slot; 0: the batch row
  i64 rows;              // request rows of this launch (the batch)
  i64 slots;             // entries of every per-request input and of the output
  i64 block_size;
  const int* idx_mapping;  // [rows] batch row -> request slot (negative: skip), or null: slot = row
  const int* state_idx;    // postprocess: src column; precopy: dst column
  const int* accepted;     // postprocess: accepted tokens; precopy: token bias
  const int* computed;     // postprocess: computed tokens (precomputed: after this step); precopy: src column
  const int* scheduled;    // postprocess only (not precomputed)
  const int* drafts;       // postprocess only (not precomputed)

  XSC_HOST_FN i64 count() const { return rows * states; }
  template <class G>
  XSC_FN void prefetch(const G&, i64) const {}
  // A span takes loads and a division, so the word is the entry's index (see StatePlanSource).
  XSC_FN i64 size_word(i64 i) const { return i; }
  XSC_FN i64 units_of_word(i64 i) const {
    const Span s = span(i);
    return units_of(s.rows, s.row_bytes);
  }

  XSC_FN SpecDecision decide(i64 row) const {
    SpecDecision d{-1, 0, 0, 0, false, false};
    const i64 slot = idx_mapping ? (i64)idx_mapping[row] : row;
    if (slot < 0 || slot >= slots) return d;
    d.slot = slot;
    if (mode == kSpecPrecopy) {
      d.src_col = computed[slot];
      d.dst_col = state_idx[slot];
      d.bias = accepted[slot];
      d.copy = d.src_col >= 0 && d.src_col != d.dst_col;
      return d;
    }
    const i64 accepted_now = accepted[slot];
    i64 running, fresh;
    if (mode == kSpecPostprocessPrecomputed) {
      fresh = computed[slot];
      running = fresh - accepted_now + 1;
    } else {
      running = (i64)computed[slot] + scheduled[slot] - drafts[slot];
      fresh = running + accepted_now - 1;
    }
    if (block_size <= 0) return d;
    const i64 aligned = fresh / block_size * block_size;  // truncating, as the integer division it mirrors
    if (aligned < running) return d;
    d.src_col = state_idx[slot];
    d.dst_col = aligned / block_size - 1;
    d.bias = aligned - running;
    d.reset = d.src_col == d.dst_col;
    d.copy = !(d.reset && d.bias == 0);
    return d;
  }

  XSC_FN Span span(i64 i) const {
    const i64 r = (i64)quotient((u64)i, (u64)states), j = i - r * states;
    const i64* p = plan + j * kSpecStateFields;
    // The state's fields do not depend on the request: they are read before the decision, with the
    // request's counts, so that every load but the block ids goes out at once (reading them after it cost
    // three dependent trips to memory before each unit's copy).
    const i64 blocks = p[kSpecBlocks], token_bytes = p[kSpecTokenBytes], max_shift = p[kSpecMaxShift];
    const i64 table_rows = p[kSpecTableRows], columns = p[kSpecTableColumns], row_stride = p[kSpecTableRowStride];
    const int* table = (const int*)(u64)p[kSpecTableBase];
    const SpecDecision d = decide(r);
    Span s;
    s.rows = 0;
    s.row_bytes = 0;
    s.src = s.dst = 0;
    s.src_stride = s.dst_stride = 0;
    if (!d.copy || d.bias < 0) return s;
    const i64 row = table_row_by_slot ? d.slot : r;
    i64 src_col = d.src_col, shift_bytes = 0;
    if (token_bytes == 0) {
      src_col = d.src_col + d.bias;  // a whole block, `bias` columns on; both came from int32 inputs: the sum fits
    } else {
      // Compare the bias with a bound the host worked out before multiplying: a bias that leaves no byte
      // copies nothing, and below that the product is smaller than the row.
      if (d.bias > max_shift) return s;
      shift_bytes = d.bias * token_bytes;
    }
    // A row or column outside the table, or a block id outside the pool, copies nothing.
    if (row < 0 || row >= table_rows || src_col < 0 || src_col >= columns || d.dst_col < 0 || d.dst_col >= columns)
      return s;
    const i64 src_block = table[row * row_stride + src_col], dst_block = table[row * row_stride + d.dst_col];
    if (src_block < 0 || dst_block < 0 || src_block >= blocks || dst_block >= blocks) return s;
    const u64 base = (u64)p[kSpecBase], stride = (u64)p[kSpecBlockStride];
    s.rows = p[kSpecRows];
    s.row_bytes = p[kSpecRowBytes] - shift_bytes;
    s.src_stride = s.dst_stride = (u64)p[kSpecRowStride];
    s.src = base + (u64)src_block * stride + (u64)shift_bytes;
    s.dst = base + (u64)dst_block * stride;
    if (s.src == s.dst) s.rows = s.row_bytes = 0;  // a copy onto itself
    return s;
  }

  // The accepted-token count row `row` leaves in `out`: (slot, value), slot -1 for none. `copy_rest`:
  // every row's slot gets its count (reset or carried over), as a fresh output buffer needs.
  XSC_FN void count_out(i64 row, bool copy_rest, i64* slot, int* value) const {
    *slot = -1;
    if (mode == kSpecPrecopy) return;
    const SpecDecision d = decide(row);
    if (d.slot < 0) return;
    if (d.reset) {
      *slot = d.slot;
      *value = 1;
    } else if (copy_rest) {
      *slot = d.slot;
      *value = accepted[d.slot];
    }
  }
};

}  // namespace xsc
