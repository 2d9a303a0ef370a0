// mamba_spec_decode_postprocess_ / mamba_spec_decode_precopy_: checks, the plan (every address and size the
// kernel needs, from the tensors themselves), its device copy, and the native CPU implementation.
#include "spec_decode.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <utility>

#include "checks.h"
#include "native_copy.h"
#include "state_plan.h"

namespace xsc {
namespace {

void check_states(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups, at::TensorList tables) {
  XSC_CHECK(!states.empty(), "states is empty");
  XSC_CHECK(kinds.size() == states.size(), "kinds has ", kinds.size(), " entries but states has ", states.size());
  XSC_CHECK(groups.size() == states.size(), "groups has ", groups.size(), " entries but states has ",
            states.size());
  XSC_CHECK(!tables.empty(), "block_tables is empty");
  const at::Device device = states[0].device();
  for (size_t j = 0; j < states.size(); ++j) {
    const at::Tensor& s = states[j];
    XSC_CHECK(s.device() == device, "states[", j, "] is on ", s.device(), " but states[0] is on ", device);
    XSC_CHECK(kinds[j] >= kWholeBlock && kinds[j] <= kConvDS, "kinds[", j, "] = ", kinds[j],
              " is not 0 (whole block), 1 (conv, [blocks, tokens, dim]) or 2 (conv, [blocks, dim, tokens])");
    XSC_CHECK(groups[j] >= 0 && groups[j] < (int64_t)tables.size(), "groups[", j, "] = ", groups[j],
              " is not an index into block_tables (", tables.size(), " tables)");
    XSC_CHECK(s.dim() >= 2, "states[", j, "] must have a block dimension and a state, got ", s.dim(), "-D");
    XSC_CHECK(s.stride(0) >= 0, "states[", j, "] has a negative block stride ", s.stride(0));
    if (kinds[j] != kWholeBlock)
      XSC_CHECK(s.dim() == 3, "states[", j, "] is a conv state and must be 3-D, got ", s.dim(), "-D");
    if (kinds[j] == kConvDS) {
      XSC_CHECK(s.size(2) <= 1 || s.stride(2) == 1, "states[", j,
                "] (conv, [blocks, dim, tokens]) must have contiguous tokens, got stride ", s.stride(2));
      XSC_CHECK(s.stride(1) >= 0, "states[", j, "] has a negative row stride ", s.stride(1));
    } else {
      XSC_CHECK(block_is_contiguous(s), "states[", j,
                "] must be contiguous within a block (only the block stride may be padded)");
    }
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    const at::Tensor& b = tables[t];
    XSC_CHECK(b.device() == device, "block_tables[", t, "] is on ", b.device(), " but states[0] is on ", device);
    XSC_CHECK(b.dim() == 2, "block_tables[", t, "] must be 2-D [requests, blocks], got ", b.dim(), "-D");
    XSC_CHECK(b.scalar_type() == at::kInt, "block_tables[", t, "] must be torch.int32, got ", b.scalar_type());
    XSC_CHECK(b.size(1) <= 1 || b.stride(1) == 1, "block_tables[", t, "] must have contiguous columns, got stride ",
              b.stride(1));
    XSC_CHECK(b.stride(0) >= 0, "block_tables[", t, "] has a negative row stride ", b.stride(0));
  }
}

// A per-request input: 1-D contiguous int32 on the states' device. Returns its length.
int64_t check_counts(const at::Tensor& t, const char* name, const at::Device& device) {
  XSC_CHECK(t.dim() == 1 && t.is_contiguous(), name, " must be a 1-D contiguous tensor, got ", t.dim(), "-D");
  XSC_CHECK(t.scalar_type() == at::kInt, name, " must be torch.int32, got ", t.scalar_type());
  XSC_CHECK(t.device() == device, name, " is on ", t.device(), " but states[0] is on ", device);
  return t.numel();
}

bool overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const uintptr_t a0 = reinterpret_cast<uintptr_t>(a.data_ptr()), b0 = reinterpret_cast<uintptr_t>(b.data_ptr());
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

// A block table's kSpecTableFields values at f.
void table_fields(const at::Tensor& b, int64_t* f) {
  f[kTableBase] = (int64_t)reinterpret_cast<uintptr_t>(b.data_ptr());
  f[kTableRows] = b.size(0);
  f[kTableColumns] = b.size(1);
  f[kTableRowStride] = b.stride(0);
}

// The plan; `row_units` gets the states' unit bounds summed (SpecDecodeSource::row_units).
at::Tensor host_plan(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups, at::TensorList tables,
                     int64_t* row_units) {
  const int64_t n = (int64_t)states.size() * kSpecStateFields + (int64_t)tables.size() * kSpecTableFields;
  at::Tensor plan = at::empty({n}, at::TensorOptions().dtype(at::kLong));
  int64_t* p = plan.data_ptr<int64_t>();
  int64_t units_end = 0;
  for (size_t j = 0; j < states.size(); ++j, p += kSpecStateFields) {
    const at::Tensor& s = states[j];
    const int64_t es = s.element_size();
    p[kSpecBase] = (int64_t)reinterpret_cast<uintptr_t>(s.data_ptr());  // the bits; read back as uint64
    p[kSpecBlockStride] = s.stride(0) * es;
    p[kSpecBlocks] = s.size(0);
    p[kSpecGroup] = groups[j];
    table_fields(tables[groups[j]], p + kSpecTableBase);
    if (kinds[j] == kConvDS) {
      p[kSpecRows] = s.size(1);
      p[kSpecRowStride] = s.stride(1) * es;
      p[kSpecRowBytes] = s.size(2) * es;
      p[kSpecTokenBytes] = s.size(2) > 0 ? es : 0;
    } else {
      p[kSpecRows] = 1;
      p[kSpecRowStride] = 0;
      p[kSpecRowBytes] = block_numel(s) * es;
      p[kSpecTokenBytes] = kinds[j] == kConvSD ? s.size(2) * es : 0;
    }
    if (kinds[j] != kWholeBlock && p[kSpecTokenBytes] == 0) p[kSpecRowBytes] = 0;  // no tokens: nothing to copy
    p[kSpecMaxShift] = max_shift_of(p[kSpecRowBytes], p[kSpecTokenBytes]);
    units_end += units_of(p[kSpecRows], p[kSpecRowBytes]);
    p[kSpecUnitsEnd] = units_end;  // a shift only shortens rows, so these bound every step's units
  }
  *row_units = units_end;
  for (const at::Tensor& b : tables) {
    table_fields(b, p);
    p += kSpecTableFields;
  }
  return plan;
}

}  // namespace

namespace {

SpecDecodeCall make_call(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups,
                         at::TensorList tables, int64_t num_rows, const c10::optional<at::Tensor>& idx_mapping,
                         int64_t slots, bool by_slot, bool on_device) {
  XSC_CHECK(num_rows >= 0, "num_rows = ", num_rows, " is negative");
  const at::Device device = states[0].device();
  if (idx_mapping.has_value()) {
    const int64_t n = check_counts(*idx_mapping, "idx_mapping", device);
    XSC_CHECK(n >= num_rows, "idx_mapping has ", n, " entries but num_rows is ", num_rows);
  } else {
    XSC_CHECK(num_rows <= slots, "num_rows = ", num_rows, " but the per-request inputs have ", slots,
              " entries (with no idx_mapping, row r is request r)");
  }
  SpecDecodeCall call;
  int64_t row_units = 0;
  call.plan = cached_device_plan(host_plan(states, kinds, groups, tables, &row_units),
                                 on_device ? device : at::Device(at::kCPU));
  SpecDecodeSource& s = call.source;
  std::memset(&s, 0, sizeof(s));
  s.row_units = row_units;
  s.plan = reinterpret_cast<const i64*>(call.plan.data_ptr<int64_t>());
  s.states = (i64)states.size();
  s.tables = (i64)tables.size();
  s.table_row_by_slot = by_slot ? 1 : 0;
  s.rows = num_rows;
  s.slots = slots;
  s.idx_mapping = idx_mapping.has_value() ? idx_mapping->data_ptr<int>() : nullptr;
  call.counts_out = nullptr;
  call.copy_rest = false;
  return call;
}

}  // namespace

SpecDecodeCall prepare_postprocess(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups,
                                   at::TensorList block_tables, int64_t block_size, int64_t num_rows,
                                   const at::Tensor& num_accepted, const at::Tensor& state_idx,
                                   const at::Tensor& num_computed, const c10::optional<at::Tensor>& num_scheduled,
                                   const c10::optional<at::Tensor>& num_draft, const at::Tensor& num_accepted_out,
                                   const c10::optional<at::Tensor>& idx_mapping, bool block_table_by_slot,
                                   bool copy_unchanged_counts, bool device_plan) {
  check_states(states, kinds, groups, block_tables);
  XSC_CHECK(block_size > 0, "block_size = ", block_size, " is not positive");
  XSC_CHECK(num_scheduled.has_value() == num_draft.has_value(), "num_scheduled and num_draft go together "
            "(both: counts before this step; neither: num_computed already counts this step)");
  const at::Device device = states[0].device();
  int64_t slots = check_counts(num_accepted, "num_accepted", device);
  slots = std::min(slots, check_counts(state_idx, "state_idx", device));
  slots = std::min(slots, check_counts(num_computed, "num_computed", device));
  slots = std::min(slots, check_counts(num_accepted_out, "num_accepted_out", device));
  std::vector<std::pair<const char*, const at::Tensor*>> inputs = {
      {"num_accepted", &num_accepted}, {"state_idx", &state_idx}, {"num_computed", &num_computed}};
  if (num_scheduled.has_value()) {
    slots = std::min(slots, check_counts(*num_scheduled, "num_scheduled", device));
    slots = std::min(slots, check_counts(*num_draft, "num_draft", device));
    inputs.push_back({"num_scheduled", &*num_scheduled});
    inputs.push_back({"num_draft", &*num_draft});
  }
  if (idx_mapping.has_value()) inputs.push_back({"idx_mapping", &*idx_mapping});
  // The counts are decided from the inputs as they were before the call: an output that is also an input
  // would be read after some rows wrote it (pass a copy, as vLLM's own snapshot does).
  for (const auto& [name, t] : inputs)
    XSC_CHECK(!overlap(num_accepted_out, *t), "num_accepted_out overlaps ", name,
              "; pass a copy of the input (the decisions read the values from before the call)");
  SpecDecodeCall call = make_call(states, kinds, groups, block_tables, num_rows, idx_mapping, slots,
                                  block_table_by_slot, device_plan);
  SpecDecodeSource& s = call.source;
  s.mode = num_scheduled.has_value() ? kSpecPostprocess : kSpecPostprocessPrecomputed;
  s.block_size = block_size;
  s.state_idx = state_idx.data_ptr<int>();
  s.accepted = num_accepted.data_ptr<int>();
  s.computed = num_computed.data_ptr<int>();
  s.scheduled = num_scheduled.has_value() ? num_scheduled->data_ptr<int>() : nullptr;
  s.drafts = num_draft.has_value() ? num_draft->data_ptr<int>() : nullptr;
  call.counts_out = num_accepted_out.data_ptr<int>();
  call.copy_rest = copy_unchanged_counts;
  return call;
}

SpecDecodeCall prepare_precopy(at::TensorList states, at::IntArrayRef kinds, at::IntArrayRef groups,
                               at::TensorList block_tables, int64_t num_rows, const at::Tensor& dst_cols,
                               const at::Tensor& src_cols, const at::Tensor& token_bias,
                               const c10::optional<at::Tensor>& idx_mapping, bool block_table_by_slot,
                               bool device_plan) {
  check_states(states, kinds, groups, block_tables);
  const at::Device device = states[0].device();
  int64_t slots = check_counts(dst_cols, "dst_cols", device);
  slots = std::min(slots, check_counts(src_cols, "src_cols", device));
  slots = std::min(slots, check_counts(token_bias, "token_bias", device));
  SpecDecodeCall call = make_call(states, kinds, groups, block_tables, num_rows, idx_mapping, slots,
                                  block_table_by_slot, device_plan);
  SpecDecodeSource& s = call.source;
  s.mode = kSpecPrecopy;
  s.block_size = 1;
  s.state_idx = dst_cols.data_ptr<int>();
  s.accepted = token_bias.data_ptr<int>();
  s.computed = src_cols.data_ptr<int>();
  return call;
}

void run_spec_decode_native(const SpecDecodeCall& call) {
  const SpecDecodeSource& source = call.source;
  if (call.counts_out != nullptr) {
    for (int64_t row = 0; row < source.rows; ++row) {
      i64 slot;
      int value;
      source.count_out(row, call.copy_rest, &slot, &value);
      if (slot >= 0) call.counts_out[slot] = value;
    }
  }
  native_run_rows(source);
}

}  // namespace xsc
