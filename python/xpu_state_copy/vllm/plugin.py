"""vLLM plugin: makes vLLM's Mamba/GDN state copies safe and fast on Intel GPUs.

Loaded by vLLM in every process through the ``vllm.general_plugins`` entry point (``register``). On XPU
(or with XPU_STATE_COPY_VLLM=1; =0 turns it off) it waits until ``vllm.v1.worker.mamba_utils`` is imported
and then, after reading that module's source (see vllm_compat):
  * routes its ``batch_memcpy`` (called by ``do_mamba_copy_block``; 0.22.1-0.33.0, the V1 runner) to ours:
    one launch per step, on the backend the log line names (SYCL on an XPU); a wrapper put on
    ``do_mamba_copy_block`` first still calls vLLM's, which calls the routed one (wrappers);
  * where ``MambaSpecDecodeGPUContext`` stores raw ``data_ptr()`` values into int64 tables (0.22.1-0.28.0),
    runs that method with the tables standing behind a writer that stores the same 64 bits as int64
    (two's complement), so an XPU address (bit 63 set) no longer raises "Overflow when unpacking long long";
  * where ``MambaCopyBuffers`` asks for int64 pointer tables (0.22.1-0.23.0), hands it uint64 ones instead;
  * warns, naming file and line, about any raw ``data_ptr()`` store none of these changes covers;
  * with XPU_STATE_COPY_VALIDATE=1, records the state tensors ``collect_mamba_copy_meta`` sees and passes
    them to our batch_memcpy as bounds, so every copy is checked to stay inside vLLM's state pools.
  * where it recognises ``MambaSpecDecodeGPUContext``'s fused copies (run_fused_postprocess up to 0.33.0,
    run_fused_precopy / run_fused_postprocess_align from 0.25), their kernels and launches, serves them with
    mamba_spec_decode_postprocess_ / _precopy_ (vllm_spec_decode), so no address passes through Triton;
    where it does not, vLLM's kernels stay (with the address fix) and it warns, naming what it did not know;
    a context running FlashInfer ReplaySSM (0.34+) is handed to vLLM's own methods at each call;
  * where it recognises ``MambaSpecDecodeGPUContext.compute_aligned_state_indices`` (0.29+), computes those
    indices with torch gathers from the block tables themselves (vllm_aligned_indices).
Nothing of vLLM's code is replaced beyond those attributes; a layout it does not recognise is left alone.
"""
import functools
import inspect
import weakref

from .. import plugin_switch, validate
from ..pointers import as_signed
from .compat import MAMBA_UTILS, inspect_mamba_utils
from .aligned_indices import METHOD as ALIGNED_METHOD, replace_aligned_indices
from .kv_caches import layer_kv_cache
from .log import logger
from .spec_decode import ensure_recording_initialiser, replace_fused_copies

ENV_SWITCH = "XPU_STATE_COPY_VLLM"
VERIFIED = ("0.22.1", "0.34.0")  # the oldest and newest releases the release tests verified

_MARK = "__xpu_state_copy_patch__"  # set on everything we install, so a second register() adds nothing
_INT64_LIMIT = 1 << 63


def activation():
    """(active, why): XPU_STATE_COPY_VLLM wins; otherwise active exactly when torch sees an XPU."""
    return plugin_switch.activation(ENV_SWITCH)


class _TwosComplementTable:
    """Stands in for an int64 pointer table while vLLM fills it: ``table[i] = address`` stores the
    address's 64 bits as the int64 with the same bits, which is what the kernels reading it expect."""

    def __init__(self, table):
        self._table = table

    def __setitem__(self, index, value):
        if isinstance(value, int) and not isinstance(value, bool) and value >= _INT64_LIMIT:
            value = as_signed(value)
        self._table[index] = value

    def __getitem__(self, index):
        return self._table[index]

    def __len__(self):
        return len(self._table)

    def __getattr__(self, name):
        return getattr(self._table, name)


def _with_lossless_tables(method, table_names):
    @functools.wraps(method)
    def run_with_lossless_tables(self, *args, **kwargs):
        import torch

        swapped = {}
        for name in table_names:
            table = getattr(self, name, None)
            if isinstance(table, torch.Tensor) and table.dtype == torch.int64:
                swapped[name] = table
                setattr(self, name, _TwosComplementTable(table))
        try:
            return method(self, *args, **kwargs)
        finally:
            for name, table in swapped.items():
                setattr(self, name, table)

    setattr(run_with_lossless_tables, _MARK, True)
    return run_with_lossless_tables


def _with_uint64_pointer_tables(create):
    """MambaCopyBuffers.create, except that its int64 buffers (the src/dst pointer tables) are uint64."""

    @functools.wraps(create)
    def create_with_uint64_tables(cls, *args, **kwargs):
        import torch

        bound = inspect.signature(create).bind(cls, *args, **kwargs)
        make_buffer = bound.arguments.get("make_buffer")
        if make_buffer is None:  # not called the way vllm_compat checked: vLLM's own behaviour
            return create(*bound.args, **bound.kwargs)

        def make_pointer_buffer(*buffer_args, **buffer_kwargs):
            if buffer_kwargs.get("dtype") is torch.int64:
                buffer_kwargs["dtype"] = torch.uint64
            return make_buffer(*buffer_args, **buffer_kwargs)

        bound.arguments["make_buffer"] = make_pointer_buffer
        return create(*bound.args, **bound.kwargs)

    setattr(create_with_uint64_tables, _MARK, True)
    return classmethod(create_with_uint64_tables)


# Every state tensor vLLM's copy planner has handed over (validate mode only); weak, so pools that vLLM
# frees are forgotten. Once a forward context could not be read whole, the recorded tensors may miss a pool a
# copy rightly targets: from then on copies are validated without bounds (why in _unbounded, said once).
_state_bounds = weakref.WeakValueDictionary()
_unbounded = []


def _record_state_bounds(forward_context):
    """Remember the tensors of every layer's kv_cache; returns why some could not be read, or None."""
    if not isinstance(forward_context, dict):
        return f"its forward_context is a {type(forward_context).__name__}, not a dict of layers"
    unread = []
    for name, layer in forward_context.items():
        tensors, why = layer_kv_cache(layer)
        for state in tensors:
            _state_bounds[id(state)] = state
        if why:
            unread.append(f"layer {name}'s kv_cache {why}")
    return "; ".join(unread) or None


def _recording_state_bounds(collect):
    """collect_mamba_copy_meta, also remembering the state tensors of the layers in its forward_context. Its
    bookkeeping never raises into vLLM: what it cannot read turns the bounds check off, with one warning."""
    signature = inspect.signature(collect)

    @functools.wraps(collect)
    def collect_and_record(*args, **kwargs):
        try:
            why = _record_state_bounds(signature.bind_partial(*args, **kwargs).arguments.get("forward_context"))
        except Exception as error:  # not called as read: vLLM's call decides, unrecorded
            why = f"{type(error).__name__}: {error}"
        if why and not _unbounded:
            _unbounded.append(why)
            logger.warning("xpu_state_copy: validate mode cannot tell vLLM's state pools from collect_mamba_copy_meta "
                           "(%s); batch_memcpy still checks every batch for null, wrapping and overlapping entries, "
                           "but no longer that it stays inside the pools", why)
        return collect(*args, **kwargs)

    setattr(collect_and_record, _MARK, True)
    return collect_and_record


def _routed_batch_memcpy(vllm_batch_memcpy):
    from ..ops import batch_memcpy

    def batch_memcpy_via_xpu_state_copy(src_ptrs, dst_ptrs, sizes):
        """vLLM's batch_memcpy contract (same tables, memmove per entry), served by xpu_state_copy."""
        bounded = validate.requested() and len(_state_bounds) and not _unbounded
        batch_memcpy(src_ptrs, dst_ptrs, sizes, bounds=list(_state_bounds.values()) if bounded else None)

    batch_memcpy_via_xpu_state_copy.vllm_original = vllm_batch_memcpy
    setattr(batch_memcpy_via_xpu_state_copy, _MARK, True)
    return batch_memcpy_via_xpu_state_copy


ROUTE_BATCH_MEMCPY = "batch_memcpy -> xpu_state_copy.batch_memcpy"
FUSED_COPIES = "-> xpu_state_copy.mamba_spec_decode_* (no Triton address arithmetic)"
ALIGNED_INDICES = (f"MambaSpecDecodeGPUContext.{ALIGNED_METHOD} -> gathers from the block-table tensors "
                   "(no Triton address arithmetic)")
UINT64_COPY_TABLES = "MambaCopyBuffers src_ptrs/dst_ptrs built as uint64"
RECORD_STATE_BOUNDS = "collect_mamba_copy_meta records state tensors as copy bounds (XPU_STATE_COPY_VALIDATE=1)"


def serving_backend():
    """(what serves this process's copies, in words; True when nothing can): our backend for the device vLLM
    copies on here, the XPU when torch sees one, else a CUDA GPU, else the CPU (xpu_state_copy.backend)."""
    try:
        import torch

        from .. import BackendUnavailable, backend

        device = ("xpu" if hasattr(torch, "xpu") and torch.xpu.is_available()
                  else "cuda" if torch.cuda.is_available() else "cpu")
        try:
            return f"copies run on xpu_state_copy's {backend(device)} backend for {device}", False
        except BackendUnavailable as error:
            return f"no xpu_state_copy backend for {device} here, so its copies fail: {error}", True
    except Exception as error:  # the log line must not stop vLLM either
        return f"xpu_state_copy's backend unknown ({type(error).__name__}: {error})", True


def planned_changes(layout):
    """What patch_mamba_utils changes for this layout, one phrase each (empty: nothing)."""
    if layout.unrecognised:
        return []
    changes = [ROUTE_BATCH_MEMCPY] if layout.batch_memcpy_routable else []
    if layout.raw_pointer_tables:
        changes.append(f"MambaSpecDecodeGPUContext.{layout.pointer_writer} stores "
                       f"{', '.join(layout.raw_pointer_tables)} as two's complement int64")
    if layout.int64_copy_tables:
        changes.append(UINT64_COPY_TABLES)
    if layout.fused_copies:
        changes.append(f"MambaSpecDecodeGPUContext.{', '.join(layout.fused_copies)} {FUSED_COPIES}")
    if layout.aligned_index_table:
        changes.append(ALIGNED_INDICES)
    if layout.batch_memcpy_routable and validate.requested():
        changes.append(RECORD_STATE_BOUNDS)
    return changes


def _apply(module, layout, change):
    """Make one planned change; False when it is already in place."""
    if change == ROUTE_BATCH_MEMCPY:
        if getattr(module.batch_memcpy, _MARK, False):
            return False
        module.batch_memcpy = _routed_batch_memcpy(module.batch_memcpy)
    elif change == RECORD_STATE_BOUNDS:
        collect = getattr(module, "collect_mamba_copy_meta", None)
        if collect is None or "forward_context" not in inspect.signature(collect).parameters:
            raise LookupError("no collect_mamba_copy_meta(..., forward_context) to take the bounds from")
        if getattr(collect, _MARK, False):
            return False
        module.collect_mamba_copy_meta = _recording_state_bounds(collect)
    elif change.endswith(FUSED_COPIES):
        return bool(replace_fused_copies(module, layout.fused_copies, layout.fused_rows_by_slot))
    elif change == ALIGNED_INDICES:
        return replace_aligned_indices(module, layout.aligned_index_table, ensure_recording_initialiser)
    elif change == UINT64_COPY_TABLES:
        buffers = module.MambaCopyBuffers
        if getattr(buffers.create, _MARK, False):
            return False
        buffers.create = _with_uint64_pointer_tables(buffers.__dict__["create"].__func__)
    else:
        context = module.MambaSpecDecodeGPUContext
        if getattr(getattr(context, layout.pointer_writer), _MARK, False):
            return False
        method = context.__dict__[layout.pointer_writer]
        setattr(context, layout.pointer_writer, _with_lossless_tables(method, layout.raw_pointer_tables))
    return True


def patch_mamba_utils(module):
    """Apply the planned changes to an imported mamba_utils; returns those applied now. Never raises."""
    try:
        layout = inspect_mamba_utils(module)
        if layout.unrecognised:
            logger.warning("xpu_state_copy: vLLM %s has a mamba_utils layout this plugin does not recognise "
                           "(%s); patched nothing, vLLM's own kernels run (verified on vLLM %s - %s)",
                           layout.version, "; ".join(layout.unrecognised), *VERIFIED)
            return []
        if layout.uncovered_pointer_stores:
            logger.warning("xpu_state_copy: vLLM %s stores raw data_ptr() values into tables this plugin does "
                           "not make safe, where an XPU address (bit 63 set) can overflow or be misread: %s",
                           layout.version, "; ".join(layout.uncovered_pointer_stores))
        for wrapped in layout.wrapped:
            logger.warning("xpu_state_copy: vLLM %s's %s", layout.version, wrapped)
        for what, why in (("spec-decode copies stay on vLLM's Triton kernels (with the address fix where the "
                           "release needs it)", layout.fused_unrecognised),
                          (f"{ALIGNED_METHOD} stays on vLLM's Triton kernel (block tables read through their "
                           "addresses)", layout.aligned_unrecognised)):
            if why:
                logger.warning("xpu_state_copy: vLLM %s's %s; not recognised: %s", layout.version, what, "; ".join(why))
        applied, skipped = [], []
        for change in planned_changes(layout):
            try:
                if _apply(module, layout, change):
                    applied.append(change)
            except Exception as error:  # e.g. our compiled op missing: the other fixes still apply
                skipped.append(f"{change} skipped: {type(error).__name__}: {error}")
        if applied or skipped:
            serving, backend_missing = serving_backend()
            why = ["XPU device addresses have bit 63 set and overflow int64 pointer tables"] \
                if layout.has_unsafe_pointer_writes else []
            log = logger.warning if skipped or backend_missing else logger.info
            log("xpu_state_copy: patched vLLM %s: %s (%s; %s=0 disables)", layout.version,
                "; ".join(applied + skipped) or "nothing", "; ".join(why + [serving]), ENV_SWITCH)
        return applied
    except Exception as error:  # vLLM must start even if this plugin is wrong about it
        logger.warning("xpu_state_copy: could not patch vLLM's mamba_utils (%s: %s); patched nothing",
                       type(error).__name__, error)
        return []


def register():
    """Entry point of ``vllm.general_plugins``. Never raises: a failure is one warning and no patch."""
    plugin_switch.patch_when_imported("vLLM", activation, MAMBA_UTILS, patch_mamba_utils, logger)
    plugin_switch.build_kernels_when_imported(activation, MAMBA_UTILS, logger)
