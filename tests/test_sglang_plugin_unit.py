"""The SGLang plugin's decisions without SGLang: which copy_from it replaces, which pools it serves, and that
a served copy matches indexing byte for byte. tests/sglang_releases runs it against real SGLang wheels."""
import inspect
import logging
import sys
import types

import pytest
import torch

from conftest import synchronize
from xpu_state_copy import ops
from xpu_state_copy.sglang import plugin as sglang_plugin


class StackedPool:
    """A pool laid out as SGLang's: conv tensors and a temporal tensor, [layers, slots, ...]."""

    def __init__(self, device="cpu", **extra):
        g = torch.Generator().manual_seed(torch.seed() % 2**31)
        convs = [torch.randn(3, 9, 16, 3, generator=g).to(torch.bfloat16), torch.randn(3, 9, 8, 3, generator=g)]
        temporal = torch.randn(3, 9, 2, 4, 8, generator=g)
        self.mamba_cache = types.SimpleNamespace(conv=[t.to(device) for t in convs], temporal=temporal.to(device))
        self.__dict__.update(extra)

    def tensors(self):
        return [*self.mamba_cache.conv, self.mamba_cache.temporal]

    def copy_from(self, src, dst):  # the method the plugin stands in for
        for t in self.tensors():
            t[:, dst] = t[:, src]


def fake_memory_pool():
    return types.SimpleNamespace(MambaPool=type("MambaPool", (StackedPool,), {}))


@pytest.fixture
def make_known(monkeypatch):
    """StackedPool.copy_from as a version the plugin knows (with the attributes that must be empty)."""
    monkeypatch.setattr(sglang_plugin, "_said", set())

    def make(must_be_empty=()):
        digest = sglang_plugin.fingerprint(inspect.getsource(StackedPool.copy_from))
        monkeypatch.setitem(sglang_plugin.KNOWN_COPY_FROM, digest, ("test", must_be_empty))
    return make


def patched_pool(must_be_empty, make_known, **extra):
    make_known(must_be_empty)
    module = fake_memory_pool()
    sglang_plugin.patch_memory_pool(module)
    assert getattr(module.MambaPool.copy_from, "__wrapped__", None) is StackedPool.copy_from
    return module.MambaPool(**extra)


def as_bytes(t):
    return t.contiguous().view(torch.uint8)


def test_fingerprint_ignores_docstring_comments_and_layout_but_not_code():
    plain = "def f(self, a, b):\n    x = a + b\n    return x\n"
    dressed = 'def f(self, a, b):\n    """Adds."""\n    # the sum\n    x = (a +\n         b)\n    return x\n'
    changed = "def f(self, a, b):\n    x = a - b\n    return x\n"
    assert sglang_plugin.fingerprint(plain) == sglang_plugin.fingerprint(dressed)
    assert sglang_plugin.fingerprint(plain) != sglang_plugin.fingerprint(changed)


def test_an_unknown_copy_from_is_left_alone_with_a_warning(monkeypatch, caplog):
    monkeypatch.setattr(sglang_plugin, "_said", set())
    module = fake_memory_pool()
    with caplog.at_level(logging.WARNING, logger="sglang.xpu_state_copy"):
        sglang_plugin.patch_memory_pool(module)
    assert module.MambaPool.copy_from is StackedPool.copy_from
    assert "left as it is: its code is not that of any release verified (0.5.4 to 0.5.23)" in caplog.text


def test_patching_never_raises_into_sglangs_import(monkeypatch, caplog):
    """It runs inside SGLang's import of memory_pool: a copy_from that fails in a way no check foresaw (here a
    __wrapped__ loop, ValueError from inspect) is left alone with a warning, and the import goes on."""
    monkeypatch.setattr(sglang_plugin, "_said", set())

    def copy_from(self, src_indices, dst_indices):
        pass

    copy_from.__wrapped__ = copy_from
    module = types.SimpleNamespace(MambaPool=type("MambaPool", (StackedPool,), {"copy_from": copy_from}))
    with caplog.at_level(logging.WARNING, logger="sglang.xpu_state_copy"):
        sglang_plugin.patch_memory_pool(module)
    assert module.MambaPool.copy_from is copy_from
    assert "could not patch SGLang's MambaPool.copy_from (ValueError: wrapper loop" in caplog.text


@pytest.mark.parametrize("requests", [1, 4])
def test_a_served_copy_matches_indexing_in_one_launch(make_known, monkeypatch, caplog, requests):
    pool = patched_pool((), make_known)
    slots = torch.randperm(9)[: 2 * requests]
    src, dst = slots[:requests], slots[requests:]
    expected = [t.clone() for t in pool.tensors()]
    for t in expected:
        t[:, dst] = t[:, src]
    launches, real = [], ops.copy_states_
    monkeypatch.setattr(ops, "copy_states_", lambda *a, **k: (launches.append(len(a[0])), real(*a, **k)))
    with caplog.at_level(logging.INFO, logger="sglang.xpu_state_copy"):
        pool.copy_from(src.tolist(), dst.to(torch.int32))  # ids as a caller may hand them: a list, int32
    assert launches == [3 * 3]  # 3 layers of 2 conv tensors and the temporal one
    for got, want in zip(pool.tensors(), expected):
        assert torch.equal(as_bytes(got), as_bytes(want))
    assert "copies 9 state views in one launch" in caplog.text


@pytest.mark.parametrize("extra, why", [
    ({"replayssm_write_pos": torch.zeros(9, dtype=torch.int32)}, "the pool uses replayssm_write_pos"),
    ({"_slot_siblings": [object()]}, "the pool uses _slot_siblings"),
])
def test_a_pool_that_copy_from_does_more_for_goes_to_sglang(make_known, monkeypatch, caplog, extra, why):
    pool = patched_pool(("replayssm_write_pos", "_slot_siblings"), make_known, **extra)
    monkeypatch.setattr(ops, "copy_states_", lambda *a, **k: pytest.fail("our op ran"))
    before = pool.mamba_cache.temporal.clone()
    with caplog.at_level(logging.WARNING, logger="sglang.xpu_state_copy"):
        pool.copy_from(torch.tensor([1]), torch.tensor([2]))
    assert torch.equal(pool.mamba_cache.temporal[:, 2], before[:, 1])  # the original method ran
    assert f"left to SGLang for this pool: {why}" in caplog.text


def test_no_replayssm_and_no_siblings_are_served(make_known, monkeypatch):
    pool = patched_pool(("replayssm_write_pos", "_slot_siblings"), make_known, replayssm_write_pos=None,
                        _slot_siblings=())
    launches, real = [], ops.copy_states_
    monkeypatch.setattr(ops, "copy_states_", lambda *a, **k: (launches.append(1), real(*a, **k)))
    pool.copy_from(torch.tensor([1]), torch.tensor([2]))
    assert launches == [1]


@pytest.mark.parametrize("spoil, why", [
    (lambda c: setattr(c, "temporal", c.temporal[..., ::2]), "not contiguous"),
    (lambda c: setattr(c, "temporal", c.temporal[:, :5]), "of one size"),
    (lambda c: setattr(c, "conv", None), "not tensors"),
    (lambda c: (setattr(c, "conv", []), setattr(c, "temporal", torch.empty(0))), "all empty"),
])
def test_a_layout_it_does_not_know_is_named(spoil, why):
    pool = StackedPool()
    spoil(pool.mamba_cache)
    states, reason = sglang_plugin.pool_states(pool)
    assert states is None and why in reason


def test_register_respects_the_switch_and_patches_an_imported_module(make_known, monkeypatch):
    make_known()
    module = fake_memory_pool()
    monkeypatch.setitem(sys.modules, sglang_plugin.MEMORY_POOL, module)
    monkeypatch.setenv(sglang_plugin.ENV_SWITCH, "0")
    sglang_plugin.register()
    assert module.MambaPool.copy_from is StackedPool.copy_from
    monkeypatch.setenv(sglang_plugin.ENV_SWITCH, "1")
    sglang_plugin.register()
    assert module.MambaPool.copy_from.__wrapped__ is StackedPool.copy_from


def test_doctor_reads_which_copy_from_an_installed_sglang_has(make_known, tmp_path, monkeypatch):
    """From the source file alone: SGLang's own import is too heavy for a check."""
    module = tmp_path / "sglang" / "srt" / "mem_cache"
    module.mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("raise ImportError('the check must not import SGLang')\n")
    method = inspect.getsource(StackedPool.copy_from)
    (module / "memory_pool.py").write_text(f"class MambaPool:\n{method}")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert sglang_plugin.installed_copy_from() == "not a version verified: left to SGLang"
    make_known()
    assert sglang_plugin.installed_copy_from() == "as in SGLang test: served"
    (module / "memory_pool.py").write_text("class MambaPool:\n    pass\n")
    assert sglang_plugin.installed_copy_from() == "no MambaPool.copy_from: nothing to serve"


def test_the_views_are_kept_per_pool_until_its_state_tensors_change():
    pool = StackedPool()
    first, _ = sglang_plugin.pool_states(pool)
    assert sglang_plugin.pool_states(pool)[0] is first
    pool.mamba_cache.temporal = pool.mamba_cache.temporal.clone()  # as a pool rebuilt by its engine
    again, _ = sglang_plugin.pool_states(pool)
    assert again is not first and again[-1].data_ptr() == pool.mamba_cache.temporal[-1].data_ptr()
    unhashable = types.SimpleNamespace(mamba_cache=pool.mamba_cache)  # no weak reference: computed each time
    assert len(sglang_plugin.pool_states(unhashable)[0]) == len(again)


# Calls whose copies meet: one launch would race, SGLang's method (every source gathered before any
# destination is written) has one answer. Each must go to SGLang's method. Duplicate destinations share a
# source, so that answer does not depend on which write lands last.
MEETING_COPIES = {"chain": ([1, 2, 3], [2, 3, 4]), "swap": ([5, 6], [6, 5]), "written twice": ([1, 1], [7, 7]),
                  "reverse chain": ([3, 2, 1], [4, 3, 2]), "negative id": ([1, -1], [2, 3])}


def _check_device_ids(target, monkeypatch):
    """Slot ids on an accelerator are checked only when asked (XPU_STATE_COPY_VALIDATE=1); on the host, always."""
    if target.device.type != "cpu":
        monkeypatch.setenv("XPU_STATE_COPY_VALIDATE", "1")


def _ours_launched(monkeypatch):
    launches, real = [], ops.copy_states_
    monkeypatch.setattr(ops, "copy_states_", lambda *a, **k: (launches.append(len(a[0])), real(*a, **k)))
    return launches


@pytest.mark.parametrize("case", MEETING_COPIES)
def test_copies_that_meet_go_to_sglangs_method_and_give_its_bytes(target, make_known, monkeypatch, case):
    _check_device_ids(target, monkeypatch)
    pool = patched_pool((), make_known, device=target.device)
    src, dst = (torch.tensor(ids, device=target.device) for ids in MEETING_COPIES[case])
    expected = StackedPool(device=target.device)
    for want, got in zip(expected.tensors(), pool.tensors()):
        want.copy_(got)
    StackedPool.copy_from(expected, src, dst)
    launches = _ours_launched(monkeypatch)
    pool.copy_from(src, dst)
    synchronize(target.device)
    assert launches == []
    for got, want in zip(pool.tensors(), expected.tensors()):
        assert torch.equal(as_bytes(got).cpu(), as_bytes(want).cpu())


def test_a_chain_differs_in_one_launch():
    """Why calls are checked: our op copies a chain's pairs in some order of its own, in place, so it gets a
    chain wrong in one direction or the other (SGLang's method gathers first and gets both right)."""
    differs = []
    for case in ("chain", "reverse chain"):
        pool = StackedPool()
        src, dst = (torch.tensor(ids) for ids in MEETING_COPIES[case])
        expected = [t.clone() for t in pool.tensors()]
        for t in expected:
            t[:, dst] = t[:, src]
        states, _ = sglang_plugin.pool_states(pool)
        ops.copy_states_(states, ["whole"] * len(states), src, dst)
        same = all(torch.equal(as_bytes(got), as_bytes(want)) for got, want in zip(pool.tensors(), expected))
        differs.append(not same)
    assert any(differs)


def test_disjoint_copies_checked_on_every_backend_are_still_one_launch(target, make_known, monkeypatch):
    _check_device_ids(target, monkeypatch)
    pool = patched_pool((), make_known, device=target.device)
    src, dst = torch.tensor([1, 1, 2], device=target.device), torch.tensor([3, 4, 5], device=target.device)
    expected = [t.clone() for t in pool.tensors()]
    for t in expected:
        t[:, dst] = t[:, src]
    launches = _ours_launched(monkeypatch)
    pool.copy_from(src, dst)
    synchronize(target.device)
    assert launches == [9]
    for got, want in zip(pool.tensors(), expected):
        assert torch.equal(as_bytes(got).cpu(), as_bytes(want).cpu())


def _outcome(copy, pool, src, dst):
    """The pool's bytes after copy(pool, src, dst), or the type of what it raised."""
    try:
        copy(pool, src, dst)
    except Exception as error:  # SGLang's own indexing error is the expected answer for some ids
        return type(error)
    return [as_bytes(t).clone() for t in pool.tensors()]


@pytest.mark.parametrize("src, dst, why", [
    ([1, 2], [3], "unequal numbers of source and destination slots"),
    ([[1], [2]], [[3], [4]], "not a list or 1-D tensor"),
    ([1.0], [2.0], "not a list or 1-D tensor"),
    ([1, 20], [2, 3], "slot ids outside [0, slots)"),
])
def test_ids_sglang_reads_otherwise_go_to_its_method(make_known, monkeypatch, caplog, src, dst, why):
    """SGLang's method decides (bytes or its own error); our op does not run and one warning names why."""
    pool = patched_pool((), make_known)
    theirs = StackedPool()
    for want, got in zip(theirs.tensors(), pool.tensors()):
        want.copy_(got)
    launches = _ours_launched(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="sglang.xpu_state_copy"):
        ours = _outcome(type(pool).copy_from, pool, torch.tensor(src), torch.tensor(dst))
    expected = _outcome(StackedPool.copy_from, theirs, torch.tensor(src), torch.tensor(dst))
    assert launches == []
    if isinstance(expected, type):
        assert ours is expected
    else:
        assert all(torch.equal(a, b) for a, b in zip(ours, expected))
    assert why in caplog.text


def test_sglangs_own_debug_switch_turns_the_check_on_for_device_ids(monkeypatch):
    monkeypatch.delenv("XPU_STATE_COPY_VALIDATE", raising=False)
    monkeypatch.delenv("SGLANG_DEBUG_MEMORY_POOL", raising=False)
    assert not sglang_plugin._check_slots(StackedPool())
    assert sglang_plugin._check_slots(StackedPool(debug_memory_pool=True))
    assert not sglang_plugin._check_slots(StackedPool(debug_memory_pool=False))
    monkeypatch.setenv("SGLANG_DEBUG_MEMORY_POOL", "1")
    assert sglang_plugin._check_slots(StackedPool())
    monkeypatch.setenv("SGLANG_DEBUG_MEMORY_POOL", "0")
    monkeypatch.setenv("XPU_STATE_COPY_VALIDATE", "1")
    assert sglang_plugin._check_slots(StackedPool())
