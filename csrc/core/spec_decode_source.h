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

// Per state, kSpecStateFields int64 values (built on the host from the state tensors and block tables), then
// per block table kSpecTableFields. Each state also carries its table's fields itself (from
// kSpecTableBase), so that a span reads no field whose place depends on another.
enum SpecStateField {
  kSpecBase,            // the pool's address bits
  kSpecBlockStride,     // bytes between blocks
  kSpecBlocks,          // blocks in the pool
  kSpecRows,            // rows copied per block (DS conv: dim; otherwise 1)
  kSpecRowStride,       // bytes between those rows
  kSpecRowBytes,        // bytes per row with no shift
  kSpecTokenBytes,      // bytes one token of shift drops from a row (0: a whole-block state)
  kSpecMaxShift,        // the most tokens a row can drop and still copy a byte (entry_sources.h's max_shift_of)
  kSpecGroup,           // which block table the state's blocks come from
  kSpecUnitsEnd,        // the unit bounds (units_of with no shift) of the states up to this one, summed
  kSpecTableBase,       // that table's fields, as below
  kSpecStateFields = kSpecTableBase + 4
};
// A block table: int32 [rows, columns], columns contiguous.
enum SpecTableField { kTableBase, kTableRows, kTableColumns, kTableRowStride, kSpecTableFields };

enum SpecDecodeMode : int { kSpecPostprocess = 0, kSpecPostprocessPrecomputed = 1, kSpecPrecopy = 2 };

// What one request row does this step.
struct SpecDecision {
  i64 slot;      // the request's slot in the per-request inputs (-1: nothing at all)
  i64 src_col, dst_col, bias;
  bool copy;     // copy its states
  bool reset;    // set its accepted-token count to 1 (postprocess)
};

// A row source (entry_sources.h) over request rows; RowOf holds the block-table row (-1: the row copies
// nothing), the source and destination columns and the bias.
struct SpecDecodeSource {
  const i64* plan;       // [states][kSpecStateFields] then [tables][kSpecTableFields]
  i64 states, tables;
  int mode;              // SpecDecodeMode
  int table_row_by_slot; // 1: the block-table row is the request slot; 0: the batch row
  i64 rows;              // request rows of this launch (the batch)
  i64 slots;             // entries of every per-request input and of the output
  i64 block_size;
  i64 row_units;           // the states' unit bounds summed: the most units one row's copies take
  const int* idx_mapping;  // [rows] batch row -> request slot (negative: skip), or null: slot = row
  const int* state_idx;    // postprocess: src column; precopy: dst column
  const int* accepted;     // postprocess: accepted tokens; precopy: token bias
  const int* computed;     // postprocess: computed tokens (precomputed: after this step); precopy: src column
  const int* scheduled;    // postprocess only (not precomputed)
  const int* drafts;       // postprocess only (not precomputed)

  XSC_HOST_FN i64 count() const { return rows * states; }

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

  XSC_FN i64 row_count() const { return rows; }
  XSC_FN u32 units_end(i64 j) const { return (u32)plan[j * kSpecStateFields + kSpecUnitsEnd]; }
  XSC_FN u32 units_per_row() const { return (u32)row_units; }
  // Row r's inputs. A column or bias outside int32 becomes -1: no table and no state is that large, so the
  // lookups below find nothing there, as they would for the value itself.
  XSC_FN RowOf row_of(i64 r) const {
    const SpecDecision d = decide(r);
    if (!d.copy || d.bias < 0) return RowOf{-1, -1, -1, -1};
    return RowOf{as_index(table_row_by_slot ? d.slot : r), as_index(d.src_col), as_index(d.dst_col),
                 as_index(d.bias)};
  }
  XSC_FN bool copies(const RowOf& row) const { return row.a >= 0 && row.d >= 0; }

  // The block id at `col` of row `row` of the table whose fields are f, or -1 outside the table.
  XSC_FN static i64 block_at(const i64* f, i64 row, i64 col) {
    if (row < 0 || row >= f[kTableRows] || col < 0 || col >= f[kTableColumns]) return -1;
    return ((const int*)(u64)f[kTableBase])[row * f[kTableRowStride] + col];
  }

  // State j's span for a row that copies: an empty span for a bias that leaves no byte (compared before it
  // is multiplied), a block id outside the pool, or a copy onto itself.
  XSC_FN Span span(const RowOf& row, i64 j) const {
    const i64* p = plan + j * kSpecStateFields;
    const i64* t = p + kSpecTableBase;
    const u64 base = (u64)p[kSpecBase], stride = (u64)p[kSpecBlockStride], row_stride = (u64)p[kSpecRowStride];
    const i64 blocks = p[kSpecBlocks], token_bytes = p[kSpecTokenBytes];
    const bool conv = token_bytes != 0;
    const i64 src_block = block_at(t, row.a, conv ? row.b : (i64)row.b + row.d);
    const i64 dst_block = block_at(t, row.a, row.c);
    const bool ok = (!conv || row.d <= p[kSpecMaxShift]) && src_block >= 0 && dst_block >= 0 &&
                    src_block < blocks && dst_block < blocks;
    const i64 shift_bytes = ok && conv ? (i64)row.d * token_bytes : 0;  // below the row's bytes
    Span s{base + (u64)(ok ? src_block : 0) * stride + (u64)shift_bytes, base + (u64)(ok ? dst_block : 0) * stride,
           0, 0, row_stride, row_stride};
    const bool copies = ok && s.src != s.dst;
    s.rows = copies ? p[kSpecRows] : 0;
    s.row_bytes = copies ? p[kSpecRowBytes] - shift_bytes : 0;
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
