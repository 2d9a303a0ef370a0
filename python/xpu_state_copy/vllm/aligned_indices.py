"""vLLM's MambaSpecDecodeGPUContext.compute_aligned_state_indices (0.29+) served by torch gathers.

vLLM's method launches a Triton kernel that loads each Mamba group's block table through an int64 address
table (`block_table_ptrs`, or `aligned_index_block_table_ptrs` from 0.32) and adds row and column offsets
to those integers. What it computes, per group g, batch row r < num_reqs and state slot k:

    first = max((seq_lens[r] - 1) // block_size, 0)
    out[g, r, k] = table_g element at flat position r * stride(0) + first + k

into the context's persistent `aligned_state_indices` buffer [groups, max_reqs, slots], rows from num_reqs
on left as they were, and returns `buffer[:, :num_reqs]`. The replacement computes the same positions with
tensor ops and gathers from the block-table tensors themselves: no address leaves C++/torch, nothing is
read back. The tables are the ones vLLM stored the addresses of, recovered (and checked against those
addresses) when vLLM initialises the context. A position past the table's last element, where vLLM's kernel
would read outside the tensor, gives -1.
"""
import ast
import functools
import inspect
import operator

from .kv_caches import as_list, whole_table
from .pointer_stores import self_attribute, source_tree

METHOD = "compute_aligned_state_indices"
KERNEL = "get_aligned_state_indices_multi_group_kernel"
OUTPUT = "aligned_state_indices"
_PARAMETERS = ["self", "seq_lens", "num_reqs"]
_KERNEL_PARAMETERS = ["block_table_ptrs_ptr", "seq_lens_ptr", "state_indices_ptr", "block_table_stride_req",
                      "seq_lens_stride", "state_indices_stride_0", "state_indices_stride_1",
                      "state_indices_stride_2", "num_requests", "CACHE_BLOCK_SIZE", "NUM_GROUPS", "BLOCK_GROUPS",
                      "NUM_STATE_SLOTS", "BLOCK_STATE_SLOTS", "BLOCK_ROWS"]
# The two expressions that define the indices, as ast.unparse writes them (so formatting cannot hide them):
# the first state column of a row, and the flat position the kernel loads from.
_KERNEL_RULES = ("tl.maximum((seq_lens - 1) // CACHE_BLOCK_SIZE, 0)",
                 "rows[None, :, None] * block_table_stride_req + first_state_slot[None, :, None] + "
                 "state_slots[None, None, :]")
# The initialiser's parameters that may hold the tables the kernel reads, in the order they are tried.
TABLE_ARGUMENTS = ("aligned_index_block_tables", "block_tables")
_MARK = "__xpu_state_copy_patch__"
SERVES = "__xpu_state_copy_aligned_table__"  # on the context class: the address table whose tables we read
PLAN = "_xsc_aligned"  # in a context's __dict__: its AlignedPlan, or None (vLLM's own method runs)


def inspect_aligned_indices(module, context):
    """(the address-table attribute the kernel reads, what was not recognised); (None, []) without the method."""
    method = context.__dict__.get(METHOD) if context is not None else None
    if method is None:
        return None, []
    try:
        params = list(inspect.signature(inspect.unwrap(method)).parameters)
    except (TypeError, ValueError):
        params = None
    if params != _PARAMETERS:
        return None, [f"{context.__name__}.{METHOD} takes {params}, expected {_PARAMETERS}"]
    kernel = getattr(module, KERNEL, None)
    kernel_tree = source_tree(getattr(kernel, "fn", kernel)) if kernel is not None else None
    kernel_def = kernel_tree.body[0] if kernel_tree is not None and kernel_tree.body else None
    if not isinstance(kernel_def, ast.FunctionDef) or [a.arg for a in kernel_def.args.args] != _KERNEL_PARAMETERS:
        return None, [f"{KERNEL} is missing or takes other parameters"]
    text = ast.unparse(kernel_def)
    if not all(rule in text for rule in _KERNEL_RULES):
        return None, [f"{KERNEL} computes its indices differently"]
    launch = None
    for node in ast.walk(source_tree(method) or ast.Module(body=[], type_ignores=[])):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and getattr(node.func.value, "id", None) == KERNEL):
            launch = node
    if launch is None or len(launch.args) < 4:
        return None, [f"{context.__name__}.{METHOD} does not launch {KERNEL} as expected"]
    table, output, stride = (self_attribute(a) for a in (launch.args[0], launch.args[2], launch.args[3]))
    fields = getattr(context, "__annotations__", {})
    if table not in fields or output != OUTPUT or stride != "block_table_stride_req" or OUTPUT not in fields:
        return None, [f"{context.__name__}.{METHOD} launches {KERNEL} with {table}, {output}, {stride}"]
    return table, []


class AlignedPlan:
    """The tables flattened over their own extent (the elements vLLM's flat positions can reach), grouped by
    extent so the bounds are computed once per distinct size, and each row's flat start per state slot."""

    def __init__(self, tables, stride, block_size, max_reqs, slots, device):
        import torch

        self.block_size = block_size
        self.out_shape = (len(tables), max_reqs, slots)  # the aligned_state_indices buffer it was made for
        self.by_extent = {}
        for group, table in enumerate(tables):
            rows, columns = table.shape
            extent = (rows - 1) * stride + columns if rows and columns else 0
            flat = table.as_strided((extent,), (1,)) if extent else None
            self.by_extent.setdefault(extent, []).append((group, flat))
        rows = torch.arange(max_reqs, dtype=torch.int64, device=device).mul_(stride)
        self.row_starts = rows.unsqueeze(1) + torch.arange(slots, dtype=torch.int64, device=device)
        self.first_column = torch.empty(max_reqs, dtype=torch.int64, device=device)


def build_aligned_plan(context, arguments, table_attribute):
    """The plan for `context` from the initialiser's bound arguments, or a string saying why there is none."""
    import torch

    from ..pointers import as_unsigned

    out = getattr(context, OUTPUT, None)
    if not isinstance(out, torch.Tensor) or out.dim() != 3 or out.dtype != torch.int32:
        return f"{OUTPUT} is {getattr(out, 'shape', out)}, not an int32 [groups, requests, slots] buffer"
    stored = [as_unsigned(v) for v in getattr(context, table_attribute).tolist()]
    tables = None
    for name in TABLE_ARGUMENTS:
        candidate = as_list(arguments.get(name))
        if candidate and all(hasattr(t, "data_ptr") for t in candidate) and [t.data_ptr() for t in candidate] == stored:
            tables = candidate
            break
    if tables is None:
        return f"no block tables at the addresses vLLM stored in {table_attribute}"
    stride = context.block_table_stride_req
    if len(tables) != out.shape[0]:
        return f"{len(tables)} block tables for {out.shape[0]} groups of {OUTPUT}"
    for g, table in enumerate(tables):
        if not isinstance(table, torch.Tensor):
            return f"block table {g} is a {type(table).__name__}, not a torch.Tensor"
        if (table.dim() != 2 or table.dtype != torch.int32 or table.device != out.device
                or table.stride(0) != stride or (table.size(1) > 1 and table.stride(1) != 1)):
            return (f"block table {g} ({table.dtype}, shape {tuple(table.shape)}, strides {table.stride()}, "
                    f"{table.device}) is not an int32 row-major table with row stride {stride} on {out.device}")
    tables = [whole_table(t) for t in tables]  # the engine hands over the first rows' view
    return AlignedPlan(tables, stride, context.block_size, out.shape[1], out.shape[2], out.device)


def gather_aligned_indices(plan, out, seq_lens, num_reqs):
    """Fills out[:, :num_reqs] from the plan's tables: shared position math, then a take per group."""
    import torch

    first = plan.first_column[:num_reqs]
    first.copy_(seq_lens[:num_reqs]).sub_(1)  # in int64, so no length wraps
    first.div_(plan.block_size, rounding_mode="floor").clamp_(min=0)
    positions = plan.row_starts[:num_reqs] + first.unsqueeze(1)
    for extent, groups in plan.by_extent.items():
        if extent == 0:
            for group, _ in groups:
                out[group, :num_reqs].fill_(-1)
            continue
        outside = positions >= extent
        clamped = positions.clamp(max=extent - 1)
        for group, flat in groups:
            rows = out[group, :num_reqs]
            torch.take(flat, clamped, out=rows)
            rows.masked_fill_(outside, -1)


def ours(original):
    import torch

    @functools.wraps(original)
    def compute_aligned_state_indices(self, seq_lens, num_reqs):
        plan = self.__dict__.get(PLAN)
        out = getattr(self, OUTPUT, None)
        usable = (plan is not None and getattr(self, "is_initialized", False)
                  and isinstance(out, torch.Tensor) and tuple(out.shape) == plan.out_shape
                  and isinstance(seq_lens, torch.Tensor) and seq_lens.dim() == 1
                  and seq_lens.dtype in (torch.int32, torch.int64) and seq_lens.device == out.device)
        if not usable:  # a runner unlike the ones read: vLLM's own method decides
            return original(self, seq_lens, num_reqs)
        try:
            rows = operator.index(num_reqs)
        except TypeError:
            rows = -1
        if not 0 <= rows <= min(seq_lens.shape[0], out.shape[1]):  # vLLM's own method fails on these too
            raise ValueError(f"{METHOD}: num_reqs={num_reqs!r} must be an int in [0, min(len(seq_lens)="
                             f"{seq_lens.shape[0]}, max requests={out.shape[1]})]")
        if rows:
            gather_aligned_indices(plan, out, seq_lens, rows)
        return out[:, :rows]

    compute_aligned_state_indices.vllm_original = original
    setattr(compute_aligned_state_indices, _MARK, True)
    return compute_aligned_state_indices


def replace_aligned_indices(module, table_attribute, ensure_recording_initialiser) -> bool:
    """Installs ours; False when it is already in place."""
    context = getattr(module, "MambaSpecDecodeGPUContext")
    if getattr(context.__dict__.get(METHOD), _MARK, False):
        return False
    ensure_recording_initialiser(context)
    setattr(context, SERVES, table_attribute)
    setattr(context, METHOD, ours(context.__dict__[METHOD]))
    return True
