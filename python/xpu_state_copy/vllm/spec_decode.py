"""vLLM's fused spec-decode state copies (MambaSpecDecodeGPUContext.run_fused_*) served by our ops.

vLLM's Triton kernels there read the pools and block tables through int64 address tables and add block
offsets to those integers. Where the installed release's context is recognised (read from its source, see
inspect_spec_decode), the plugin replaces those methods with ones that call mamba_spec_decode_postprocess_
/ mamba_spec_decode_precopy_: every address is then computed in C++/kernel code from the tensors.

What the replacement needs, the state pools in vLLM's order with their kinds and groups, and the block
tables, is taken when vLLM fills its own tables: the pools are found among the forward context's kv_cache
tensors by the addresses and block strides vLLM stored (one read of its metadata, at initialisation, where
vLLM reads it too), and checked against what vLLM stored for every state before anything is replaced.
"""
import functools
import inspect
import operator
from typing import Optional

from . import aligned_indices as aligned
from .fused_launches import KERNELS, REPLAYSSM_ATTRIBUTE, launch_unrecognised, table_row_by_slot
from .log import logger
from .plans import PLAN, plan_context

CONTEXT = "MambaSpecDecodeGPUContext"
INITIALISER = "initialize_from_forward_context"
# Each fused method with the parameters the replacement takes over, as vLLM names them.
FUSED_SIGNATURES = {
    "run_fused_postprocess": ["self", "num_reqs", "num_accepted_tokens_gpu", "mamba_state_idx_gpu",
                              "num_scheduled_tokens_gpu", "num_computed_tokens_gpu", "num_draft_tokens_gpu"],
    "run_fused_precopy": ["self", "num_reqs", "state_idx_gpu", "src_col_gpu", "token_bias_gpu", "idx_mapping"],
    "run_fused_postprocess_align": ["self", "num_reqs", "num_accepted_tokens_gpu", "state_idx_gpu",
                                    "new_num_computed_tokens_gpu", "idx_mapping"],
}
METADATA = ("state_base_addrs", "state_block_strides", "state_elem_sizes", "state_inner_sizes",
            "state_conv_widths", "state_group_indices", "block_table_ptrs")
# The context's accepted-count buffer: num_accepted_tokens_out up to 0.33, num_accepted_tokens_snapshot from 0.34.
COUNT_BUFFERS = ("num_accepted_tokens_out", "num_accepted_tokens_snapshot")
_MARK = "__xpu_state_copy_patch__"
_RECORDS_PLAN = "__xpu_state_copy_records_plan__"  # the initialiser wrapper (it may also wrap the address fix)
_SERVES_COPIES = "__xpu_state_copy_serves_copies__"  # on the context class once the run_fused_* are ours
_WARNED_REPLAYSSM = "__xpu_state_copy_warned_replayssm__"  # on the context class after its one warning
_WARNED_INPUTS = "__xpu_state_copy_warned_inputs__"  # on the context class: the input problems warned about


def count_buffer(context) -> Optional[str]:
    """The name of the context's accepted-count buffer (COUNT_BUFFERS), or None without one."""
    fields = getattr(context, "__annotations__", {})
    return next((name for name in COUNT_BUFFERS if name in fields), None)


def _parameters(function):
    try:
        return list(inspect.signature(inspect.unwrap(function)).parameters)
    except (TypeError, ValueError):
        return None


def has_fused_copies(module) -> bool:
    """Whether the module's context has any of the fused copy methods this plugin knows (FUSED_SIGNATURES)."""
    context = getattr(module, CONTEXT, None)
    return context is not None and any(name in context.__dict__ for name in FUSED_SIGNATURES)


def inspect_spec_decode(module):
    """(methods to replace, {method: table_row_by_slot}, what was not recognised)."""
    if not has_fused_copies(module):
        return [], {}, []  # no fused copies to serve
    context = getattr(module, CONTEXT)
    unrecognised = []
    fields = getattr(context, "__annotations__", {})
    missing = [name for name in METADATA if name not in fields]
    if count_buffer(context) is None:
        missing.append(" / ".join(COUNT_BUFFERS))
    if missing:
        unrecognised.append(f"{CONTEXT} has no {', '.join(missing)}")
    initialiser = context.__dict__.get(INITIALISER)
    params = _parameters(initialiser) if initialiser is not None else None
    if not params or params[1:5] != ["kv_cache_config", "forward_context", "mamba_state_copy_funcs", "block_tables"]:
        unrecognised.append(f"{CONTEXT}.{INITIALISER} takes {params}")
    methods, rows = [], {}
    for name, expected in FUSED_SIGNATURES.items():
        method = context.__dict__.get(name)
        if method is None:
            continue
        if _parameters(method) != expected:
            unrecognised.append(f"{CONTEXT}.{name} takes {_parameters(method)}, expected {expected}")
            continue
        why = launch_unrecognised(module, context, name)
        if why:
            unrecognised.append(why)
            continue
        by_slot = table_row_by_slot(getattr(module, KERNELS[name], None))
        if by_slot is None:
            unrecognised.append(f"cannot tell which block-table row {KERNELS[name]} copies through")
            continue
        methods.append(name)
        rows[name] = by_slot
    return (methods if not unrecognised else []), rows, unrecognised


def _recording_initialiser(method):
    signature = inspect.signature(method)

    @functools.wraps(method)
    def initialise_and_plan(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        # Planned again on every initialisation: a context filled a second time (other pools, other tables)
        # must not keep the plan of the first.
        cls, why = type(self), []
        try:
            if getattr(self, "is_initialized", False):
                why = plan_context(self, signature.bind(self, *args, **kwargs).arguments,
                                   getattr(cls, _SERVES_COPIES, False), getattr(cls, aligned.SERVES, None))
        except Exception as error:  # vLLM's initialiser has succeeded: planning must not fail it, nor keep a plan
            self.__dict__[PLAN] = self.__dict__[aligned.PLAN] = None
            why = [f"{type(error).__name__} while planning: {error}"]
        if why:
            logger.warning("xpu_state_copy: these stay on vLLM's kernels for this context: %s", "; ".join(why))
        return result

    setattr(initialise_and_plan, _MARK, True)
    setattr(initialise_and_plan, _RECORDS_PLAN, True)
    return initialise_and_plan


def ensure_recording_initialiser(context):
    """Wraps the context's initialiser once, so the plans of whatever we serve are made when vLLM fills it."""
    if not getattr(context.__dict__.get(INITIALISER), _RECORDS_PLAN, False):
        setattr(context, INITIALISER, _recording_initialiser(context.__dict__[INITIALISER]))


def _runs_replayssm(self) -> bool:
    """True for a FlashInfer ReplaySSM context (0.34+), warning once per context class: vLLM's kernels then
    leave its temporal and ring states to ReplaySSM (no copy after decoding, no token shift before), which
    our op does not reproduce, so vLLM's own method must run."""
    if getattr(self, REPLAYSSM_ATTRIBUTE, None) is None:
        return False
    cls = type(self)
    if not cls.__dict__.get(_WARNED_REPLAYSSM, False):
        setattr(cls, _WARNED_REPLAYSSM, True)
        logger.warning("xpu_state_copy: this vLLM runs FlashInfer ReplaySSM, whose temporal and ring states vLLM's "
                       "spec-decode kernels leave to ReplaySSM (skipped after decoding, copied unshifted before) "
                       "and xpu_state_copy's op does not, so these copies stay on vLLM's Triton kernels")
    return True


def _inputs_unrecognised(plan, num_reqs, inputs) -> Optional[str]:
    """Why a fused method's inputs are not ones our op takes (None: they are). `inputs`: name -> tensor or
    None (an optional input left out)."""
    import torch

    try:
        operator.index(num_reqs)
    except TypeError:
        return f"num_reqs is a {type(num_reqs).__name__}, not an int"
    for input_name, t in inputs.items():
        if t is None and input_name == "idx_mapping":
            continue
        if not isinstance(t, torch.Tensor):
            return f"{input_name} is a {type(t).__name__}, not a torch.Tensor"
        if t.dtype != torch.int32 or t.dim() != 1 or not t.is_contiguous() or t.device != plan.device:
            return (f"{input_name} ({t.dtype}, shape {tuple(t.shape)}, {t.device}) is not a contiguous int32 "
                    f"vector on {plan.device}")
    return None


def _warn_once(cls, what):
    said = cls.__dict__.get(_WARNED_INPUTS)
    if said is None:
        said = set()
        setattr(cls, _WARNED_INPUTS, said)
    if what not in said:
        said.add(what)
        logger.warning("xpu_state_copy: %s; this call and others like it stay on vLLM's kernel", what)


def _ours(name, original, by_slot, count_buffer_name):
    from .. import ops

    def plan_of(self, num_reqs, **inputs):
        """The recorded plan, or None (vLLM's own method then runs) when there is none, there are no requests,
        the context runs ReplaySSM, or an input is not what our op takes (an int32 vector on the pools'
        device): a runner that differs from the ones read must never crash. The last says so once."""
        plan = self.__dict__.get(PLAN)
        if plan is None or not getattr(self, "is_initialized", False) or _runs_replayssm(self):
            return None
        why = _inputs_unrecognised(plan, num_reqs, inputs)
        if why:
            _warn_once(type(self), f"{name}: {why}")
            return None
        return None if num_reqs == 0 else plan

    if name == "run_fused_postprocess":
        def run(self, num_reqs, num_accepted_tokens_gpu, mamba_state_idx_gpu, num_scheduled_tokens_gpu,
                num_computed_tokens_gpu, num_draft_tokens_gpu):
            plan = plan_of(self, num_reqs, num_accepted_tokens_gpu=num_accepted_tokens_gpu,
                           mamba_state_idx_gpu=mamba_state_idx_gpu, num_scheduled_tokens_gpu=num_scheduled_tokens_gpu,
                           num_computed_tokens_gpu=num_computed_tokens_gpu, num_draft_tokens_gpu=num_draft_tokens_gpu,
                           num_accepted_tokens_out=getattr(self, "num_accepted_tokens_out", None))
            if plan is None:
                return original(self, num_reqs, num_accepted_tokens_gpu, mamba_state_idx_gpu,
                                num_scheduled_tokens_gpu, num_computed_tokens_gpu, num_draft_tokens_gpu)
            ops.mamba_spec_decode_postprocess_(
                plan.states, plan.kinds, plan.groups, plan.block_tables, self.block_size, operator.index(num_reqs),
                num_accepted_tokens_gpu, mamba_state_idx_gpu, num_computed_tokens_gpu, self.num_accepted_tokens_out,
                num_scheduled=num_scheduled_tokens_gpu, num_draft=num_draft_tokens_gpu, copy_unchanged_counts=True)
    elif name == "run_fused_postprocess_align":
        # From 0.28 vLLM snapshots the counts into its count buffer first and leaves them there (0.34 reads
        # them back afterwards); 0.25-0.27 read and reset them in one launch and leave that buffer alone. Ours
        # decides from a snapshot either way: in the buffer where vLLM puts one, else in a fresh copy.
        try:
            source = inspect.getsource(inspect.unwrap(original))
            snapshot_in_buffer = f"self.{count_buffer_name}" in source
        except Exception:  # no source to read (OSError, TypeError, a __wrapped__ loop): keep the snapshot there
            snapshot_in_buffer = True

        def run(self, num_reqs, num_accepted_tokens_gpu, state_idx_gpu, new_num_computed_tokens_gpu, idx_mapping):
            buffer = {count_buffer_name: getattr(self, count_buffer_name, None)} if snapshot_in_buffer else {}
            plan = plan_of(self, num_reqs, num_accepted_tokens_gpu=num_accepted_tokens_gpu, state_idx_gpu=state_idx_gpu,
                           new_num_computed_tokens_gpu=new_num_computed_tokens_gpu, idx_mapping=idx_mapping, **buffer)
            if plan is None:
                return original(self, num_reqs, num_accepted_tokens_gpu, state_idx_gpu, new_num_computed_tokens_gpu,
                                idx_mapping)
            if snapshot_in_buffer:
                snapshot = getattr(self, count_buffer_name)
                snapshot.copy_(num_accepted_tokens_gpu)
            else:
                snapshot = num_accepted_tokens_gpu.clone()
            ops.mamba_spec_decode_postprocess_(
                plan.states, plan.kinds, plan.groups, plan.block_tables, self.block_size, operator.index(num_reqs),
                snapshot,
                state_idx_gpu, new_num_computed_tokens_gpu, num_accepted_tokens_gpu, idx_mapping=idx_mapping,
                block_table_by_slot=by_slot, copy_unchanged_counts=False)
    else:
        def run(self, num_reqs, state_idx_gpu, src_col_gpu, token_bias_gpu, idx_mapping):
            plan = plan_of(self, num_reqs, state_idx_gpu=state_idx_gpu, src_col_gpu=src_col_gpu,
                           token_bias_gpu=token_bias_gpu, idx_mapping=idx_mapping)
            if plan is None:
                return original(self, num_reqs, state_idx_gpu, src_col_gpu, token_bias_gpu, idx_mapping)
            ops.mamba_spec_decode_precopy_(plan.states, plan.kinds, plan.groups, plan.block_tables,
                                           operator.index(num_reqs), state_idx_gpu, src_col_gpu, token_bias_gpu,
                                           idx_mapping=idx_mapping, block_table_by_slot=by_slot)

    run = functools.wraps(original)(run)
    run.vllm_original = original
    setattr(run, _MARK, True)
    return run


def replace_fused_copies(module, methods, rows):
    """Installs the replacements; returns the names replaced now (empty when already in place)."""
    context = getattr(module, CONTEXT)
    if not methods or context.__dict__.get(_SERVES_COPIES, False):
        return []
    ensure_recording_initialiser(context)
    setattr(context, _SERVES_COPIES, True)
    for name in methods:
        setattr(context, name, _ours(name, context.__dict__[name], rows[name], count_buffer(context)))
    return list(methods)
