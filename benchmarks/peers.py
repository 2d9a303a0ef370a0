"""The methods one run compares: our op (and an older build of it), the torch peers and the Triton peers.

Every method turns a workload's buffers into one zero-argument callable per
rotation set.  Everything a caller would build once (address tables, lists of
views) is built here, outside the timed region, as vLLM does.
"""
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from . import triton_peers

ROOFLINE = "contiguous"
OURS = "ours"
COPY_STATES = "copy_states"
BASELINE = "baseline"  # an older build of the op, timed beside this one (run.py --baseline)


@dataclass
class Method:
    key: str      # name in the JSON and on the command line
    label: str    # name in the table and the chart
    build: Callable  # (sets, device) -> list of callables, one per rotation set
    # Methods that copy states (copy_states_, SGLang's indexing) work from the state pools and block ids,
    # not from views, and only on states workloads: (buffers, device) -> callables
    build_states: Optional[Callable] = None


def random_bytes(shape, device):
    """Random uint8 generated on the device itself (fast for GB-sized pools)."""
    return torch.randint(0, 256, shape, dtype=torch.uint8, device=device)


def host_pointer_table(views, device):
    """uint64 table of data_ptr()s built without our op (so peers do not depend
    on it).  Going through numpy keeps addresses >= 2**63 (XPU) intact on
    torch versions whose uint64 item assignment overflows."""
    addrs = np.array([v.data_ptr() for v in views], dtype=np.uint64)
    return torch.from_numpy(addrs).to(device)


def size_table(views, device):
    """Byte counts as vLLM passes them: int32 unless an entry needs more."""
    sizes = [v.numel() * v.element_size() for v in views]
    dtype = torch.int32 if max(sizes, default=0) < 2**31 else torch.int64
    return torch.tensor(sizes, dtype=dtype, device=device)


def _per_entry_copy(sets, device):
    def make(srcs, dsts):
        pairs = list(zip(srcs, dsts))

        def call():
            for s, d in pairs:
                d.copy_(s)
        return call
    return [make(s, d) for s, d in sets]


def _foreach_copy(sets, device):
    return [(lambda s=s, d=d: torch._foreach_copy_(d, s)) for s, d in sets]


class NotApplicable(Exception):
    """A method that cannot copy this workload at all (reported as n/a, not as a failure)."""


def _triton(factory, word_bytes=1):
    def build(sets, device):
        if word_bytes > 1 and any(v.data_ptr() % word_bytes for s, d in sets for v in s + d):
            # Its word loads would fault (misaligned address) and leave the device unusable.
            raise NotApplicable(f"needs {word_bytes}-byte aligned addresses")
        return [factory(host_pointer_table(s, device), host_pointer_table(d, device),
                        size_table(s, device)) for s, d in sets]
    return build


def _ours(op):
    def build(sets, device):
        calls = []
        for srcs, dsts in sets:
            src_t, dst_t = op.pointer_table(srcs), op.pointer_table(dsts)
            sizes = size_table(srcs, device)
            calls.append(lambda s=src_t, d=dst_t, n=sizes: op.batch_memcpy(s, d, n))
        return calls
    return build


def _copy_states(op):
    """copy_states_ over the workload's pools: conv terms as "conv_sd" states [blocks, tokens, token bytes]
    with every request shifted by the term's shift, the others as "whole" states."""
    def build(buffers, device):
        states, kinds = [], []
        for ti, t in enumerate(buffers.workload.terms):
            for pool in buffers.backing[ti]:
                states.append(pool.view(pool.shape[0], t.tokens, -1) if t.tokens else pool)
                kinds.append("conv_sd" if t.tokens else "whole")
        shift = max(t.shift for t in buffers.workload.terms)
        calls = []
        for k in range(buffers.rotations):
            src, dst = buffers.block_ids(k)
            shifts = torch.full_like(src, shift)
            calls.append(lambda s=src, d=dst, sh=shifts: op.copy_states_(states, kinds, s, d, sh))
        return calls
    return build


def _stacked_slot_index(buffers, device):
    """SGLang's MambaPool.copy_from (docs/sglang.md): each kind's states stacked as [layers, slots, ...], and
    per stacked tensor one indexed assignment pool[:, dst] = pool[:, src] (a gather, then a scatter). The
    states workloads' backing tensors are that layout. SGLang never shifts a slot as it copies."""
    if any(t.shift for t in buffers.workload.terms):
        raise NotApplicable("copies whole slots only (no conv shift)")
    # Indexing kernels work per element: the pools are seen as SGLang's dtypes (bf16 conv, fp32 SSM), not
    # as bytes, which would give the peer 2-4x the elements to move.
    pools = [pool.view(torch.bfloat16 if t.tokens else torch.float32)
             for pool, t in zip(buffers.backing, buffers.workload.terms)]
    calls = []
    for k in range(buffers.rotations):
        src, dst = (ids.long() for ids in buffers.block_ids(k))

        def call(s=src, d=dst):
            for pool in pools:
                pool[:, d] = pool[:, s]
        calls.append(call)
    return calls


class ImportFailed:
    """Stands for a build of the op whose import failed: every call raises that failure (run.py's "import
    MODULE failed: ..."), so its methods are reported FAILED, not left out."""

    def __init__(self, error):
        self.error = error

    def __getattr__(self, name):
        def failed(*args, **kwargs):
            raise RuntimeError(self.error)
        return failed


def candidate(key, label, build, target):
    """What run.py's _measure takes for one method: (key, label, calls, target) with build()'s calls, or a
    finished entry when the method cannot copy this workload (n/a) or fails to set up."""
    try:
        return key, label, build(), target
    except NotApplicable as exc:
        return {"key": key, "label": label, "status": "n/a", "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported as FAILED with the reason
        return {"key": key, "label": label, "status": "FAILED", "error": f"{type(exc).__name__}: {exc}"[:300]}


def baseline_key(key):
    """The key of an older build's method: its batch_memcpy is "baseline", the others "baseline_<key>"."""
    return BASELINE if key == OURS else f"{BASELINE}_{key}"


def op_methods(op, op_error=None, older=False):
    """copy_states_ and batch_memcpy of one build of the op: this one, or (older) the baseline build
    timed beside it, whose keys and labels say so."""
    op = op if op is not None else ImportFailed(op_error)
    ours, states = _ours(op), _copy_states(op)
    if older:
        return [Method(baseline_key(COPY_STATES), "baseline: copy_states_", None, states),
                Method(BASELINE, "baseline: batch_memcpy", ours)]
    return [Method(COPY_STATES, "xpu_state_copy.copy_states_", None, states),
            Method(OURS, "xpu_state_copy.batch_memcpy", ours)]


def table_methods(op, with_triton, op_error=None, baseline=None, extra=()):
    """Methods that copy the workload's own blocks (all but the roofline), in table order: ours first, then
    the baseline build when given as (module, import error), then the peers, `extra` (the CUDA peers) last."""
    methods = op_methods(op, op_error)
    if baseline is not None:
        methods += op_methods(*baseline, older=True)
    methods += [
        Method("copy_", "per-entry copy_", _per_entry_copy),
        Method("foreach_copy_", "torch._foreach_copy_", _foreach_copy),
        Method("stacked_index", "indexed copy of stacked pools (SGLang)", None, _stacked_slot_index),
    ]
    if with_triton:
        methods += [
            Method("triton_bytewise", "Triton, 1 program/entry, bytewise",
                   _triton(triton_peers.bytewise_call)),
            Method("triton_tiled", "Triton, 16 tiles/entry, 8-byte words",
                   _triton(triton_peers.tiled_call, word_bytes=8)),
        ]
    return methods + list(extra)


class Roofline:
    """One contiguous copy of the workload's total bytes per rotation set: what
    the memory system can do, the 1.0 every ratio is measured against."""
    key = ROOFLINE
    label = "one contiguous copy (roofline)"

    def __init__(self, total_bytes, rotations, device):
        self.srcs = [random_bytes((total_bytes,), device) for _ in range(rotations)]
        self.dsts = [torch.empty_like(s) for s in self.srcs]
        self.calls = [(lambda s=s, d=d: d.copy_(s)) for s, d in zip(self.srcs, self.dsts)]

    def poison(self):
        for d in self.dsts:
            d.copy_(random_bytes(d.shape, d.device))

    def check(self):
        bad = sum(int((s != d).sum()) for s, d in zip(self.srcs, self.dsts))
        return None if bad == 0 else f"{bad} bytes differ from the source"
