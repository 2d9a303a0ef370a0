"""The vLLM plugin's logic on small stand-in modules written here (no vLLM needed).

The stand-ins mimic only the shapes the plugin looks for: a module-level batch_memcpy called by
do_mamba_copy_block, a context whose method stores ``x.data_ptr()`` into int64 tables, and a buffer factory
asking for int64 pointer tables. tests/vllm_releases/ runs the same plugin against real vLLM releases.
"""
import importlib.util
import logging
import sys
import textwrap

import pytest
import torch

from xpu_state_copy import as_unsigned, import_hook, pointer_table
from xpu_state_copy.vllm import plugin as vllm_plugin
from xpu_state_copy.vllm.compat import MAMBA_UTILS, inspect_mamba_utils

UNSAFE = '''
import torch

def batch_memcpy(src_ptrs, dst_ptrs, sizes):
    raise AssertionError("the stand-in's own copy must not run once the plugin routed it")

def do_mamba_copy_block(tables):
    batch_memcpy(*tables)

def collect_mamba_copy_meta(copy_bufs, forward_context):
    pass

class MambaCopyBuffers:
    def __init__(self, src_ptrs, dst_ptrs, sizes):
        self.src_ptrs, self.dst_ptrs, self.sizes = src_ptrs, dst_ptrs, sizes

    @classmethod
    def create(cls, n, make_buffer):
        return cls(src_ptrs=make_buffer(n, dtype=torch.int64), dst_ptrs=make_buffer(n, dtype=torch.int64),
                   sizes=make_buffer(n, dtype=torch.int32))

class MambaSpecDecodeGPUContext:
    def __init__(self):
        self.state_base_addrs = torch.zeros(2, dtype=torch.int64)
        self.block_table_ptrs = torch.zeros(1, dtype=torch.int64)

    def initialize_from_forward_context(self, states, block_table):
        for idx, state in enumerate(states):
            self.state_base_addrs[idx] = state.data_ptr()
        self.block_table_ptrs[0] = block_table.data_ptr()
'''
FIXED = UNSAFE.replace("= state.data_ptr()", "= signed(state.data_ptr())").replace(
    "= block_table.data_ptr()", "= signed(block_table.data_ptr())").replace("torch.int64)", "torch.uint64)") \
    + "\ndef signed(v):\n    return v - (1 << 64) if v >= 1 << 63 else v\n"
UNRECOGNISED = UNSAFE.replace("def batch_memcpy(src_ptrs, dst_ptrs, sizes):", "def batch_memcpy(pairs):")
OVERFLOW = "Overflow when unpacking long long"


class HighAddressTensor(torch.Tensor):
    """Reports its address with bit 63 set, as an XPU allocation does; only ever stored, never copied."""

    def data_ptr(self):
        return torch.Tensor.data_ptr(self) + (1 << 63)


def load(tmp_path, source, name="stand_in_mamba_utils"):
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def high_inputs():
    states = [torch.zeros(4, 8).as_subclass(HighAddressTensor) for _ in range(2)]
    return states, torch.zeros(2, 4, dtype=torch.int32).as_subclass(HighAddressTensor)


def test_layout_of_an_unsafe_release(tmp_path):
    layout = inspect_mamba_utils(load(tmp_path, UNSAFE), version="x")
    assert layout.unrecognised == [] and layout.batch_memcpy_routable
    assert layout.pointer_writer == "initialize_from_forward_context"
    assert layout.raw_pointer_tables == ("state_base_addrs", "block_table_ptrs")
    assert layout.int64_copy_tables and layout.has_unsafe_pointer_writes


def test_a_fixed_release_only_gets_the_copy_routed(tmp_path):
    module = load(tmp_path, FIXED)
    writer = module.MambaSpecDecodeGPUContext.initialize_from_forward_context
    assert not inspect_mamba_utils(module).has_unsafe_pointer_writes
    assert vllm_plugin.patch_mamba_utils(module) == [vllm_plugin.ROUTE_BATCH_MEMCPY]
    assert module.MambaSpecDecodeGPUContext.initialize_from_forward_context is writer


def test_unrecognised_layout_patches_nothing_and_warns(tmp_path, caplog):
    module = load(tmp_path, UNRECOGNISED)
    original = module.batch_memcpy
    with caplog.at_level(logging.WARNING, logger="vllm.xpu_state_copy"):
        assert vllm_plugin.patch_mamba_utils(module) == []
    assert module.batch_memcpy is original
    assert any("does not recognise" in record.getMessage() for record in caplog.records)


def test_unpatched_stand_in_overflows_like_the_report(tmp_path):
    module = load(tmp_path, UNSAFE)
    with pytest.raises(ValueError, match=OVERFLOW):
        module.MambaSpecDecodeGPUContext().initialize_from_forward_context(*high_inputs())


def test_patched_context_stores_the_exact_bits(tmp_path, caplog):
    module = load(tmp_path, UNSAFE)
    with caplog.at_level(logging.INFO, logger="vllm.xpu_state_copy"):
        applied = vllm_plugin.patch_mamba_utils(module)
    assert len(applied) == 3
    assert [r.getMessage() for r in caplog.records if "patched" in r.getMessage()][0].count("bit 63") == 1
    context = module.MambaSpecDecodeGPUContext()
    states, block_table = high_inputs()
    context.initialize_from_forward_context(states, block_table)
    assert [as_unsigned(v) for v in context.state_base_addrs.tolist()] == [s.data_ptr() for s in states]
    assert as_unsigned(context.block_table_ptrs.item()) == block_table.data_ptr()
    assert isinstance(context.state_base_addrs, torch.Tensor)  # the stand-in table is gone afterwards
    assert vllm_plugin.patch_mamba_utils(module) == []  # idempotent


def test_patched_copy_buffers_are_uint64_and_copies_run_through_our_op(tmp_path):
    module = load(tmp_path, UNSAFE)
    vllm_plugin.patch_mamba_utils(module)
    buffers = module.MambaCopyBuffers.create(4, lambda n, dtype: torch.zeros(n, dtype=dtype))
    assert (buffers.src_ptrs.dtype, buffers.dst_ptrs.dtype, buffers.sizes.dtype) == \
           (torch.uint64, torch.uint64, torch.int32)
    state = torch.arange(64, dtype=torch.uint8)
    expected = state.clone()
    expected[0:30] = state[2:32]  # an overlapping left shift, as a conv state's token shift is
    module.do_mamba_copy_block((pointer_table([state[2:]]), pointer_table([state]),
                                torch.tensor([30], dtype=torch.int32)))
    assert torch.equal(state, expected)


@pytest.mark.parametrize("value, active", [("0", False), ("1", True), ("off", False), ("yes", True)])
def test_switch_variable_decides(monkeypatch, value, active):
    monkeypatch.setenv(vllm_plugin.ENV_SWITCH, value)
    assert vllm_plugin.activation()[0] is active


def test_register_never_raises(monkeypatch, caplog):
    def broken():
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(vllm_plugin, "activation", broken)
    with caplog.at_level(logging.WARNING, logger="vllm.xpu_state_copy"):
        assert vllm_plugin.register() is None
    assert any("driver exploded" in record.getMessage() for record in caplog.records)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="a real vLLM is installed here")
def test_register_patches_mamba_utils_when_it_is_imported_later(tmp_path, monkeypatch,
                                                                meta_path_without_hooks):
    package = tmp_path / "vllm" / "v1" / "worker"
    package.mkdir(parents=True)
    for directory in (tmp_path / "vllm", tmp_path / "vllm" / "v1", package):
        (directory / "__init__.py").write_text("")
    (package / "mamba_utils.py").write_text(textwrap.dedent(UNSAFE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(vllm_plugin.ENV_SWITCH, "1")
    for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    vllm_plugin.register()
    vllm_plugin.register()  # vLLM may load plugins more than once: one hook only
    assert sum(isinstance(f, import_hook.AfterImport) for f in sys.meta_path) == 1
    try:
        module = importlib.import_module(MAMBA_UTILS)
        assert getattr(module.batch_memcpy, "__xpu_state_copy_patch__", False)
        states, block_table = high_inputs()
        module.MambaSpecDecodeGPUContext().initialize_from_forward_context(states, block_table)
    finally:
        for name in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
            del sys.modules[name]


class _Layer:
    def __init__(self, kv_cache):
        self.kv_cache = kv_cache


def test_validate_mode_checks_copies_against_the_recorded_state_pools(tmp_path, monkeypatch):
    """XPU_STATE_COPY_VALIDATE=1: the states collect_mamba_copy_meta sees become bounds of every copy."""
    monkeypatch.setenv("XPU_STATE_COPY_VALIDATE", "1")
    module = load(tmp_path, UNSAFE, name="stand_in_validated")
    assert vllm_plugin.RECORD_STATE_BOUNDS in vllm_plugin.patch_mamba_utils(module)
    conv, ssm = torch.randn(4, 48), torch.randn(4, 64)
    module.collect_mamba_copy_meta(None, forward_context={"layer.0": _Layer([conv, ssm])})
    expected = ssm.clone()
    expected[3] = ssm[1]
    sizes = torch.tensor([ssm[0].nbytes], dtype=torch.int32)
    module.do_mamba_copy_block((pointer_table([ssm[1]]), pointer_table([ssm[3]]), sizes))
    assert torch.equal(ssm, expected)
    stray = torch.zeros(64)  # not a state pool: a copy into it is refused before any byte moves
    with pytest.raises(ValueError, match=r"entry 0: destination range .* lies outside every bound tensor"):
        module.do_mamba_copy_block((pointer_table([ssm[1]]), pointer_table([stray]), sizes))
    assert int(stray.count_nonzero()) == 0


# The same unsafe store, formatted the ways a formatter or a person may write it.
SPLIT_STORE = UNSAFE.replace("self.state_base_addrs[idx] = state.data_ptr()",
                             "self.state_base_addrs[\n                idx\n            ] = (\n"
                             "                state.data_ptr()\n            )")
ALIASED_STORE = UNSAFE.replace("self.state_base_addrs[idx] = state.data_ptr()",
                               "address = state.data_ptr()\n            self.state_base_addrs[idx] = address")
# A raw store in a method the patch does not wrap (its table never stands behind the two's-complement writer).
STRAY_STORE = UNSAFE + '''
    def refresh(self, state):
        self.state_base_addrs[0] = state.data_ptr() + 0
'''


@pytest.mark.parametrize("source", [SPLIT_STORE, ALIASED_STORE], ids=["split", "aliased"])
def test_a_store_split_over_lines_or_aliased_is_found_and_fixed(tmp_path, source):
    module = load(tmp_path, source)
    layout = inspect_mamba_utils(module, version="x")
    assert layout.raw_pointer_tables == ("state_base_addrs", "block_table_ptrs")
    assert layout.uncovered_pointer_stores == []
    vllm_plugin.patch_mamba_utils(module)
    context = module.MambaSpecDecodeGPUContext()
    states, block_table = high_inputs()
    context.initialize_from_forward_context(states, block_table)
    assert [as_unsigned(v) for v in context.state_base_addrs.tolist()] == [s.data_ptr() for s in states]


def test_a_store_the_patch_does_not_cover_is_reported_with_file_and_line(tmp_path, caplog):
    module = load(tmp_path, STRAY_STORE)
    layout = inspect_mamba_utils(module, version="x")
    line = STRAY_STORE.splitlines().index("        self.state_base_addrs[0] = state.data_ptr() + 0") + 1
    assert layout.uncovered_pointer_stores == [
        f"{module.__file__}:{line} (MambaSpecDecodeGPUContext.refresh: self.state_base_addrs[...] = <data_ptr()>)"]
    assert layout.has_unsafe_pointer_writes
    with caplog.at_level(logging.WARNING, logger="vllm.xpu_state_copy"):
        vllm_plugin.patch_mamba_utils(module)
    warnings = [r.getMessage() for r in caplog.records if "does not make safe" in r.getMessage()]
    assert len(warnings) == 1 and f"{module.__file__}:{line}" in warnings[0]


def test_converted_stores_and_int64_copy_tables(tmp_path):
    fixed = inspect_mamba_utils(load(tmp_path, FIXED, "fixed"), version="x")
    assert fixed.raw_pointer_tables == () and fixed.uncovered_pointer_stores == []
    # A raw store into the copy planner's tables is safe only while they are (or are made) uint64.
    planner = "\ndef collect_mamba_copy_meta(copy_bufs, forward_context):\n" \
              "    table = copy_bufs.dst_ptrs.np\n    table[0] = forward_context.data_ptr()\n"
    covered = UNSAFE.replace("def collect_mamba_copy_meta(copy_bufs, forward_context):\n    pass\n", "") + planner
    assert inspect_mamba_utils(load(tmp_path, covered, "covered"), "x").uncovered_pointer_stores == []
    uncovered = covered.replace("torch.int64), dst_ptrs", "torch.float64), dst_ptrs").replace(
        "dst_ptrs=make_buffer(n, dtype=torch.int64)", "dst_ptrs=make_buffer(n, dtype=torch.float64)")
    layout = inspect_mamba_utils(load(tmp_path, uncovered, "uncovered"), "x")
    assert [where.split(" ", 1)[1] for where in layout.uncovered_pointer_stores] == [
        "(collect_mamba_copy_meta: table[...] = <data_ptr()>)"]


def test_store_finder_on_its_own():
    from xpu_state_copy.vllm.pointer_stores import find_pointer_stores

    source = '''
    class A:
        def f(self, t, x):
            self.tab[1] = (x
                .data_ptr())
            t[0], y = x.data_ptr(), 1
            self.tab[2] = convert(x.data_ptr())
            z = x.data_ptr()
            z = 3
            self.tab[3] = z
            self.tab[4]: int = -x.data_ptr() if t else 0
    '''
    stores = find_pointer_stores(source, "m.py", first_line=10)
    assert [(s.function, s.table, s.self_attribute, s.line) for s in stores] == [
        ("A.f", "self.tab", "tab", 13), ("A.f", "t", None, 15), ("A.f", "self.tab", "tab", 20)]


# A context with a fused copy whose parameters the plugin does not know: vLLM's method must stay, and the
# warning must say what was not recognised.
ODD_FUSED = UNSAFE + '''
    def run_fused_postprocess(self, num_reqs, everything_else):
        return "vllm's own"
'''


def test_unrecognised_fused_copies_stay_on_vllms_kernel_and_warn(tmp_path, caplog):
    module = load(tmp_path, ODD_FUSED)
    original = module.MambaSpecDecodeGPUContext.run_fused_postprocess
    layout = inspect_mamba_utils(module, version="x")
    assert layout.fused_copies == () and any("run_fused_postprocess takes" in w for w in layout.fused_unrecognised)
    with caplog.at_level(logging.WARNING, logger="vllm.xpu_state_copy"):
        applied = vllm_plugin.patch_mamba_utils(module)
    assert len(applied) == 3  # the other fixes still apply
    assert module.MambaSpecDecodeGPUContext.run_fused_postprocess is original
    assert any("stay on vLLM's Triton kernels" in r.getMessage() and "run_fused_postprocess takes" in r.getMessage()
               for r in caplog.records)


def test_block_table_row_is_read_from_the_kernel_source():
    from xpu_state_copy.vllm.spec_decode import table_row_by_slot

    def by_batch_row(state_idx, batch_idx, req_idx, HAS_IDX_MAPPING):
        bt_row_idx = batch_idx if HAS_IDX_MAPPING else req_idx
        _copy_mamba_state_block(state_idx, bt_row_idx, 0)  # noqa: F821

    def by_slot(state_idx, batch_idx, req_idx):
        batch_idx = state_idx
        _copy_mamba_state_block(state_idx, req_idx, 0)  # noqa: F821

    def single_kernel(req_idx, base, block_table_stride_req):
        return base + req_idx * block_table_stride_req

    def unknown(state_idx, row):
        _copy_mamba_state_block(state_idx, row + 1, 0)  # noqa: F821

    assert table_row_by_slot(by_batch_row) is False
    assert table_row_by_slot(by_slot) is True
    assert table_row_by_slot(single_kernel) is True
    assert table_row_by_slot(unknown) is None
