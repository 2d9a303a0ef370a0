"""How MambaSpecDecodeGPUContext's fused methods launch their Triton kernels, held to what our ops reproduce.

A method's parameters do not pin down what its kernel does: vLLM 0.34 added two compile-time flags
(SKIP_TEMPORAL_STATE_COPY, ZERO_TEMPORAL_TOKEN_BIAS) that change which states are copied and from which
column, and left every method signature as it was. So before a method is served by our ops:
  * every parameter of its kernel must be one of those the releases 0.22.1 to 0.34.0 have (a new one may
    change the copy in a way nobody here has read);
  * the launch may pass no keyword that is not one of those parameters or a Triton tuning option;
  * each parameter that decides what is copied, whether passed or left at its default, must be bound to an
    expression whose meaning ours reproduces: the context's own metadata tables, vLLM's conv-layout switch,
    the method's own inputs, and flags that are off, or on exactly when the context runs FlashInfer
    ReplaySSM (``self.replayssm is not None``; such contexts are handed back to vLLM's method).
Expressions are compared as ``ast.unparse`` writes them, so formatting does not matter. Which block-table row
the kernel copies through is read from its body (table_row_by_slot).
"""
import ast
from typing import Optional

from .pointer_stores import source_tree

KERNELS = {"run_fused_postprocess": "postprocess_mamba_fused_kernel",
           "run_fused_postprocess_align": "postprocess_mamba_fused_kernel",
           "run_fused_precopy": "precopy_mamba_align_fused_kernel"}
# The flags vLLM 0.34 turns on for FlashInfer ReplaySSM contexts, and the only condition accepted for them.
REPLAYSSM_GATE = "self.replayssm is not None"
REPLAYSSM_ATTRIBUTE = "replayssm"

_SHARED_PARAMETERS = (
    "block_table_ptrs_ptr", "block_table_stride_req", "state_base_addrs_ptr", "state_block_strides_ptr",
    "state_elem_sizes_ptr", "state_inner_sizes_ptr", "state_conv_widths_ptr", "state_group_indices_ptr",
    "state_dim_row_count_ptr", "state_dim_row_stride_ptr", "idx_mapping_ptr", "num_reqs", "COPY_BLOCK_SIZE",
    "CONV_STATE_DIM_FIRST", "HAS_IDX_MAPPING", "TEMPORAL_TILES")
# Every parameter name each kernel has had, 0.22.1 to 0.34.0 (0.22-0.23 lack the row metadata, 0.25 added
# the mapping and precomputed counts, 0.28 the temporal tiles, 0.34 the ReplaySSM flags).
KNOWN_PARAMETERS = {
    "postprocess_mamba_fused_kernel": frozenset(_SHARED_PARAMETERS + (
        "num_accepted_tokens_ptr", "mamba_state_idx_ptr", "num_scheduled_tokens_ptr", "num_computed_tokens_ptr",
        "num_draft_tokens_ptr", "num_accepted_tokens_out_ptr", "block_size", "PRECOMPUTED_NEW_COMPUTED",
        "SKIP_TEMPORAL_STATE_COPY")),
    "precopy_mamba_align_fused_kernel": frozenset(_SHARED_PARAMETERS + (
        "mamba_state_idx_ptr", "src_col_ptr", "token_bias_ptr", "ZERO_TEMPORAL_TOKEN_BIAS")),
}
# Launch keywords that only tune how Triton runs the kernel, not what it copies.
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages"})

_METADATA_TABLES = {f"{name}_ptr": (f"self.{name}",) for name in (
    "block_table_ptrs", "state_base_addrs", "state_block_strides", "state_elem_sizes", "state_inner_sizes",
    "state_conv_widths", "state_group_indices", "state_dim_row_count", "state_dim_row_stride")}
_COMMON_BINDINGS = {**_METADATA_TABLES, "block_table_stride_req": ("self.block_table_stride_req",),
                    "CONV_STATE_DIM_FIRST": ("is_conv_state_dim_first()",), "block_size": ("self.block_size",)}
# Per method: the expressions each parameter that decides the copy may be bound to (a parameter the kernel
# does not have is not asked for; one not listed here, such as a tuning size, may be anything).
EXPECTED_BINDINGS = {
    "run_fused_postprocess": {
        **_COMMON_BINDINGS, "num_accepted_tokens_ptr": ("num_accepted_tokens_gpu",),
        "mamba_state_idx_ptr": ("mamba_state_idx_gpu",), "num_scheduled_tokens_ptr": ("num_scheduled_tokens_gpu",),
        "num_computed_tokens_ptr": ("num_computed_tokens_gpu",), "num_draft_tokens_ptr": ("num_draft_tokens_gpu",),
        "num_accepted_tokens_out_ptr": ("self.num_accepted_tokens_out",), "HAS_IDX_MAPPING": ("False",),
        "PRECOMPUTED_NEW_COMPUTED": ("False",), "SKIP_TEMPORAL_STATE_COPY": ("False",)},
    # The accepted counts it decides from: the input itself (0.25-0.27), or a snapshot in the context's count
    # buffer (0.28 on), passed under a local name that changed between releases (resolved in check_launch).
    "run_fused_postprocess_align": {
        **_COMMON_BINDINGS, "mamba_state_idx_ptr": ("state_idx_gpu",),
        "num_accepted_tokens_ptr": ("num_accepted_tokens_gpu", "self.num_accepted_tokens_out",
                                    "self.num_accepted_tokens_snapshot"),
        "num_computed_tokens_ptr": ("new_num_computed_tokens_gpu",), "idx_mapping_ptr": ("idx_mapping",),
        "num_accepted_tokens_out_ptr": ("None", "num_accepted_tokens_gpu"), "HAS_IDX_MAPPING": ("True",),
        "PRECOMPUTED_NEW_COMPUTED": ("True",), "SKIP_TEMPORAL_STATE_COPY": ("False", REPLAYSSM_GATE)},
    "run_fused_precopy": {
        **_COMMON_BINDINGS, "mamba_state_idx_ptr": ("state_idx_gpu",), "src_col_ptr": ("src_col_gpu",),
        "token_bias_ptr": ("token_bias_gpu",), "idx_mapping_ptr": ("idx_mapping",),
        "HAS_IDX_MAPPING": ("True", "idx_mapping is not None"),
        "ZERO_TEMPORAL_TOKEN_BIAS": ("False", REPLAYSSM_GATE)},
}


def _single_assignments(tree):
    """name -> value of every `name = value` statement in the tree (the last one where a name has several)."""
    return {node.targets[0].id: node.value for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)}


def table_row_by_slot(kernel) -> Optional[bool]:
    """Which row of the block table vLLM's kernel copies through: the request slot (True), the batch row
    (False), or None when its source does not say. Read from the second argument of its call to the copy
    helper (`_copy_mamba_state_block(state_idx, <row>, ...)`), or from how the single-kernel releases
    (0.22-0.24) index the table (`... + req_idx * block_table_stride_req`: no batch rows there)."""
    tree = source_tree(getattr(kernel, "fn", kernel))  # a Triton JITFunction keeps the function as .fn
    if tree is None:
        return None
    aliases = _single_assignments(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_copy_mamba_state_block":
            row = node.args[1] if len(node.args) > 1 else None
            if isinstance(row, ast.Name) and row.id not in ("req_idx", "batch_idx") and row.id in aliases:
                row = aliases[row.id]  # e.g. bt_row_idx = batch_idx if HAS_IDX_MAPPING else req_idx
            if isinstance(row, ast.Name):
                return {"req_idx": True, "batch_idx": False}.get(row.id)
            if isinstance(row, ast.IfExp) and isinstance(row.body, ast.Name):  # batch row under idx_mapping
                return {"req_idx": True, "batch_idx": False}.get(row.body.id)
            return None
    text = ast.unparse(tree)
    if "req_idx * block_table_stride_req" in text and "idx_mapping" not in text:
        return True  # one indexing only: row == slot
    return None


def _kernel_definition(kernel) -> Optional[ast.FunctionDef]:
    tree = source_tree(getattr(kernel, "fn", kernel)) if kernel is not None else None  # Triton keeps it as .fn
    definition = tree.body[0] if tree is not None and tree.body else None
    return definition if isinstance(definition, ast.FunctionDef) else None


def _launches(method_tree, kernel_name):
    """Every ``kernel_name[grid](...)`` call in the method."""
    return [node for node in ast.walk(method_tree) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Subscript) and getattr(node.func.value, "id", None) == kernel_name]


def check_launch(method_name, kernel_name, kernel_def, method_tree) -> Optional[str]:
    """Why this launch of this kernel is not one our replacement of `method_name` reproduces, or None."""
    arguments = kernel_def.args
    if arguments.posonlyargs or arguments.kwonlyargs or arguments.vararg or arguments.kwarg:
        return f"{kernel_name} takes other than plain parameters"
    parameters = [a.arg for a in arguments.args]
    unknown = [p for p in parameters if p not in KNOWN_PARAMETERS[kernel_name]]
    if unknown:
        return f"{kernel_name} has parameters no verified release has: {', '.join(unknown)}"
    launches = _launches(method_tree, kernel_name)
    if len(launches) != 1:
        return f"{method_name} launches {kernel_name} {len(launches)} times, expected once"
    launch = launches[0]
    if (len(launch.args) > len(parameters) or any(isinstance(a, ast.Starred) for a in launch.args)
            or any(k.arg is None for k in launch.keywords)):
        return f"{method_name} launches {kernel_name} with arguments that cannot be matched to its parameters"
    bound = {p: ast.unparse(d) for p, d in zip(parameters[len(parameters) - len(arguments.defaults):],
                                                arguments.defaults)}
    bound.update((p, ast.unparse(a)) for p, a in zip(parameters, launch.args))
    for keyword in launch.keywords:
        if keyword.arg not in parameters and keyword.arg not in LAUNCH_OPTIONS:
            return f"{method_name} launches {kernel_name} with an unknown keyword {keyword.arg}"
        bound[keyword.arg] = ast.unparse(keyword.value)
    # A local name bound once in the method (`snapshot = self.<buffer>`) stands for what it was bound to.
    aliases = {name: ast.unparse(value) for name, value in _single_assignments(method_tree).items()}
    for parameter, allowed in EXPECTED_BINDINGS[method_name].items():
        value = bound.get(parameter)
        if parameter in parameters and value not in allowed and aliases.get(value) not in allowed:
            return (f"{method_name} sets {kernel_name}'s {parameter} to {value}, "
                    f"expected {' or '.join(allowed)}")
    return None


def launch_unrecognised(module, context, method_name) -> Optional[str]:
    """check_launch on the installed module's kernel and the context's method, or why they cannot be read."""
    kernel_name = KERNELS[method_name]
    kernel_def = _kernel_definition(getattr(module, kernel_name, None))
    method_tree = source_tree(context.__dict__[method_name])
    if kernel_def is None or method_tree is None:
        return f"cannot read the source of {kernel_name} or {method_name}"
    return check_launch(method_name, kernel_name, kernel_def, method_tree)
