"""The SGLang plugin's decisions without SGLang: which copy_from it replaces, which pools it serves, and that
a served copy matches indexing byte for byte. tests/sglang_releases runs it against real SGLang wheels."""
import inspect
import logging
import sys
import types

import pytest
import torch

from xpu_state_copy import ops
from xpu_state_copy.sglang import plugin as sglang_plugin


class StackedPool:
    """A pool laid out as SGLang's: conv tensors and a temporal tensor, [layers, slots, ...]."""

    def __init__(self, **extra):
        g = torch.Generator().manual_seed(torch.seed() % 2**31)
        convs = [torch.randn(3, 9, 16, 3, generator=g).to(torch.bfloat16), torch.randn(3, 9, 8, 3, generator=g)]
        self.mamba_cache = types.SimpleNamespace(conv=convs, temporal=torch.randn(3, 9, 2, 4, 8, generator=g))
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
