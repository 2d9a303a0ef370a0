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
// per block table kSpecTableFields. Each state also carries its table's fields itself (in SpecTableField
// order from kSpecTableBase), so that a span computed from global memory reads no field that depends on
// another.
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
  kSpecUnitsBefore,     // the unit bounds (units_of with no shift) of the states before it, summed
  kSpecTableBase,       // that table's fields, as below
  kSpecStateFields = kSpecTableBase + 4
};
// A block table: int32 [rows, columns], columns contiguous.
enum SpecTableField { kTableBase, kTableRows, kTableColumns, kTableRowStride, kSpecTableFields };

// What every state of one request row needs from one block table: the block ids the row's decision names
// (-1: none, or outside the table or the inputs) and its token bias (-1: the row copies nothing).
struct SpecRowRecord {
  i64 bias;
  int conv_src;   // at the source column (conv states: the tokens past the bias are copied)
  int whole_src;  // at the source column + bias (whole-block states)
  int dst;        // at the destination column
  int unused;
};
// Rows x tables for which a work-group keeps every row's record in local memory (12 KiB), worked out once
// before its first copy: a unit's span then waits for no trip to the counts and tables (vLLM batches are
// at most a few hundred requests). Larger launches compute every span from global memory.
constexpr i64 kSpecMaxRecords = 512;
// Plan words (states x kSpecStateFields) a work-group keeps beside them (16 KiB: 146 states, 73 layers of a
// conv and a temporal state): each unit's span then reads local memory only. From global memory, the plan's
// lines were a trip to the cache under the copies' traffic before every unit. A launch with more states
// keeps its records and reads the plan from global memory (plan_fits).
constexpr i64 kSpecMaxPlanWords = 2048;
// Local memory the records and the plan take in a work-group, beside the schedule's own: the SYCL launcher
// takes the build that reads global memory on a device with less (every GPU the CUDA twin builds for, sm_70
// on, has room).
constexpr i64 kSpecLocalBytes = kSpecMaxRecords * (i64)sizeof(SpecRowRecord) + kSpecMaxPlanWords * (i64)sizeof(i64);

enum SpecDecodeMode : int { kSpecPostprocess = 0, kSpecPostprocessPrecomputed = 1, kSpecPrecopy = 2 };

// What one request row does this step.
struct SpecDecision {
  i64 slot;      // the request's slot in the per-request inputs (-1: nothing at all)
  i64 src_col, dst_col, bias;
  bool copy;     // copy its states
  bool reset;    // set its accepted-token count to 1 (postprocess)
};

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
  // A counter a launch finds at 0 and leaves at 0, through which a launch with its records in local memory
  // claims its last units one at a time (spec_decode_schedule.h); null: every unit is dealt out in advance.
  // 32 bits: 64-bit atomics are an optional feature of SYCL devices, and the kernels that use one were built
  // as a program of their own.
  unsigned* claims;

  XSC_HOST_FN i64 count() const { return rows * states; }
  static constexpr bool kSpreadScan = true;  // see run_tiles: each span takes dependent loads and a decision
  template <class G>
  XSC_FN void prefetch(const G&, i64) const {}
  // A span takes loads and a division, so the word is the entry's index (see StatePlanSource).
  XSC_FN i64 size_word(i64 i) const { return i; }
  XSC_FN i64 units_of_word(i64 i) const { return units_of_entry(*this, i); }
  // Units from the spans: a row that copies nothing has none (a bound from the plan would deal its states
  // out too). See counted_units.
  static constexpr bool kUnitBound = false;

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

  // Table t's fields (SpecTableField order) starting at f.
  struct Table {
    const int* ids;
    i64 rows, columns, row_stride;
  };
  XSC_FN static Table table_at(const i64* f) {
    return Table{(const int*)(u64)f[kTableBase], f[kTableRows], f[kTableColumns], f[kTableRowStride]};
  }
  // The block id at `col` of row `row`, or -1 outside the table.
  XSC_FN static i64 block_at(const Table& t, i64 row, i64 col) {
    if (row < 0 || row >= t.rows || col < 0 || col >= t.columns) return -1;
    return t.ids[row * t.row_stride + col];
  }

  // Row r's record in table t. A bias above every int32 (counts near the int32 limits) is kept as it is:
  // no state's kMaxShift is that large, and a whole block that far on lies outside any table.
  XSC_FN SpecRowRecord record(const SpecDecision& d, i64 r, const Table& t) const {
    SpecRowRecord rec{-1, -1, -1, -1, 0};
    if (!d.copy || d.bias < 0) return rec;
    const i64 row = table_row_by_slot ? d.slot : r;
    rec.bias = d.bias;
    rec.conv_src = (int)block_at(t, row, d.src_col);
    rec.whole_src = (int)block_at(t, row, d.src_col + d.bias);  // both from int32 inputs: the sum fits
    rec.dst = (int)block_at(t, row, d.dst_col);
    return rec;
  }

  // State j's span for a row whose record is `rec`; an empty span (copying nothing) for a row that copies
  // nothing, a bias that leaves no byte (compared before it is multiplied) or a block id outside the pool.
  // Every field is read before anything is decided, and nothing returns early: a field read after a test on
  // the record can only be asked for once the record is in, so each unit's span waited for two or three
  // trips to the plan, one after the other, instead of one.
  XSC_FN static Span span_of(const i64* p, const SpecRowRecord& rec) {
    const u64 base = (u64)p[kSpecBase], stride = (u64)p[kSpecBlockStride], row_stride = (u64)p[kSpecRowStride];
    const i64 blocks = p[kSpecBlocks], rows = p[kSpecRows], row_bytes = p[kSpecRowBytes];
    const i64 token_bytes = p[kSpecTokenBytes], max_shift = p[kSpecMaxShift];
    const bool conv = token_bytes != 0;
    const i64 src_block = conv ? rec.conv_src : rec.whole_src;
    const bool ok = rec.bias >= 0 && (!conv || rec.bias <= max_shift) && src_block >= 0 && rec.dst >= 0 &&
                    src_block < blocks && rec.dst < blocks;
    const i64 shift_bytes = (ok && conv ? rec.bias : 0) * token_bytes;  // below the row's bytes
    Span s;
    s.src = base + (u64)(ok ? src_block : 0) * stride + (u64)shift_bytes;
    s.dst = base + (u64)(ok ? rec.dst : 0) * stride;
    s.src_stride = s.dst_stride = row_stride;
    const bool copies = ok && s.src != s.dst;  // not a copy onto itself
    s.rows = copies ? rows : 0;
    s.row_bytes = copies ? row_bytes - shift_bytes : 0;
    return s;
  }

  // Entry i's span from global memory. The state's fields (its table's among them) do not depend on the
  // request: read up front with the request's counts, they leave the block ids as the only trip after the
  // decision (read after it, they cost three dependent trips before each unit's copy).
  XSC_FN Span span(i64 i) const {
    const i64 r = (i64)quotient((u64)i, (u64)states), j = i - r * states;
    const i64* p = plan + j * kSpecStateFields;
    const Table t = table_at(p + kSpecTableBase);
    return span_of(p, record(decide(r), r, t));
  }

  // Whether a work-group can keep this launch's rows x tables records (fill_local): the launchers pick the
  // kernel build that reads them by it.
  XSC_HOST_FN bool records_fit() const { return rows * tables <= kSpecMaxRecords; }
  // Whether it can keep the states' plan beside them; if not, the records build reads the plan in place.
  XSC_HOST_FN bool plan_fits() const { return states * kSpecStateFields <= kSpecMaxPlanWords; }

  // The records of rows x tables and, where it fits, the states' plan into a work-group's local memory,
  // entries first, first + step, ... of each (records_fit() holds). Returns the plan to read spans from.
  XSC_FN const i64* fill_local(i64 first, i64 step, SpecRowRecord* records, i64* plan_words) const {
    const i64* table_fields = plan + states * kSpecStateFields;
    for (i64 k = first; k < rows * tables; k += step) {
      const i64 r = (i64)quotient((u64)k, (u64)tables), t = k - r * tables;
      records[k] = record(decide(r), r, table_at(table_fields + t * kSpecTableFields));
    }
    if (!plan_fits()) return plan;
    for (i64 k = first; k < states * kSpecStateFields; k += step) plan_words[k] = plan[k];
    return plan_words;
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

// A SpecDecodeSource whose rows' records (and plan, where it fits) a work-group worked out into its local
// memory before its first copy (fill_local, then a group barrier; records_fit()): the kernels' source then.
struct SpecDecodeRecordSource {
  SpecDecodeSource source;
  const SpecRowRecord* records;  // [rows][tables]
  const i64* plan;               // the plan's state fields: local memory, or the plan itself (plan_fits)

  // count() and span() are all its schedules read (small_batch.h, spec_decode_schedule.h): it never takes
  // the tile schedule.
  XSC_FN i64 count() const { return source.count(); }
  XSC_FN Span span(i64 i) const {
    const i64 r = (i64)quotient((u64)i, (u64)source.states), j = i - r * source.states;
    const i64* p = plan + j * kSpecStateFields;
    return SpecDecodeSource::span_of(p, records[r * source.tables + p[kSpecGroup]]);
  }
  static constexpr bool kUnitBound = false;  // see SpecDecodeSource
};

}  // namespace xsc
