"""The plans the replaced MambaSpecDecodeGPUContext methods run from, made each time vLLM initialises a context.

A plan is taken from what vLLM hands its initialiser (the forward context's kv_cache states, the block
tables) and checked against what vLLM stored in its own tables. vLLM accepts more than our ops do: its tests
build contexts from stand-ins that only have data_ptr() and a shape, and a pool or a table may have a dtype,
a device or a layout our ops refuse. Such a context gets no plan and its methods stay vLLM's own; the
initialiser's wrapper (spec_decode) says why in one warning. Nothing here raises into vLLM's initialiser,
which has already succeeded by the time a plan is made.
"""
from typing import Optional

from . import aligned_indices as aligned
from .kv_caches import as_list, layer_kv_cache, whole_table

PLAN = "_xsc_plan"  # in a context's __dict__: its SpecDecodePlan, or None (vLLM's own methods run)


class SpecDecodePlan:
    """Our ops' view of one context: pools in vLLM's order, their kinds and groups, the block tables."""

    def __init__(self, states, kinds, groups, block_tables):
        self.states, self.kinds, self.groups, self.block_tables = states, kinds, groups, block_tables
        self.device = states[0].device


def _block_numel(t):
    n = 1
    for size in t.shape[1:]:
        n *= size
    return n


def _dense_block(t) -> bool:
    """Whether a block (every dim but the first) is dense and row-major, as our ops require of a whole or
    SD conv state."""
    expected = 1
    for d in range(t.dim() - 1, 0, -1):
        if t.size(d) != 1 and t.stride(d) != expected:
            return False
        expected *= t.size(d)
    return True


def _state_problem(j, state, kind, device) -> Optional[str]:
    """Why our ops would refuse vLLM's state j, or None."""
    if state.device != device:
        return f"state {j} is on {state.device}, state 0 on {device}"
    if state.stride(0) < 0:
        return f"state {j} has a negative block stride"
    if kind == "conv_ds":
        ok = state.size(2) <= 1 or state.stride(2) == 1
    else:
        ok = _block_numel(state) == 0 or _dense_block(state)
    return None if ok else f"state {j} ({kind}, strides {state.stride()}) is not laid out as our op reads it"


def table_problem(g, table, device) -> Optional[str]:
    """Why our ops would refuse block table g, or None."""
    import torch

    if not isinstance(table, torch.Tensor):
        return f"block table {g} is a {type(table).__name__}, not a torch.Tensor"
    if (table.dim() != 2 or table.dtype != torch.int32 or table.device != device
            or (table.size(1) > 1 and table.stride(1) != 1) or table.stride(0) < 0):
        return (f"block table {g} ({table.dtype}, shape {tuple(table.shape)}, strides {table.stride()}, "
                f"{table.device}) is not an int32 [requests, blocks] table with contiguous columns on {device}")
    return None


def _kv_cache_tensors(forward_context):
    """{address: [state tensors]} of every layer's kv_cache (a Mamba layer's states before an attention layer's
    cache, which may start at the same address: vLLM lays a hybrid model's groups over shared tensors), or a
    string naming the first kv_cache that is not made of tensors."""
    states, caches = {}, {}
    for name, layer in (forward_context.items() if forward_context is not None else ()):
        tensors, why = layer_kv_cache(layer)
        if why:
            return f"layer {name}'s kv_cache {why}"
        held = states if isinstance(getattr(layer, "kv_cache", None), (list, tuple)) else caches
        for state in tensors:
            if state.dim() >= 2:
                held.setdefault(state.data_ptr(), []).append(state)
    for address, tensors in caches.items():
        states.setdefault(address, []).extend(tensors)
    return states


def _kind(state, width, inner, ds_rows):
    """(kind, whether `state` has the sizes vLLM stored for it)."""
    if width == 0:
        return "whole", inner == _block_numel(state)
    if ds_rows > 0:
        return "conv_ds", state.dim() == 3 and width == state.size(2) and ds_rows == state.size(1)
    return "conv_sd", state.dim() == 3 and width == state.size(1) and inner == state.stride(1)


def build_plan(context, forward_context, block_tables):
    """The plan matching what vLLM stored in `context`'s tables, or a string saying why there is none."""
    from ..pointers import as_unsigned

    pools = _kv_cache_tensors(forward_context)
    if isinstance(pools, str):
        return pools
    addresses = [as_unsigned(v) for v in context.state_base_addrs.tolist()]
    if not addresses:
        return "vLLM stored no Mamba states"
    strides = context.state_block_strides.tolist()
    widths = context.state_conv_widths.tolist()
    inner = context.state_inner_sizes.tolist()
    groups = context.state_group_indices.tolist()
    ds_rows = context.state_dim_row_count.tolist() if hasattr(context, "state_dim_row_count") else [0] * len(widths)
    states, kinds = [], []
    for j, address in enumerate(addresses):
        match = [s for s in pools.get(address, ()) if s.stride(0) * s.element_size() == strides[j]]
        if not match:
            return f"state {j}: no kv_cache tensor at the address and block stride vLLM stored"
        # The first tensor there with vLLM's sizes: an attention cache over the same memory is passed over.
        fits = [(s, *_kind(s, widths[j], inner[j], ds_rows[j])) for s in match]
        state, kind, ok = next((fit for fit in fits if fit[2]), fits[0])
        if not ok:
            return (f"state {j}: vLLM's sizes (width {widths[j]}, inner {inner[j]}) do not match {kind} "
                    f"{tuple(state.shape)}")
        why = _state_problem(j, state, kind, states[0].device if states else state.device)
        if why:
            return why
        states.append(state)
        kinds.append(kind)
    tables = as_list(block_tables)
    stored = [as_unsigned(v) for v in context.block_table_ptrs.tolist()]
    if not tables or len(tables) != len(stored) or any(not hasattr(t, "data_ptr") for t in tables) \
            or [t.data_ptr() for t in tables] != stored:
        return "the block tables are not the ones vLLM stored"
    if any(not 0 <= g < len(tables) for g in groups):
        return f"a state's group ({groups}) names no block table of the {len(tables)}"
    why = next(filter(None, (table_problem(g, t, states[0].device) for g, t in enumerate(tables))), None)
    return why or SpecDecodePlan(states, kinds, groups, [whole_table(t) for t in tables])


def plan_context(context, arguments, serves_copies, aligned_table):
    """Make (or replace) the context's plans from the initialiser's bound `arguments`: the spec-decode plan
    when its fused copies are ours, the aligned-index plan when `aligned_table` names the table it reads.
    Returns what was not recognised, one phrase per plan that could not be made (empty: all made). Never
    raises: a plan that fails to build is no plan."""
    context.__dict__[PLAN] = None
    context.__dict__[aligned.PLAN] = None
    why = []
    for wanted, name, build, kind, slot in (
            (serves_copies, "spec-decode copies", lambda: build_plan(
                context, arguments.get("forward_context"), arguments.get("block_tables")), SpecDecodePlan, PLAN),
            (aligned_table, aligned.METHOD, lambda: aligned.build_aligned_plan(context, arguments, aligned_table),
             aligned.AlignedPlan, aligned.PLAN)):
        if not wanted:
            continue
        try:
            plan = build()
        except Exception as error:  # an object unlike any vLLM release builds: its own methods decide
            plan = f"{type(error).__name__} while reading it: {error}"
        if isinstance(plan, kind):
            context.__dict__[slot] = plan
        else:
            why.append(f"{name}: {plan}")
    return why
