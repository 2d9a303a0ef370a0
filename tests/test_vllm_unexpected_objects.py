"""Objects vLLM accepts that the plugin's ops do not: the plugin hands them to vLLM's own code, with one
warning naming what it did not recognise, and never raises where vLLM would not. On the 0.34-shaped stand-in
of test_vllm_fused_recognition (its kernels record their launches instead of copying): stand-in states and
block tables (vLLM's own tests build contexts from such objects), wrong dtypes, a context with no Mamba
state, a context initialised twice, and per-call inputs our op does not take."""
import logging
import random
import types

import torch

from test_vllm_aligned_indices import make_context
from test_vllm_fused_recognition import STAND_IN, _Layer, int32, patched_context
from test_vllm_plugin_unit import load
from xpu_state_copy import as_signed
from xpu_state_copy.vllm import aligned_indices as aligned
from xpu_state_copy.vllm import plugin as vllm_plugin

LOGGER = "vllm.xpu_state_copy"
PRECOPY = (2, int32(2, 5), int32(0, -1), int32(1, 0), int32(0, 1))  # request 0: column 0 -> 2, one token shift


class DataPtrOnly:
    """Like the stand-in vLLM's tests wrap states in: a tensor's shape, strides and sizes and an address of
    its own choosing, but no dtype or device, and not a torch.Tensor."""

    def __init__(self, tensor, address):
        self._tensor, self._address, self.shape = tensor, address, tensor.shape

    def data_ptr(self):
        return self._address

    def __getattr__(self, name):  # dim, stride, size, numel, element_size
        if name in ("dim", "stride", "size", "numel", "element_size"):
            return getattr(self._tensor, name)
        raise AttributeError(name)

    def __getitem__(self, item):
        return self._tensor[item]


def patched_module(tmp_path, name):
    module = load(tmp_path, STAND_IN, name)
    assert vllm_plugin.patch_mamba_utils(module)
    return module


def pools():
    return torch.randn(8, 4, 2), torch.randn(8, 3)


def warnings_of(caplog):
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]


def test_stand_in_states_and_tables_go_to_vllms_kernels(tmp_path, caplog):
    module = patched_module(tmp_path, "data_ptr_only_stand_in")
    conv, temporal = pools()
    high = 1 << 63  # an XPU-like address: nothing may read through it
    layer = _Layer([DataPtrOnly(conv, high), DataPtrOnly(temporal, high + 4096)])
    table = DataPtrOnly(torch.zeros(2, 4, dtype=torch.int32), high + 8192)
    context = module.MambaSpecDecodeGPUContext()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        context.initialize_from_forward_context(None, {"layer.0": layer}, None, [table])  # must not raise
        context.run_fused_precopy(*PRECOPY)
    assert context.is_initialized and context.__dict__["_xsc_plan"] is None
    assert len(module.precopy_mamba_align_fused_kernel.launches) == 1  # vLLM's kernel, not our op
    said = warnings_of(caplog)
    assert len(said) == 1 and "layer layer.0's kv_cache holds a DataPtrOnly, not a torch.Tensor" in said[0], said


def test_a_block_table_of_another_dtype_goes_to_vllms_kernels(tmp_path, caplog):
    module = patched_module(tmp_path, "int64_table_stand_in")
    conv, temporal = pools()
    context = module.MambaSpecDecodeGPUContext()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        context.initialize_from_forward_context(None, {"layer.0": _Layer([conv, temporal])}, None,
                                                [torch.zeros(2, 4, dtype=torch.int64)])
        context.run_fused_precopy(*PRECOPY)
    assert context.__dict__["_xsc_plan"] is None
    assert len(module.precopy_mamba_align_fused_kernel.launches) == 1
    said = warnings_of(caplog)
    assert len(said) == 1 and "block table 0 (torch.int64" in said[0] and "not an int32" in said[0], said


def test_a_context_without_mamba_states_goes_to_vllms_kernels(tmp_path, caplog):
    module = patched_module(tmp_path, "no_states_stand_in")
    context = module.MambaSpecDecodeGPUContext()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        context.initialize_from_forward_context(None, {}, None, [torch.zeros(2, 4, dtype=torch.int32)])
        context.run_fused_precopy(*PRECOPY)
    assert context.__dict__["_xsc_plan"] is None
    assert len(module.precopy_mamba_align_fused_kernel.launches) == 1
    assert any("vLLM stored no Mamba states" in message for message in warnings_of(caplog))


def test_a_context_initialised_again_copies_in_its_new_pools(tmp_path):
    module, context, first_conv, first_temporal = patched_context(tmp_path, "twice_stand_in")
    conv, temporal = pools()
    table = torch.arange(8, dtype=torch.int32).view(2, 4)
    context.initialize_from_forward_context(None, {"layer.0": _Layer([conv, temporal])}, None, [table])
    before = [first_conv.clone(), first_temporal.clone()]
    expected_conv, expected_temporal = conv.clone(), temporal.clone()
    expected_conv[2, :3] = conv[0, 1:]
    expected_temporal[2] = temporal[1]  # a whole state reads column src + bias
    context.run_fused_precopy(*PRECOPY)
    assert module.precopy_mamba_align_fused_kernel.launches == []  # ours ran
    assert torch.equal(conv, expected_conv) and torch.equal(temporal, expected_temporal)
    assert torch.equal(first_conv, before[0]) and torch.equal(first_temporal, before[1])  # the old pools rest


def test_inputs_our_op_does_not_take_go_to_vllms_kernel_with_one_warning(tmp_path, caplog):
    module, context, conv, _ = patched_context(tmp_path, "inputs_stand_in")
    before = conv.clone()
    as_int64 = (2, int32(2, 5).long(), int32(0, -1).long(), int32(1, 0).long(), int32(0, 1).long())
    as_lists = (2, [2, 5], [0, -1], [1, 0], [0, 1])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for inputs in (as_int64, as_int64, as_lists):
            context.run_fused_precopy(*inputs)
    assert len(module.precopy_mamba_align_fused_kernel.launches) == 3 and torch.equal(conv, before)
    said = warnings_of(caplog)
    assert len(said) == 2, said  # once per reason, not once per call
    assert "state_idx_gpu (torch.int64" in said[0] and "state_idx_gpu is a list, not a torch.Tensor" in said[1]


def test_stand_in_block_tables_give_no_aligned_plan_and_no_error():
    context, tables, _ = make_context(random.Random(3), 2, 8, 2, 4)
    fakes = [DataPtrOnly(t, t.data_ptr()) for t in tables]
    plan = aligned.build_aligned_plan(context, {"block_tables": fakes}, "block_table_ptrs")
    assert plan == "block table 0 is a DataPtrOnly, not a torch.Tensor"
    wrong = [t.long() for t in tables]
    context.block_table_ptrs = torch.tensor([as_signed(t.data_ptr()) for t in wrong], dtype=torch.int64)
    plan = aligned.build_aligned_plan(context, {"block_tables": wrong}, "block_table_ptrs")
    assert isinstance(plan, str) and "is not an int32 row-major table" in plan


def test_an_aligned_output_buffer_replaced_after_planning_goes_to_vllms_method():
    context, _, _ = make_context(random.Random(4), 1, 8, 2, 4)
    context.aligned_state_indices = torch.zeros(1, 4, 2, dtype=torch.int32)  # not the buffer it was planned for
    method = aligned.ours(lambda self, seq_lens, num_reqs: "vllm's own")
    assert method(context, torch.ones(8, dtype=torch.int32), 2) == "vllm's own"
    context.aligned_state_indices = types.SimpleNamespace(shape=(1, 8, 2))  # not even a tensor
    assert method(context, torch.ones(8, dtype=torch.int32), 2) == "vllm's own"
