// The native CPU path: the same spans the kernels compute (csrc/core's sources), each row a memmove.
// Entries never overlap one another, so they run in parallel.
#pragma once
#include <ATen/Parallel.h>

#include <cstdint>
#include <cstring>

#include "entry_sources.h"

namespace xsc {

inline void memmove_span(const Span& s) {
  for (i64 r = 0; r < s.rows; ++r)
    std::memmove(reinterpret_cast<void*>((uintptr_t)(s.dst + (u64)r * s.dst_stride)),
                 reinterpret_cast<const void*>((uintptr_t)(s.src + (u64)r * s.src_stride)), (size_t)s.row_bytes);
}

// Every (row, state) entry of a row source (StatePlanSource, SpecDecodeSource).
template <class RowSource>
void native_run_rows(const RowSource& source) {
  const i64 states = source.states;
  at::parallel_for(0, source.row_count() * states, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const RowOf row = source.row_of(i / states);
      if (source.copies(row)) memmove_span(source.span(row, i % states));
    }
  });
}

inline void native_run_table(const PointerTableSource& source) {
  at::parallel_for(0, source.count(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) memmove_span(source.span(i));
  });
}

}  // namespace xsc
