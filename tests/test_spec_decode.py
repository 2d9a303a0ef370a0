"""mamba_spec_decode_postprocess_ / mamba_spec_decode_precopy_ against the plain PyTorch reference
(spec_decode_reference.py) on random vLLM-shaped scenarios, on every target: every byte of every pool and
every accepted-token count compared, outputs poisoned first."""
import copy
import random

import pytest
import torch

import xpu_state_copy
from conftest import synchronize
from spec_decode_reference import Scenario, random_postprocess, random_precopy

POISON = -7


def to_device(s: Scenario, device) -> Scenario:
    moved = copy.copy(s)
    for field in ("num_accepted", "state_idx", "num_computed", "num_scheduled", "num_draft", "dst_cols",
                  "src_cols", "token_bias", "idx_mapping"):
        value = getattr(s, field)
        setattr(moved, field, None if value is None else value.to(device))
    moved.states = [_clone_keeping_strides(t, device) for t in s.states]
    moved.block_tables = [t.to(device) for t in s.block_tables]
    return moved


def _clone_keeping_strides(t, device):
    """A copy on `device` with the same sizes, strides and storage bytes (a padded pool stays padded)."""
    whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
    return whole.clone().to(device).as_strided(t.shape, t.stride(), t.storage_offset())


def storage_bytes(t):
    """The whole storage under `t` as a host uint8 tensor (a Python bytes object would cost seconds per MiB)."""
    return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage().cpu())


def run_postprocess(s: Scenario, counts_out, copy_rest=True):
    xpu_state_copy.mamba_spec_decode_postprocess_(
        s.states, s.kinds, s.groups, s.block_tables, s.block_size, s.num_rows, s.num_accepted, s.state_idx,
        s.num_computed, counts_out, num_scheduled=s.num_scheduled, num_draft=s.num_draft,
        idx_mapping=s.idx_mapping, block_table_by_slot=s.block_table_by_slot, copy_unchanged_counts=copy_rest)


def run_precopy(s: Scenario):
    xpu_state_copy.mamba_spec_decode_precopy_(s.states, s.kinds, s.groups, s.block_tables, s.num_rows, s.dst_cols,
                                              s.src_cols, s.token_bias, idx_mapping=s.idx_mapping,
                                              block_table_by_slot=s.block_table_by_slot)


def assert_same_pools(ours, expected):
    """Every byte of every pool's storage, padding included."""
    for j, (a, b) in enumerate(zip(ours, expected)):
        got, want = storage_bytes(a), storage_bytes(b)
        assert got.numel() == want.numel(), f"states[{j}]: {got.numel()} bytes against {want.numel()}"
        bad = (got != want).nonzero().flatten()
        assert bad.numel() == 0, f"states[{j}]: {bad.numel()} bytes differ, first at byte {bad[0].item()}"


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("layout", ["sd", "ds"])
def test_postprocess_matches_reference(target, seed, layout):
    rng = random.Random(seed * 7 + (layout == "ds"))
    variant = seed % 3  # plain counts, precomputed counts, precomputed with idx_mapping
    s = random_postprocess(rng, layout, precomputed=variant > 0, mapped=variant == 2,
                           max_requests=64 if target.name == "cpu" else 24)
    copy_rest = variant == 0
    ours = to_device(s, target.device)
    counts = torch.full((s.num_accepted.numel() + 2,), POISON, dtype=torch.int32)
    ours_counts = counts.to(target.device)
    run_postprocess(ours, ours_counts, copy_rest)
    synchronize(target.device)
    s.reference(precopy=False, counts_out=counts, copy_rest=copy_rest)
    assert_same_pools(ours.states, s.states)
    assert torch.equal(ours_counts.cpu(), counts)


def _check_postprocess(target, s):
    """Our postprocess of `s` on the target against the reference: every pool byte and every count."""
    ours = to_device(s, target.device)
    counts = torch.full((s.num_accepted.numel(),), POISON, dtype=torch.int32)
    ours_counts = counts.to(target.device)
    run_postprocess(ours, ours_counts)
    synchronize(target.device)
    s.reference(precopy=False, counts_out=counts)
    assert_same_pools(ours.states, s.states)
    assert torch.equal(ours_counts.cpu(), counts)


def _check_precopy(target, s):
    """Our precopy of `s` on the target against the reference: every pool byte."""
    ours = to_device(s, target.device)
    run_precopy(ours)
    synchronize(target.device)
    s.reference(precopy=True)
    assert_same_pools(ours.states, s.states)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("step", ["postprocess", "precopy"])
def test_larger_steps_match_reference(target, seed, step):
    """24 - 40 requests x 12 - 20 layers (576 - 1,600 entries) on 1 - 4 block tables: more rows than one
    sub-group reads at a time (the row schedule takes them sg_size() at a time), which the randomized steps
    above, small batches all, never have."""
    rng = random.Random(500 + seed)
    layout = "ds" if seed % 2 else "sd"
    sizes = dict(requests=rng.randint(24, 40), layers=rng.randint(12, 20), groups=rng.randint(1, 4))
    if step == "postprocess":
        _check_postprocess(target, random_postprocess(rng, layout, precomputed=seed >= 2, mapped=seed >= 2, **sizes))
    else:
        _check_precopy(target, random_precopy(rng, layout, mapped=seed >= 2, **sizes))


@pytest.mark.parametrize("layout", ["sd", "ds"])
def test_postprocess_with_600_rows(target, layout):
    """600 rows, many of which copy nothing: each sub-group walks them all and deals out only the units of
    those that copy."""
    rng = random.Random(77 + (layout == "ds"))
    s = random_postprocess(rng, layout, requests=600)
    _check_postprocess(target, s)


@pytest.mark.parametrize("layout", ["sd", "ds"])
def test_postprocess_with_180_states(target, layout):
    """90 layers of a conv and a temporal state: each unit's state is found among 180 running bounds."""
    rng = random.Random(91 + (layout == "ds"))
    s = random_postprocess(rng, layout, requests=5, layers=90)
    assert len(s.states) > 146
    _check_postprocess(target, s)


def busy_step(rng):
    """A postprocess step of 40 requests x 60 states on 2 block tables (2,400 entries), for the tests that
    launch one step many times."""
    s = random_postprocess(rng, "sd", requests=40, layers=30, groups=2)
    assert s.num_rows * len(s.block_tables) <= 512 and s.num_rows * len(s.states) == 2400
    return s


class Relaunch:
    """One postprocess step launched again and again on `device`: its pools, a pristine copy of them, the
    reference's pools (in `s`) and counts, and the counts buffer the launches write."""

    def __init__(self, s, device):
        self.s, self.ours = s, to_device(s, device)
        self.pristine = [t.clone() for t in self.ours.states]
        self.counts = torch.full((s.num_accepted.numel(),), POISON, dtype=torch.int32)
        s.reference(precopy=False, counts_out=self.counts)  # in place on the host pools: after to_device
        self.out = torch.empty_like(self.counts, device=device)

    def reset(self):
        """The pools as before the step and the counts poisoned, on the current stream."""
        for t, p in zip(self.ours.states, self.pristine):
            t.copy_(p)
        self.out.fill_(POISON)

    def launch(self):
        self.reset()
        run_postprocess(self.ours, self.out)

    def check(self, launch):
        """After the last launch is done: every pool byte and every count."""
        assert_same_pools(self.ours.states, self.s.states)
        assert torch.equal(self.out.cpu(), self.counts), f"launch {launch}"


def test_postprocess_stays_right_over_many_launches(target):
    """300 launches of one step, each on the same pristine pools, must each leave exactly the reference's
    bytes and counts: a launch leaves nothing behind that changes the next."""
    run = Relaunch(busy_step(random.Random(301)), target.device)
    for launch in range(300):
        run.launch()
        if launch % 75 == 0 or launch == 299:
            synchronize(target.device)
            run.check(launch)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("layout", ["sd", "ds"])
def test_precopy_matches_reference(target, seed, layout):
    rng = random.Random(1000 + seed * 7 + (layout == "ds"))
    _check_precopy(target, random_precopy(rng, layout, mapped=seed % 2 == 1,
                                          max_requests=64 if target.name == "cpu" else 24))


def _one_request(kind_layout="sd", tokens=4):
    """One request, one conv state and one temporal state, blocks 0..5 in a table of 6 columns."""
    conv = torch.arange(6 * tokens * 3, dtype=torch.float32).view(6, tokens, 3)
    if kind_layout == "ds":
        conv = torch.arange(6 * 3 * tokens, dtype=torch.float32).view(6, 3, tokens)
    temporal = torch.arange(6 * 8, dtype=torch.float32).view(6, 8)
    table = torch.arange(6, dtype=torch.int32).view(1, 6)
    return Scenario([conv, temporal], ["conv_" + kind_layout, "whole"], [0, 0], [table], 1, block_size=4)


@pytest.mark.parametrize("layout", ["sd", "ds"])
def test_same_block_left_shift_and_count_reset(target, layout):
    # running = 5 tokens, 3 accepted: new = 7, aligned = 4 < 5: nothing. running = 3, accepted 3: new = 5,
    # aligned 4 >= 3: bias 1, dst column 0 == src column 0: shift left by one token in place, count -> 1.
    s = _one_request(layout)
    s.num_accepted, s.state_idx = torch.tensor([3], dtype=torch.int32), torch.tensor([0], dtype=torch.int32)
    s.num_computed, s.num_scheduled, s.num_draft = (torch.tensor([v], dtype=torch.int32) for v in (1, 4, 2))
    ours = to_device(s, target.device)
    counts = torch.full((1,), POISON, dtype=torch.int32, device=target.device)
    run_postprocess(ours, counts)
    synchronize(target.device)
    expected = [t.clone() for t in s.states]
    if layout == "sd":
        expected[0][0, :3] = s.states[0][0, 1:].clone()
    else:
        expected[0][0, :, :3] = s.states[0][0, :, 1:].clone()
    expected[1][0] = s.states[1][1]  # whole block from column src + bias = 1
    assert counts.item() == 1
    for a, b in zip(ours.states, expected):
        assert torch.equal(a.cpu(), b)


def test_out_of_range_columns_and_blocks_copy_nothing(target):
    s = _one_request()
    s.block_tables = [torch.tensor([[0, 1, 2, 99, -5, 5]], dtype=torch.int32)]  # 99 and -5 are not blocks
    s.num_rows = 1
    s.dst_cols, s.token_bias = torch.tensor([3], dtype=torch.int32), torch.tensor([0], dtype=torch.int32)
    for src in (0, 4, 6, 1000):
        s.src_cols = torch.tensor([src], dtype=torch.int32)
        ours = to_device(s, target.device)
        run_precopy(ours)
        synchronize(target.device)
        assert all(torch.equal(a.cpu(), b) for a, b in zip(ours.states, s.states))


def test_bad_arguments_are_named():
    s = _one_request()
    counts = torch.zeros(1, dtype=torch.int32)
    one = torch.zeros(1, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="groups\\[1\\] = 3 is not an index into block_tables"):
        xpu_state_copy.mamba_spec_decode_postprocess_(s.states, s.kinds, [0, 3], s.block_tables, 4, 1, one, one,
                                                      one, counts)
    with pytest.raises(RuntimeError, match="block_tables\\[0\\] must be torch.int32"):
        xpu_state_copy.mamba_spec_decode_postprocess_(s.states, s.kinds, [0, 0], [s.block_tables[0].long()], 4, 1,
                                                      one, one, one, counts)
    with pytest.raises(RuntimeError, match="num_accepted_out overlaps num_accepted"):
        xpu_state_copy.mamba_spec_decode_postprocess_(s.states, s.kinds, [0, 0], s.block_tables, 4, 1, counts, one,
                                                      one, counts)
    with pytest.raises(RuntimeError, match="num_rows = 2 but the per-request inputs have 1"):
        xpu_state_copy.mamba_spec_decode_precopy_(s.states, s.kinds, [0, 0], s.block_tables, 2, one, one, one)
    with pytest.raises(RuntimeError, match="block_size = 0 is not positive"):
        xpu_state_copy.mamba_spec_decode_postprocess_(s.states, s.kinds, [0, 0], s.block_tables, 0, 1, one, one,
                                                      one, counts)
    with pytest.raises(RuntimeError, match="num_scheduled and num_draft go together"):
        xpu_state_copy.mamba_spec_decode_postprocess_(s.states, s.kinds, [0, 0], s.block_tables, 4, 1, one, one,
                                                      one, counts, num_scheduled=one)


def test_opcheck():
    s = _one_request()
    one = torch.zeros(1, dtype=torch.int32)
    args = (s.states, [1, 0], [0, 0], s.block_tables, 4, 1, one, one, one, None, None,
            torch.zeros(1, dtype=torch.int32), None, False, True)
    torch.library.opcheck(torch.ops.xpu_state_copy.mamba_spec_decode_postprocess_.default, args)
    torch.library.opcheck(torch.ops.xpu_state_copy.mamba_spec_decode_precopy_.default,
                          (s.states, [1, 0], [0, 0], s.block_tables, 1, one, one, one, None, False))
