"""The objects a running vLLM engine hands the plugin, which vLLM's own unit tests never build: a forward context
whose attention layers hold their KV cache as one tensor (next to Mamba layers holding a tuple of states, and
one laid over a Mamba pool's memory, as vLLM's hybrid allocator does), validate mode over such a context, a
do_mamba_copy_block or batch_memcpy wrapped by a profiler without __wrapped__, and the log line naming the
backend that serves. On the stand-ins of test_vllm_plugin_unit (the V1 copy path) and test_vllm_fused_recognition
(0.34's fused context); tests/vllm_releases runs the attention layers against the real releases."""
import functools
import logging
import weakref

import pytest
import torch

from test_vllm_fused_recognition import STAND_IN, _Layer, int32, patched_context
from test_vllm_plugin_unit import FIXED, UNSAFE, load
from xpu_state_copy import UnsafeBatch, backend, pointer_table
from xpu_state_copy.vllm import plugin as vllm_plugin, spec_decode
from xpu_state_copy.vllm.pointer_stores import source_tree

LOGGER = "vllm.xpu_state_copy"
PRECOPY = (2, int32(2, 5), int32(0, -1), int32(1, 0), int32(0, 1))  # request 0: column 0 -> 2, one token shift
# Like vLLM, the stand-in's context reads only its Mamba group's layers out of the forward context.
ENGINE_LIKE = STAND_IN.replace("for layer in forward_context.values() for state in layer.kv_cache",
                               "for name, layer in forward_context.items() if name.endswith('linear_attn') "
                               "for state in layer.kv_cache")


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


def engine_forward_context(conv, temporal):
    """An engine's forward context: an attention cache over the conv pool's memory with its block stride first,
    the Mamba layer's states as a tuple, an attention layer with a cache of its own, a layer with none."""
    over_conv = conv.as_strided((conv.shape[0], conv[0].numel()), (conv.stride(0), 1))
    return {"model.layers.0.self_attn": _Layer(over_conv), "model.layers.1.linear_attn": _Layer((conv, temporal)),
            "model.layers.2.self_attn": _Layer(torch.randn(8, 2, 4, 2)), "model.layers.3.mlp": _Layer(None)}


def test_attention_layers_holding_one_tensor_leave_the_spec_decode_copies_ours(tmp_path, caplog):
    module = load(tmp_path, ENGINE_LIKE, "engine_like_stand_in")
    assert vllm_plugin.patch_mamba_utils(module)
    conv, temporal = torch.randn(8, 4, 2), torch.randn(8, 3)
    context = module.MambaSpecDecodeGPUContext()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        context.initialize_from_forward_context(None, engine_forward_context(conv, temporal), None,
                                                [torch.arange(8, dtype=torch.int32).view(2, 4)])
        expected_conv, expected_temporal = conv.clone(), temporal.clone()
        expected_conv[2, :3] = conv[0, 1:]
        expected_temporal[2] = temporal[1]  # a whole state reads column src + bias
        context.run_fused_precopy(*PRECOPY)
    assert warnings_of(caplog) == []
    plan = context.__dict__["_xsc_plan"]
    assert plan.states[0] is conv and plan.states[1] is temporal  # not the attention view at conv's address
    assert module.precopy_mamba_align_fused_kernel.launches == []  # ours ran, not vLLM's kernel
    assert torch.equal(conv, expected_conv) and torch.equal(temporal, expected_temporal)


def test_a_table_handed_over_as_its_first_rows_is_read_whole_in_later_batches(tmp_path):
    """The engine initialises the context with block_table.gpu[:num_reqs] of its first step (often one
    request) and vLLM keeps only that view's address and row stride: a later batch's second request copies
    through row 1 of the persistent table, which the view does not cover."""
    module = load(tmp_path, ENGINE_LIKE, "first_rows_stand_in")
    assert vllm_plugin.patch_mamba_utils(module)
    conv, temporal = torch.randn(8, 4, 2), torch.randn(8, 3)
    persistent = torch.arange(8, dtype=torch.int32).view(2, 4)
    context = module.MambaSpecDecodeGPUContext()
    context.initialize_from_forward_context(None, engine_forward_context(conv, temporal), None, [persistent[:1]])
    expected_conv, expected_temporal = conv.clone(), temporal.clone()
    expected_conv[6, :3] = conv[4, 1:]  # request 1: column 0 -> 2 of row 1 (blocks 4 -> 6), one token shift
    expected_temporal[6] = temporal[5]
    context.run_fused_precopy(2, int32(1, 2), int32(-1, 0), int32(0, 1), int32(0, 1))
    assert module.precopy_mamba_align_fused_kernel.launches == []  # ours ran, not vLLM's kernel
    assert torch.equal(conv, expected_conv) and torch.equal(temporal, expected_temporal)


def test_planning_that_fails_is_no_plan_and_never_fails_vllms_initialiser(tmp_path, monkeypatch, caplog):
    module, context, conv, temporal = patched_context(tmp_path, "replanned_stand_in")

    def broken(*args):
        raise RuntimeError("planning broke")

    monkeypatch.setattr(spec_decode, "plan_context", broken)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        context.initialize_from_forward_context(None, {"layer.0": _Layer((conv, temporal))}, None,
                                                [torch.arange(8, dtype=torch.int32).view(2, 4)])
        context.run_fused_precopy(*PRECOPY)
    assert context.__dict__["_xsc_plan"] is None  # not the plan of the first initialisation
    assert len(module.precopy_mamba_align_fused_kernel.launches) == 1  # vLLM's kernel
    assert warnings_of(caplog) == ["xpu_state_copy: these stay on vLLM's kernels for this context: RuntimeError "
                                   "while planning: planning broke"]


def test_a_source_that_cannot_be_read_is_none_whatever_inspect_raises():
    def looped():
        pass

    looped.__wrapped__ = looped  # inspect.unwrap raises ValueError
    assert source_tree(looped) is None


@pytest.fixture
def fresh_bounds(monkeypatch):
    monkeypatch.setenv("XPU_STATE_COPY_VALIDATE", "1")
    monkeypatch.setattr(vllm_plugin, "_state_bounds", weakref.WeakValueDictionary())
    monkeypatch.setattr(vllm_plugin, "_unbounded", [], raising=False)  # raising: run on the code before, too


def test_validate_mode_reads_attention_layers_and_still_refuses_a_copy_outside_the_pools(tmp_path, fresh_bounds):
    module = load(tmp_path, UNSAFE, name="validated_engine_stand_in")
    assert vllm_plugin.RECORD_STATE_BOUNDS in vllm_plugin.patch_mamba_utils(module)
    conv, ssm = torch.randn(8, 4, 2), torch.randn(8, 3)
    module.collect_mamba_copy_meta(None, forward_context=engine_forward_context(conv, ssm))  # must not raise
    expected = ssm.clone()
    expected[3] = ssm[1]
    sizes = torch.tensor([ssm[0].nbytes], dtype=torch.int32)
    module.do_mamba_copy_block((pointer_table([ssm[1]]), pointer_table([ssm[3]]), sizes))
    assert torch.equal(ssm, expected)
    stray = torch.zeros(3)  # no layer's pool: a copy into it is refused before any byte moves
    with pytest.raises(UnsafeBatch, match=r"entry 0: destination range .* lies outside every bound tensor"):
        module.do_mamba_copy_block((pointer_table([ssm[1]]), pointer_table([stray]), sizes))
    assert int(stray.count_nonzero()) == 0


def test_validate_mode_never_raises_from_its_bookkeeping(tmp_path, fresh_bounds, caplog):
    """A kv_cache it cannot read: collect runs as vLLM's, one warning, copies checked without bounds (a pool it
    missed is no error) but still for overlaps."""
    module = load(tmp_path, UNSAFE, name="unreadable_engine_stand_in")
    vllm_plugin.patch_mamba_utils(module)
    ssm = torch.randn(8, 3)
    unreadable = {"model.layers.0.linear_attn": _Layer({"conv": ssm}), "model.layers.1.self_attn": _Layer(ssm)}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(2):
            module.collect_mamba_copy_meta(None, forward_context=unreadable)
        module.collect_mamba_copy_meta(None, "not a forward context")
    said = warnings_of(caplog)
    assert len(said) == 1 and "layer model.layers.0.linear_attn's kv_cache is a dict" in said[0], said
    missed = torch.randn(4, 3)  # a pool only the unreadable layer could have named
    expected = missed.clone()
    expected[2] = missed[0]
    sizes = torch.tensor([missed[0].nbytes], dtype=torch.int32)
    module.do_mamba_copy_block((pointer_table([missed[0]]), pointer_table([missed[2]]), sizes))
    assert torch.equal(missed, expected)
    with pytest.raises(UnsafeBatch, match="overlap"):
        module.do_mamba_copy_block((pointer_table([missed[0], missed[1]]), pointer_table([missed[2], missed[2]]),
                                    sizes.repeat(2)))


def timed(function, calls):
    """A profiler's wrapper, written without functools.wraps: no __wrapped__."""
    def timer(*args, **kwargs):
        calls.append(function.__name__)
        return function(*args, **kwargs)
    return timer


class CountingCall:
    """Another plugin's wrapper: a callable object holding the original as an attribute."""

    def __init__(self, function, calls):
        self.inner, self.calls = function, calls

    def __call__(self, *args):
        self.calls.append("counted")
        return self.inner(*args)


_REGISTRY = {}  # where the wrappers below find their originals, at call time: nothing in them leads there


def opaque(*args):
    return _REGISTRY["do_mamba_copy_block"](*args)


def opaque_copy(*args):
    _REGISTRY["copies"].append(args)
    return _REGISTRY["batch_memcpy"](*args)


def shift_copy(module):
    """do_mamba_copy_block of an overlapping left shift; True when our op made it (the stand-in's own
    batch_memcpy raises)."""
    state = torch.arange(64, dtype=torch.uint8)
    expected = state.clone()
    expected[0:30] = state[2:32]
    module.do_mamba_copy_block((pointer_table([state[2:]]), pointer_table([state]),
                                torch.tensor([30], dtype=torch.int32)))
    return torch.equal(state, expected)


@pytest.mark.parametrize("wrap", ["closure", "object", "functools.wraps"])
def test_a_wrapped_do_mamba_copy_block_still_copies_through_ours(tmp_path, caplog, wrap):
    module = load(tmp_path, UNSAFE, f"wrapped_{wrap.replace('.', '_')}_stand_in")
    calls, original = [], module.do_mamba_copy_block
    if wrap == "object":
        module.do_mamba_copy_block = CountingCall(original, calls)
    else:
        module.do_mamba_copy_block = timed(original, calls)
        if wrap == "functools.wraps":
            module.do_mamba_copy_block = functools.wraps(original)(module.do_mamba_copy_block)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert vllm_plugin.ROUTE_BATCH_MEMCPY in vllm_plugin.patch_mamba_utils(module)
    assert warnings_of(caplog) == []  # the wrapper leads to vLLM's function: nothing to warn about
    assert shift_copy(module) and len(calls) == 1


def test_a_wrapper_leading_nowhere_is_routed_all_the_same_and_named(tmp_path, caplog):
    module = load(tmp_path, UNSAFE, "opaque_stand_in")
    _REGISTRY.update(do_mamba_copy_block=module.do_mamba_copy_block, batch_memcpy=module.batch_memcpy, copies=[])
    module.do_mamba_copy_block, module.batch_memcpy = opaque, opaque_copy
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        applied = vllm_plugin.patch_mamba_utils(module)
    assert vllm_plugin.ROUTE_BATCH_MEMCPY in applied and len(applied) == 3  # every fix still applies
    said = warnings_of(caplog)
    assert not any("does not recognise" in message for message in said)
    assert len(said) == 2, said
    assert f"do_mamba_copy_block is replaced by {__name__}.opaque" in said[0] and "functools.wraps" in said[0]
    assert "its copies are ours as long as that wrapper calls vLLM's do_mamba_copy_block" in said[0]
    assert f"batch_memcpy is replaced by {__name__}.opaque_copy" in said[1] and "no longer runs" in said[1]
    assert shift_copy(module) and _REGISTRY["copies"] == []


@pytest.mark.parametrize("unsafe", [True, False], ids=["address-fix", "copies-only"])
def test_the_log_line_names_the_backend_that_serves(tmp_path, caplog, unsafe):
    module = load(tmp_path, UNSAFE if unsafe else FIXED, f"backend_{unsafe}_stand_in")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        vllm_plugin.patch_mamba_utils(module)
    line = next(r.getMessage() for r in caplog.records if "xpu_state_copy: patched vLLM" in r.getMessage())
    assert "SYCL launch" not in line
    assert f"copies run on xpu_state_copy's {backend('cpu')} backend for cpu" in line  # no XPU or CUDA here
    assert ("bit 63" in line) is unsafe and line.endswith("XPU_STATE_COPY_VLLM=0 disables)")


def test_the_log_line_says_when_no_backend_can_serve(monkeypatch):
    import xpu_state_copy

    def unavailable(device=None):
        raise xpu_state_copy.BackendUnavailable("xpu_state_copy was built without SYCL")

    monkeypatch.setattr(xpu_state_copy, "backend", unavailable)
    said, missing = vllm_plugin.serving_backend()
    assert missing and said == "no xpu_state_copy backend for cpu here, so its copies fail: " \
                               "xpu_state_copy was built without SYCL"
