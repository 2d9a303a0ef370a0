"""Run inside an SGLang environment (sglang_envs.run_in_sglang): load our plugin the way that release would,
build a real MambaPool on CPU with random states, and compare MambaPool.copy_from and fork_from, byte for
byte, with SGLang's own method on the same pool. Prints one JSON line; the test asserts on it.

argv[1]: the release. XPU_STATE_COPY_SGLANG (=1 or =0) decides whether the plugin patches.
"""
import inspect
import json
import logging
import os
import random
import sys

import torch

# Older releases read it without a default when they size the temporal state.
os.environ.setdefault("SGLANG_MAMBA_SSM_DTYPE", "float32")

logging.basicConfig(level=logging.INFO, stream=sys.stderr)


def load_plugins():
    """0.5.11+: SGLang's own plugin loader finds our entry point. Before: register() by hand, as documented."""
    try:
        from sglang.srt.plugins import load_plugins as sglang_load_plugins
    except ImportError:
        import xpu_state_copy.sglang.plugin as plugin

        plugin.register()
        return "register()"
    sglang_load_plugins()
    return "sglang.srt.plugins.load_plugins()"


def make_pool():
    from sglang.srt.configs import mamba_utils
    from sglang.srt.mem_cache.memory_pool import MambaPool

    shape = mamba_utils.Mamba2StateShape.create(tp_world_size=1, intermediate_size=96, n_groups=2, num_heads=4,
                                                head_dim=24, state_size=16, conv_kernel=4)
    params = mamba_utils.Mamba2CacheParams(shape=shape, layers=[0, 1, 2])
    accepted = inspect.signature(MambaPool.__init__).parameters
    kwargs = dict(size=10, cache_params=params, device="cpu")
    if "spec_state_size" in accepted:
        kwargs["spec_state_size"] = 10
    if "mamba_layer_ids" in accepted:
        kwargs["mamba_layer_ids"] = [0, 1, 2]
    return MambaPool(**kwargs)


def pool_tensors(pool):
    conv = pool.mamba_cache.conv
    return [*(conv if isinstance(conv, (list, tuple)) else [conv]), pool.mamba_cache.temporal]


def as_bytes(t):
    return t.contiguous().view(torch.uint8).clone()


def randomize(pool):
    """Fresh random states in every slot; returns a copy of them."""
    g = torch.Generator().manual_seed(random.randrange(2**31))
    for t in pool_tensors(pool):
        t.copy_(torch.randn(t.shape, generator=g).to(t.dtype))
    return [t.clone() for t in pool_tensors(pool)]


def compare(pool, ours, theirs, *args):
    """Run theirs, then ours, from the same random states; True if every byte agrees (and theirs changed
    something, so the comparison can fail)."""
    start = randomize(pool)
    theirs(pool, *args)
    expected = [as_bytes(t) for t in pool_tensors(pool)]
    for t, s in zip(pool_tensors(pool), start):
        t.copy_(s)
    ours(pool, *args)
    same = all(torch.equal(as_bytes(t), e) for t, e in zip(pool_tensors(pool), expected))
    return same and any(not torch.equal(as_bytes(s), e) for s, e in zip(start, expected))


def check_fork(pool):
    """fork_from (0.5.4-0.5.12): a free slot taken, and the source slot's states copied into it, nothing else.
    The source is a slot in use, as SGLang's are: a free one could be the very slot fork_from takes."""
    source = int(torch.as_tensor(pool.alloc(1)).reshape(-1)[0])
    start = randomize(pool)
    forked = int(torch.as_tensor(pool.fork_from(torch.tensor([source]))).reshape(-1)[0])
    for t in start:
        t[:, forked] = t[:, source]
    return forked != source and all(torch.equal(as_bytes(t), as_bytes(e)) for t, e in zip(pool_tensors(pool), start))


def main():
    import xpu_state_copy
    import xpu_state_copy.ops as ops

    how = load_plugins()
    from sglang.srt.mem_cache.memory_pool import MambaPool

    method = MambaPool.copy_from
    theirs = getattr(method, "__wrapped__", method)
    served = []
    real_copy_states = ops.copy_states_
    ops.copy_states_ = lambda *args, **kwargs: (served.append(len(args[0])), real_copy_states(*args, **kwargs))[1]

    pool = make_pool()
    slots = random.sample(range(1, 11), 6)  # slot 0: SGLang's padding slot
    src = torch.tensor(slots[:3])
    dst = torch.tensor(slots[3:])
    copy_ok = compare(pool, method, theirs, src, dst)
    copy_launches = len(served)
    fork_ok = check_fork(pool) if hasattr(pool, "fork_from") else None
    fork_launches = len(served) - copy_launches
    # A chain (each copy's destination the next one's source): SGLang's method gathers every source first;
    # the plugin must give its bytes, by handing such a call to it.
    before = len(served)
    chain = random.sample(range(1, 11), 4)
    chain_ok = compare(pool, method, theirs, torch.tensor(chain[:3]), torch.tensor(chain[1:]))
    chain_launches = len(served) - before

    fallback = None
    if hasattr(pool, "replayssm_write_pos"):  # 0.5.15+: a ReplaySSM pool must go to SGLang's own method
        pool.replayssm_write_pos = torch.full((11,), 5, dtype=torch.int32)
        before = len(served)
        fallback_ok = compare(pool, method, theirs, src, dst)
        fallback = {"ok": fallback_ok, "served": len(served) - before,
                    "write_pos_reset": bool((pool.replayssm_write_pos[dst] == 0).all())}
    print(json.dumps({"loaded_by": how, "backend": xpu_state_copy.backend("cpu"),
                      "patched": method is not theirs, "copy_ok": copy_ok,
                      "copy_launches": copy_launches, "states_per_launch": served[:1], "fork_ok": fork_ok,
                      "fork_launches": fork_launches, "chain_ok": chain_ok, "chain_launches": chain_launches,
                      "fallback": fallback}))


if __name__ == "__main__":
    main()
