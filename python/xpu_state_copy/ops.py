"""Thin Python wrappers over the registered ops, and their fake implementations for torch.compile."""
import functools
import sys
from typing import Optional, Sequence

import torch

from . import _loader  # noqa: F401  loads the compiled ops before anything refers to them
from . import import_hook
from . import validate

_ops = torch.ops.xpu_state_copy


def batch_memcpy(src_ptrs: torch.Tensor, dst_ptrs: torch.Tensor, sizes: torch.Tensor,
                 bounds: Optional[Sequence[torch.Tensor]] = None) -> None:
    """For every i, copy sizes[i] bytes from address src_ptrs[i] to address dst_ptrs[i], in one launch.

    Same argument order and dtypes as vLLM's ``batch_memcpy``: src_ptrs/dst_ptrs are 1-D contiguous
    torch.uint64 tables (torch.int64 holding the same bits is accepted too), sizes is 1-D contiguous int32 or
    int64 byte counts, all three on the device whose memory the addresses point into. Each entry is a
    memmove (its own source and destination may overlap); different entries must not overlap each other.
    The call is asynchronous on accelerators (enqueued on the current stream) and never reads sizes back.

    Validate mode (``bounds=[tensors]``, or XPU_STATE_COPY_VALIDATE=1 for every call): before launching, the
    tables are read back (this synchronizes) and checked to stay inside the bound tensors' storage, not to
    wrap past 2**64 and not to race with one another; see xpu_state_copy.validate.

    Under torch.compile the call is a graph break (so ``fullgraph=True`` cannot contain it): it always runs
    eagerly, between the compiled code before and after it, and validate mode works there too.
    """
    if torch.compiler.is_compiling():
        return _batch_memcpy_outside_graph()(src_ptrs, dst_ptrs, sizes, bounds)
    if bounds is not None or validate.requested():
        validate.validate_batch(src_ptrs, dst_ptrs, sizes, bounds)
    _ops.batch_memcpy(src_ptrs, dst_ptrs, sizes)


# A graph break under torch.compile, on purpose: the copy reads and writes memory that only the addresses
# name, so a graph holding it would be free to move reads or writes of those tensors across it (or fuse
# them into one kernel around it). Compiled code before the call finishes first, then the copy runs
# eagerly, then compiled code after it: eager order. (An effect token would order the op only against
# other effectful ops, not against the tensor ops around it.) Only taken while compiling: the wrapper that
# torch.compiler.disable adds cost 5 µs per eager call (torch 2.13, a shared 2-core x86 CPU).
@functools.cache
def _batch_memcpy_outside_graph():
    return torch.compiler.disable(batch_memcpy)


# The same for the raw op called inside a compiled function: a graph break rather than a misplaced copy.
# Registered once torch._dynamo is imported (torch.compile imports it before tracing anything), not here:
# importing it takes 0.8 s, half of a fresh process's first copy when it needs no compiler.
def _keep_out_of_graphs(dynamo):
    dynamo.disallow_in_graph(_ops.batch_memcpy)


if "torch._dynamo" in sys.modules:
    _keep_out_of_graphs(sys.modules["torch._dynamo"])
else:
    import_hook.install("torch._dynamo", _keep_out_of_graphs)


STATE_KINDS = {"whole": 0, "conv_sd": 1, "conv_ds": 2}


def copy_states_(states: Sequence[torch.Tensor], kinds: Sequence[str], src_blocks: torch.Tensor,
                 dst_blocks: torch.Tensor, shifts: Optional[torch.Tensor] = None) -> None:
    """Copy block src_blocks[r] to block dst_blocks[r] of every state, for every request r, in one launch.

    Every address is computed in C++/kernel code from the tensors; nothing passes through Python ints.

    states: state pools ``[num_blocks, ...]`` (block dim 0, block stride may be padded), any dtype, one device.
    kinds, one per state:
      "whole"    state[dst] = state[src] (temporal/SSM states; each block contiguous);
      "conv_sd"  ``[blocks, tokens, dim]``: state[dst, :T-s] = state[src, s:] with s = shifts[r];
      "conv_ds"  ``[blocks, dim, tokens]``: state[dst, :, :T-s] = state[src, :, s:] (tokens contiguous).
    src_blocks, dst_blocks, shifts: 1-D int32 or int64 (one dtype), one entry per request, on the states'
    device; shifts defaults to zeros (passing it avoids an allocation per call). A block id of -1 skips that
    request; src == dst with a shift is an in-place left shift, done correctly. Ids and shifts on the CPU are
    range-checked; on an accelerator they are not read back, and the kernel skips invalid ones.
    Requests must not write blocks that other requests read or write.
    """
    kinds = tuple(kinds)  # read once: it may be an iterator
    kind_ids = _kind_ids(kinds) if _cacheable(kinds) else _kind_ids.__wrapped__(kinds)
    if shifts is None:
        shifts = torch.zeros_like(src_blocks)
    _ops.copy_states_(list(states), kind_ids, src_blocks, dst_blocks, shifts)


def _cacheable(kinds: tuple) -> bool:
    """Whether _kind_ids may use its cache: not while torch.compile traces (it bypasses caches, with a
    warning), and not for an unhashable entry (the plain conversion then reports what is wrong)."""
    if torch.compiler.is_compiling():
        return False
    try:
        hash(kinds)
    except TypeError:
        return False
    return True


@functools.lru_cache(maxsize=32)
def _kind_ids(kinds: tuple) -> tuple:
    """Kind names to the op's ids. Cached: vLLM passes the same dozens of kinds on every step, and converting
    72 of them on every call cost about 10 µs (measured on the CPU)."""
    try:
        return tuple(STATE_KINDS[k] if isinstance(k, str) else int(k) for k in kinds)
    except KeyError as error:
        raise ValueError(f"kinds: unknown kind {error.args[0]!r}; expected one of {sorted(STATE_KINDS)}") from None


def pointer_table(tensors: Sequence[torch.Tensor], allow_non_contiguous: bool = False) -> torch.Tensor:
    """A torch.uint64 tensor, on the tensors' device, of their data_ptr() values, computed in C++.

    A non-contiguous tensor is refused unless allow_non_contiguous=True: its data_ptr() is only its first
    element's address, and copying its nbytes from there copies the gaps and misses its end. Pass True only
    when you compute each entry's size (and rows) yourself."""
    tensors = list(tensors)
    if not tensors:
        return torch.empty(0, dtype=torch.uint64)
    _check_one_device(tensors)
    if not allow_non_contiguous:
        for i, t in enumerate(tensors):
            if not t.is_contiguous():
                raise ValueError(
                    f"tensors[{i}] is not contiguous (shape {list(t.shape)}, stride {list(t.stride())}): its "
                    f"address is only its first element's, so copying its nbytes from there would copy the gaps "
                    f"and miss its end; pass .contiguous() tensors, or allow_non_contiguous=True if you compute "
                    f"the sizes yourself")
    return _ops.pointer_table(tensors)


def write_pointers_(table: torch.Tensor, tensors: Sequence[torch.Tensor], start: int = 0) -> torch.Tensor:
    """Write the tensors' data_ptr() values, bit-exact, into the 1-D int64/uint64 `table` at start...

    What ``table[idx] = tensor.data_ptr()`` means, without the Python int that overflows int64 for an XPU
    address. Returns `table`.
    """
    tensors = list(tensors)
    if tensors:
        _check_one_device(tensors)
    _ops.write_pointers_(table, tensors, start)  # even for no tensors: the table and start are still checked
    return table


def _check_one_device(tensors):
    """Checked here as well as in C++: a list that mixes in a meta tensor dispatches to the fake
    implementation, which never sees the C++ check."""
    for i, t in enumerate(tensors):
        if t.device != tensors[0].device:
            raise RuntimeError(f"tensors[{i}] is on {t.device} but tensors[0] is on {tensors[0].device}")


# The fake implementations also serve the meta device: a call that mixes a meta tensor with real ones
# dispatches here, so they repeat the C++ device checks; otherwise such a call would silently copy nothing.
@torch.library.register_fake("xpu_state_copy::batch_memcpy")
def _batch_memcpy_fake(src_ptrs, dst_ptrs, sizes):
    for name, t in (("dst_ptrs", dst_ptrs), ("sizes", sizes)):
        if t.device != src_ptrs.device:
            raise RuntimeError(f"{name} is on {t.device} but src_ptrs is on {src_ptrs.device}; all three must "
                               f"be on the device whose memory the addresses point into")


@torch.library.register_fake("xpu_state_copy::_sycl_batch_memcpy")
def _sycl_batch_memcpy_fake(src_ptrs, dst_ptrs, sizes):
    _batch_memcpy_fake(src_ptrs, dst_ptrs, sizes)


@torch.library.register_fake("xpu_state_copy::copy_states_")
def _copy_states_fake(states, kinds, src_blocks, dst_blocks, shifts):
    if not states:
        return
    device = states[0].device
    named = [(f"states[{j}]", s) for j, s in enumerate(states)]
    for name, t in named + [("src_blocks", src_blocks), ("dst_blocks", dst_blocks), ("shifts", shifts)]:
        if t.device != device:
            raise RuntimeError(f"{name} is on {t.device} but states[0] is on {device}")


@torch.library.register_fake("xpu_state_copy::_sycl_copy_states_")
def _sycl_copy_states_fake(states, kinds, src_blocks, dst_blocks, shifts):
    _copy_states_fake(states, kinds, src_blocks, dst_blocks, shifts)


@torch.library.register_fake("xpu_state_copy::pointer_table")
def _pointer_table_fake(tensors):
    return torch.empty(len(tensors), dtype=torch.uint64, device=tensors[0].device)


@torch.library.register_fake("xpu_state_copy::write_pointers_")
def _write_pointers_fake(table, tensors, start=0):
    # The table may live elsewhere than the tensors (a host table of device addresses), but a meta tensor
    # has no memory: mixed with real ones, nothing would be written.
    named = [("table", table)] + [(f"tensors[{i}]", t) for i, t in enumerate(tensors)]
    meta = [name for name, t in named if t.device.type == "meta"]
    real = [(name, t.device) for name, t in named if t.device.type != "meta"]
    if meta and real:
        raise RuntimeError(f"{meta[0]} is on meta but {real[0][0]} is on {real[0][1]}; a meta tensor has no "
                           f"address: pass real tensors (or only meta ones, to trace shapes)")


def mamba_spec_decode_postprocess_(states: Sequence[torch.Tensor], kinds: Sequence[str], groups: Sequence[int],
                                   block_tables: Sequence[torch.Tensor], block_size: int, num_rows: int,
                                   num_accepted: torch.Tensor, state_idx: torch.Tensor, num_computed: torch.Tensor,
                                   num_accepted_out: torch.Tensor, num_scheduled: Optional[torch.Tensor] = None,
                                   num_draft: Optional[torch.Tensor] = None,
                                   idx_mapping: Optional[torch.Tensor] = None, block_table_by_slot: bool = False,
                                   copy_unchanged_counts: bool = True) -> None:
    """After a speculative-decoding step, save each request's running state at its last full block, in one
    launch, deciding on the device (nothing is read back) whether and what to copy.

    states, kinds: the state pools and their kinds, as for copy_states_; groups[j]: which of block_tables
    (int32 ``[requests, blocks]``, columns contiguous) holds the blocks of states[j].
    Per request slot (1-D int32 tensors on the states' device): num_accepted (accepted tokens), state_idx
    (the block-table column of the running state) and num_computed; with num_scheduled and num_draft the
    running state holds ``num_computed + num_scheduled - num_draft`` tokens, without them num_computed
    already counts this step (the running state then holds ``num_computed - num_accepted + 1``). Row r of
    the launch (r < num_rows) is request slot idx_mapping[r] (negative: skipped), or r without idx_mapping;
    its block-table row is the slot if block_table_by_slot, else r.
    With new = running + accepted - 1 and aligned = new // block_size * block_size, nothing happens unless
    aligned >= running; then bias = aligned - running and the destination column is
    aligned // block_size - 1. Every state is copied from column state_idx to that column: whole blocks
    from column state_idx + bias, conv states with their first bias tokens dropped (an in-place left shift
    when the block is the same); nothing when the columns are equal and bias is 0.
    num_accepted_out[slot] is set to 1 where the columns are equal; with copy_unchanged_counts every other
    row's slot gets num_accepted[slot]. It must not overlap any input (the decisions read the inputs as they
    were before the call). Out-of-range columns, block ids or slots copy nothing.
    """
    _ops.mamba_spec_decode_postprocess_(
        list(states), _state_kind_ids(kinds), list(groups), list(block_tables), block_size, num_rows, num_accepted,
        state_idx, num_computed, num_scheduled, num_draft, num_accepted_out, idx_mapping, block_table_by_slot,
        copy_unchanged_counts)


def mamba_spec_decode_precopy_(states: Sequence[torch.Tensor], kinds: Sequence[str], groups: Sequence[int],
                               block_tables: Sequence[torch.Tensor], num_rows: int, dst_cols: torch.Tensor,
                               src_cols: torch.Tensor, token_bias: torch.Tensor,
                               idx_mapping: Optional[torch.Tensor] = None, block_table_by_slot: bool = False) -> None:
    """Before a step, move each request's state from block-table column src_cols[slot] to dst_cols[slot],
    dropping token_bias[slot] accepted tokens (whole blocks: from column src + bias), in one launch decided
    on the device. Rows, slots, tables and kinds as in mamba_spec_decode_postprocess_; a request with a
    negative source column or equal columns copies nothing.
    """
    _ops.mamba_spec_decode_precopy_(list(states), _state_kind_ids(kinds), list(groups), list(block_tables),
                                    num_rows, dst_cols, src_cols, token_bias, idx_mapping, block_table_by_slot)


def _state_kind_ids(kinds) -> tuple:
    kinds = tuple(kinds)
    return _kind_ids(kinds) if _cacheable(kinds) else _kind_ids.__wrapped__(kinds)


for _name in ("mamba_spec_decode_postprocess_", "_sycl_mamba_spec_decode_postprocess_",
              "mamba_spec_decode_precopy_", "_sycl_mamba_spec_decode_precopy_"):
    torch.library.register_fake(f"xpu_state_copy::{_name}")(lambda *args, **kwargs: None)
