"""What the installed vLLM's Mamba state-copy code looks like, and so what the plugin must change.

vLLM's ``vllm.v1.worker.mamba_utils`` moved a lot between releases. Rather than trusting a version table,
the plugin reads the module's own source to find:
  * the module-level ``batch_memcpy(src_ptrs, dst_ptrs, sizes)`` that ``do_mamba_copy_block`` calls;
  * in ``MambaSpecDecodeGPUContext``, the method that stores ``x.data_ptr()`` straight into an int64 table
    (``self.<table>[i] = x.data_ptr()``: 0.23.0-0.28.0); an XPU address (bit 63 set) overflows there;
  * whether ``MambaCopyBuffers.create`` asks for int64 pointer tables (0.23.0), whose numpy view overflows
    the same way.
Releases that wrap the value first (0.29.0+) do not match the pattern and are left alone.
"""
import dataclasses
import importlib.metadata
import inspect
import re
from typing import Optional

MAMBA_UTILS = "vllm.v1.worker.mamba_utils"
# Where vLLM's fused spec-decode context fills its tables; older releases do it directly in the public
# method, newer ones in a helper it calls. The first one found that writes raw pointers is patched.
POINTER_WRITERS = ("_populate_metadata", "initialize_from_forward_context")

# `self.<table>[<index>] = <name>.data_ptr()` with nothing converting the value in between.
_RAW_POINTER_WRITE = re.compile(r"self\.(\w+)\[[^\]\n]+\]\s*=\s*[\w.]+\.data_ptr\(\)\s*$", re.MULTILINE)
# `src_ptrs=make_buffer(..., dtype=torch.int64)` (and dst_ptrs) inside MambaCopyBuffers.create.
_INT64_COPY_TABLE = re.compile(r"\b(src_ptrs|dst_ptrs)\s*=\s*make_buffer\([^)]*torch\.int64")
_BATCH_MEMCPY_PARAMS = ["src_ptrs", "dst_ptrs", "sizes"]


@dataclasses.dataclass
class VllmLayout:
    """The facts about one installed vLLM that decide what the plugin does."""

    version: Optional[str]
    batch_memcpy_routable: bool = False
    pointer_writer: Optional[str] = None  # method name holding raw data_ptr() writes, if any
    raw_pointer_tables: tuple = ()  # the int64 tables those writes fill
    int64_copy_tables: bool = False  # MambaCopyBuffers src_ptrs/dst_ptrs built as int64
    unrecognised: list = dataclasses.field(default_factory=list)  # why the layout is not understood

    @property
    def has_unsafe_pointer_writes(self) -> bool:
        return bool(self.raw_pointer_tables) or self.int64_copy_tables

    def as_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["raw_pointer_tables"] = list(self.raw_pointer_tables)
        out["has_unsafe_pointer_writes"] = self.has_unsafe_pointer_writes
        return out


def installed_vllm_version() -> Optional[str]:
    """The vLLM distribution's version, read from its metadata without importing vLLM."""
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None


def _source(obj) -> Optional[str]:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return None


def _own_function(cls, name):
    """`cls.name` as defined on the class itself (not inherited), unwrapped of any earlier plugin wrapper."""
    function = cls.__dict__.get(name)
    if isinstance(function, (classmethod, staticmethod)):
        function = function.__func__
    return inspect.unwrap(function) if function is not None else None


def _inspect_batch_memcpy(module, layout: VllmLayout) -> None:
    function = inspect.unwrap(getattr(module, "batch_memcpy", None) or (lambda: None))
    copy_block = getattr(module, "do_mamba_copy_block", None)
    if getattr(module, "batch_memcpy", None) is None or copy_block is None:
        layout.unrecognised.append("no module-level batch_memcpy / do_mamba_copy_block")
        return
    try:
        params = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        params = None
    if params != _BATCH_MEMCPY_PARAMS:
        layout.unrecognised.append(f"batch_memcpy takes {params}, expected {_BATCH_MEMCPY_PARAMS}")
        return
    copy_block_source = _source(copy_block)
    if copy_block_source is None or "batch_memcpy(" not in copy_block_source:
        layout.unrecognised.append("do_mamba_copy_block does not call batch_memcpy")
        return
    layout.batch_memcpy_routable = True


def _inspect_spec_decode_context(module, layout: VllmLayout) -> None:
    context = getattr(module, "MambaSpecDecodeGPUContext", None)
    if context is None:
        return  # releases without the fused spec-decode path have nothing to fix here
    for name in POINTER_WRITERS:
        function = _own_function(context, name)
        if function is None:
            continue
        source = _source(function)
        if source is None:
            layout.unrecognised.append(f"cannot read the source of MambaSpecDecodeGPUContext.{name}")
            return
        tables = tuple(dict.fromkeys(_RAW_POINTER_WRITE.findall(source)))
        if tables:
            layout.pointer_writer, layout.raw_pointer_tables = name, tables
            return
    if not any(_own_function(context, name) for name in POINTER_WRITERS):
        layout.unrecognised.append("MambaSpecDecodeGPUContext has none of " + ", ".join(POINTER_WRITERS))


def _inspect_copy_buffers(module, layout: VllmLayout) -> None:
    buffers = getattr(module, "MambaCopyBuffers", None)
    create = _own_function(buffers, "create") if buffers is not None else None
    if create is None:
        return
    source = _source(create)
    if source is None:
        layout.unrecognised.append("cannot read the source of MambaCopyBuffers.create")
        return
    layout.int64_copy_tables = bool(_INT64_COPY_TABLE.search(source))
    if layout.int64_copy_tables and "make_buffer" not in inspect.signature(create).parameters:
        layout.unrecognised.append("MambaCopyBuffers.create has no make_buffer parameter")


def inspect_mamba_utils(module, version: Optional[str] = None) -> VllmLayout:
    """Read an imported ``vllm.v1.worker.mamba_utils`` and say what in it needs changing."""
    layout = VllmLayout(version=version if version is not None else installed_vllm_version())
    _inspect_batch_memcpy(module, layout)
    _inspect_spec_decode_context(module, layout)
    _inspect_copy_buffers(module, layout)
    return layout
