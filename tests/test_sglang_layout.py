"""copy_states_ on the layout of SGLang's MambaPool (docs/sglang.md), against the indexing SGLang runs.

SGLang stacks every Mamba layer's state of one kind into one tensor with the slot on dim 1: conv states as
a list of ``[layers, slots, dim, kernel - 1]`` tensors (one per conv kind), the temporal state as
``[layers, slots, heads, head_dim, state]``. Its ``MambaPool.copy_from(src, dst)`` assigns
``pool[:, dst] = pool[:, src]`` for each. The recipe of docs/sglang.md hands our op one view per (tensor,
layer) instead, each ``[slots, ...]``, and copies them all in one launch; this checks it byte for byte on
fresh random pools, with the destination slots poisoned first. No SGLang is installed for this.
"""
import random

import pytest
import torch

import xpu_state_copy
from conftest import synchronize


def sglang_like_pool(device, layers, slots, conv_dims, kernel, heads, head_dim, state, ssm_dtype):
    """Conv tensors (bf16) and the temporal tensor, random, slot 0 being the dummy slot SGLang reserves."""
    g = torch.Generator().manual_seed(random.randrange(2**31))
    conv = [torch.randn(layers, slots + 1, dim, kernel - 1, generator=g).to(torch.bfloat16).to(device)
            for dim in conv_dims]
    temporal = torch.randn(layers, slots + 1, heads, head_dim, state, generator=g).to(ssm_dtype).to(device)
    return conv, temporal


def copy_slots(conv, temporal, src, dst):
    """The recipe: every (tensor, layer) as one "whole" state whose blocks are the slots."""
    states = [t[layer] for t in [*conv, temporal] for layer in range(t.shape[0])]
    xpu_state_copy.copy_states_(states, ["whole"] * len(states), src, dst)


def as_bytes(t):
    return t.cpu().contiguous().view(torch.uint8)


@pytest.mark.parametrize("ssm_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("requests", [1, 5])
def test_copy_from_matches_sglang_indexing(target, ssm_dtype, requests):
    rng = random.Random()
    slots = 12
    conv, temporal = sglang_like_pool(target.device, layers=6, slots=slots, conv_dims=[96, 40], kernel=4,
                                      heads=4, head_dim=8, state=16, ssm_dtype=ssm_dtype)
    picked = rng.sample(range(1, slots + 1), 2 * requests)  # SGLang's copies use disjoint slots
    src = torch.tensor(picked[:requests], device=target.device)
    dst = torch.tensor(picked[requests:], device=target.device)
    for t in [*conv, temporal]:
        t[:, dst] = torch.full_like(t[:, dst], float("nan"))  # poison what must be overwritten
    expected = [t.cpu().clone() for t in [*conv, temporal]]
    for t in expected:
        t[:, dst.cpu()] = t[:, src.cpu()]  # what SGLang's copy_from does
    copy_slots(conv, temporal, src, dst)
    synchronize(target.device)
    for j, (got, want) in enumerate(zip([*conv, temporal], expected)):
        assert torch.equal(as_bytes(got), as_bytes(want)), f"pool tensor {j} differs from SGLang's indexing"


def test_a_slot_padded_pool_is_refused_before_any_copy(target):
    """A temporal tensor whose slots are not contiguous (a strided view) is named, and nothing moves."""
    conv, temporal = sglang_like_pool(target.device, layers=2, slots=4, conv_dims=[16], kernel=4,
                                      heads=2, head_dim=4, state=8, ssm_dtype=torch.float32)
    strided = temporal[..., ::2]  # every slot has holes: not one contiguous block
    before = [as_bytes(t).clone() for t in [*conv, strided]]
    ids = lambda v: torch.tensor(v, device=target.device)  # noqa: E731
    with pytest.raises(RuntimeError, match=r"states\[2\] must be contiguous within a block"):
        copy_slots(conv, strided, ids([1]), ids([2]))
    synchronize(target.device)
    for j, (t, b) in enumerate(zip([*conv, strided], before)):
        assert torch.equal(as_bytes(t), b), f"pool tensor {j} changed although the call was refused"
