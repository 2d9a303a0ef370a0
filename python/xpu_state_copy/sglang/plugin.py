"""SGLang plugin: serves SGLang's Mamba/GDN state copies (``MambaPool.copy_from``) with one launch.

SGLang (0.5.11+) calls ``register`` in every process through the ``sglang.srt.plugins`` entry point; before
0.5.11 there is no plugin mechanism, and calling ``register()`` yourself early in each process does the same.
On XPU (or with XPU_STATE_COPY_SGLANG=1; =0 turns it off) it waits until SGLang's memory_pool module is
imported and, if ``MambaPool.copy_from`` is one of the versions read from SGLang's released wheels (below),
replaces it: the prefix-cache copy-on-write, the radix-tree insert and fork_from then copy every conv and
temporal state of the pool in one ``copy_states_`` launch instead of two indexing kernels per tensor. A pool
it does not serve (ReplaySSM on, sibling states attached, another layout) goes to SGLang's own method, with
one warning saying why. A copy_from it does not know is left alone, with one warning.
docs/sglang.md has the mapping of SGLang's copies to our ops.
"""
import ast
import collections
import hashlib
import importlib.util
import inspect
import logging
import os
import pathlib
import textwrap
import weakref

from .. import plugin_switch

ENV_SWITCH = "XPU_STATE_COPY_SGLANG"
MEMORY_POOL = "sglang.srt.mem_cache.memory_pool"
VERIFIED = ("0.5.4", "0.5.23")  # the oldest and newest releases with copy_from that the release tests ran
# MambaPool.copy_from as SGLang released it (fingerprint(), of the method's code without its docstring), and
# the pool attributes that must be empty for the copy of conv and temporal states to be all it does.
KNOWN_COPY_FROM = {
    "37a587bc3dd8": ("0.5.4", ()),
    "6ac11cf1fa36": ("0.5.5", ()),  # conv a list for KDA pools, else one tensor
    "c42a1f21fd46": ("0.5.6-0.5.12", ()),
    "0c1f9b6a3672": ("0.5.13-0.5.14", ()),
    "6bd790646b98": ("0.5.15", ("replayssm_write_pos",)),
    "c2010aa7ebb6": ("0.5.16-0.5.19", ("replayssm_write_pos",)),  # + a fused conv copy, CUDA only
    "6aaa788bb48c": ("0.5.20-0.5.23", ("replayssm_write_pos", "_slot_siblings")),
}
_MARK = "__xpu_state_copy_patch__"
logger = logging.getLogger("sglang.xpu_state_copy")  # through SGLang's own handlers and format
_said = set()  # what was logged once: the keys of _warn_once, and "served"
_pool_views = weakref.WeakKeyDictionary()  # pool -> (ids of its state tensors, pool_states' answer)


def _shape(node):
    """A node's type and the fields it sets, recursively: ast.dump's content, written the same way on every
    Python (ast.dump itself leaves out empty fields from 3.13 on)."""
    if isinstance(node, ast.AST):
        fields = (f"{name}={_shape(value)}" for name, value in ast.iter_fields(node) if value not in (None, []))
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return f"[{','.join(_shape(item) for item in node)}]"
    return repr(node)


def fingerprint(source):
    """A short digest of a function's code, blind to its docstring, comments and formatting."""
    body = ast.parse(textwrap.dedent(source)).body[0].body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return hashlib.sha256(_shape(body).encode()).hexdigest()[:12]


def _warn_once(key, message, *args):
    if key not in _said:
        _said.add(key)
        logger.warning(message, *args)


def pool_states(pool):
    """(states, None): one [slots, ...] view per (state tensor, layer) of a MambaPool, for copy_states_;
    or (None, why) when the pool's layout is not the one recognised. Kept per pool while its state tensors
    stay the same: making the views costs ~80 us for 48 layers, more than one request's copy on a GPU."""
    import torch

    cache = getattr(pool, "mamba_cache", None)
    conv, temporal = getattr(cache, "conv", None), getattr(cache, "temporal", None)
    convs = list(conv) if isinstance(conv, (list, tuple)) else [conv]
    tensors = [t for t in [*convs, temporal] if not (isinstance(t, torch.Tensor) and t.numel() == 0)]
    key = tuple(map(id, tensors))  # the kept views hold the tensors, so their ids are not reused meanwhile
    try:
        kept = _pool_views.get(pool)
    except TypeError:  # a pool object that cannot be weakly referenced: nothing kept
        return _layer_views(tensors)
    if kept is None or kept[0] != key:
        kept = (key, _layer_views(tensors))
        _pool_views[pool] = kept
    return kept[1]


def _layer_views(tensors):
    import torch

    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        return None, "mamba_cache.conv / .temporal are not tensors (or all empty)"
    if len({t.device for t in tensors}) != 1:
        return None, "the state tensors are on more than one device"
    if any(t.dim() < 2 or t.shape[:2] != tensors[0].shape[:2] for t in tensors):
        return None, "the state tensors are not all [layers, slots, ...] of one size"
    if not all(t[0, 0].is_contiguous() for t in tensors):
        return None, "a slot of a state tensor is not contiguous"
    return [t[layer] for t in tensors for layer in range(t.shape[0])], None


def _in_use(value):
    return value is not None and not (isinstance(value, (list, tuple, dict)) and not value)


def _slot_ids(ids):
    """`ids` as a 1-D int32/int64 tensor (where it already is one, on its device), or None for anything SGLang's
    indexing reads otherwise (bool or byte masks, floats, several dimensions)."""
    import torch

    if not isinstance(ids, torch.Tensor):
        try:
            ids = torch.as_tensor(ids)
        except (TypeError, ValueError, RuntimeError):
            return None
    if ids.dtype not in (torch.int32, torch.int64) or ids.dim() > 1:
        return None
    return ids.reshape(-1)


def _slot_conflict(src, dst, slots):
    """Why copying dst[r] <- src[r] for every r in one launch would not give SGLang's bytes, or None.

    SGLang's method gathers every source slot before it writes any destination, so its result does not depend
    on order; one launch copies all pairs at once, so it gives the same bytes exactly when no destination is
    written twice and no destination is another pair's source (a pair copying a slot onto itself is harmless).
    Slot ids outside [0, slots) go back too: SGLang counts negative ones from the end, and raises on the rest."""
    src, dst = src.tolist(), dst.tolist()
    if any(not 0 <= slot < slots for slot in src + dst):
        return "slot ids outside [0, slots)"
    if len(set(dst)) != len(dst):
        return "a destination slot written twice"
    readers = collections.Counter(src)
    if any(readers[d] > (s == d) for s, d in zip(src, dst)):
        return "a destination slot that another copy reads (a chain or a swap)"
    return None


def _check_slots(pool) -> bool:
    """Whether device-side slot ids are read back and checked: XPU_STATE_COPY_VALIDATE=1, or SGLang's own
    memory-pool debugging on (SGLang then reads its ids back for its own overlap check too)."""
    from .. import validate  # here, not at import: it brings numpy, and register() runs in every SGLang process

    flag = getattr(pool, "debug_memory_pool", None)
    if flag is None:
        flag = os.environ.get("SGLANG_DEBUG_MEMORY_POOL", "").lower() in ("1", "true", "yes", "on")
    return validate.requested() or bool(flag)


def _served_slots(pool, src_indices, dst_indices, states):
    """(src, dst, None): the slot ids as int64 vectors on the pool's device, when one copy_states_ launch gives
    exactly SGLang's bytes; else (None, None, why the call goes back to SGLang). Ids on the host are checked
    (no device work); ids on the device only when _check_slots says so: reading them back waits for the device."""
    src, dst = _slot_ids(src_indices), _slot_ids(dst_indices)
    if src is None or dst is None:
        return None, None, "slot ids that are not a list or 1-D tensor of int32 / int64"
    if src.numel() != dst.numel():
        return None, None, "unequal numbers of source and destination slots"
    if (src.device.type == "cpu" and dst.device.type == "cpu") or _check_slots(pool):
        why = _slot_conflict(src.cpu(), dst.cpu(), states[0].shape[0])
        if why:
            return None, None, why
    import torch

    device = states[0].device
    return src.to(device=device, dtype=torch.int64), dst.to(device=device, dtype=torch.int64), None


def _one_launch_copy_from(original, must_be_empty):
    def copy_from(self, src_indices, dst_indices):
        used = [name for name in must_be_empty if _in_use(getattr(self, name, None))]
        try:
            states, why = (None, f"the pool uses {', '.join(used)}") if used else pool_states(self)
        except Exception as error:  # a pool unlike any SGLang release builds: its own method decides
            states, why = None, f"its states could not be read ({type(error).__name__}: {error})"
        if states is None:
            _warn_once(why, "xpu_state_copy: MambaPool.copy_from left to SGLang for this pool: %s", why)
            return original(self, src_indices, dst_indices)
        src, dst, why = _served_slots(self, src_indices, dst_indices, states)
        if why:
            _warn_once(why, "xpu_state_copy: MambaPool.copy_from handed to SGLang for %s (this and every such call)",
                       why)
            return original(self, src_indices, dst_indices)
        from ..ops import copy_states_

        copy_states_(states, ["whole"] * len(states), src, dst)
        if "served" not in _said:
            _said.add("served")
            logger.info("xpu_state_copy: MambaPool.copy_from copies %d state views in one launch", len(states))

    copy_from.__wrapped__ = original
    copy_from.__name__ = copy_from.__qualname__ = "copy_from"
    setattr(copy_from, _MARK, True)
    return copy_from


def installed_copy_from():
    """Which released MambaPool.copy_from the installed SGLang has, read from its source without importing
    SGLang (its import is heavy): "as in SGLang <releases>", or why the plugin would leave it alone."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return "SGLang is not importable here"
    path = pathlib.Path(list(spec.submodule_search_locations)[0], *MEMORY_POOL.split(".")[1:]).with_suffix(".py")
    try:
        source = path.read_text()
        methods = [f for c in ast.parse(source).body if isinstance(c, ast.ClassDef) and c.name == "MambaPool"
                   for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "copy_from"]
    except (OSError, ValueError, SyntaxError) as error:  # ValueError: not UTF-8
        return f"{path} could not be read ({error})"
    if not methods:
        return "no MambaPool.copy_from: nothing to serve"
    known = KNOWN_COPY_FROM.get(fingerprint(ast.get_source_segment(source, methods[0], padded=True)))
    return f"as in SGLang {known[0]}: served" if known else "not a version verified: left to SGLang"


def patch_memory_pool(module):
    """Replace module.MambaPool.copy_from if it is a version we know; otherwise warn and leave it. Never raises:
    it runs inside SGLang's import of the module."""
    try:
        _patch_memory_pool(module)
    except Exception as error:
        _warn_once("failed", "xpu_state_copy: could not patch SGLang's MambaPool.copy_from (%s: %s); SGLang's "
                   "own method runs", type(error).__name__, error)


def _patch_memory_pool(module):
    pool_class = getattr(module, "MambaPool", None)
    method = getattr(pool_class, "copy_from", None)
    if method is None or getattr(method, _MARK, False):
        return
    try:
        known = KNOWN_COPY_FROM.get(fingerprint(inspect.getsource(method)))
    except (OSError, TypeError, SyntaxError, IndexError) as error:
        known, why = None, f"its source could not be read ({error})"
    else:
        why = "its code is not that of any release verified"
    if known is None:
        _warn_once("unknown", "xpu_state_copy: SGLang's MambaPool.copy_from left as it is: %s (%s to %s)",
                   why, *VERIFIED)
        return
    releases, must_be_empty = known
    pool_class.copy_from = _one_launch_copy_from(method, must_be_empty)
    logger.info("xpu_state_copy: MambaPool.copy_from (as in SGLang %s) now copies in one launch", releases)


def activation():
    """(active, why): XPU_STATE_COPY_SGLANG wins; otherwise active exactly when torch sees an XPU."""
    return plugin_switch.activation(ENV_SWITCH)


def register():
    """Entry point of ``sglang.srt.plugins``. Never raises: a failure is one warning and no patch."""
    plugin_switch.patch_when_imported("SGLang", activation, MEMORY_POOL, patch_memory_pool, logger)
    plugin_switch.build_kernels_when_imported(activation, MEMORY_POOL, logger)
