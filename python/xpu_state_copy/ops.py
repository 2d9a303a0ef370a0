"""Thin Python wrappers over the registered ops, and their fake implementations for torch.compile."""
from typing import Sequence

import torch

from . import _loader  # noqa: F401  loads the compiled ops before anything refers to them

_ops = torch.ops.xpu_state_copy


def batch_memcpy(src_ptrs: torch.Tensor, dst_ptrs: torch.Tensor, sizes: torch.Tensor) -> None:
    """For every i, copy sizes[i] bytes from address src_ptrs[i] to address dst_ptrs[i], in one launch.

    Same argument order and dtypes as vLLM's ``batch_memcpy``: src_ptrs/dst_ptrs are 1-D contiguous
    torch.uint64 tables (torch.int64 holding the same bits is accepted too), sizes is 1-D contiguous int32 or
    int64 byte counts, all three on the device whose memory the addresses point into. Each entry is a
    memmove (its own source and destination may overlap); different entries must not overlap each other.
    The call is asynchronous on accelerators (enqueued on the current stream) and never reads sizes back.
    """
    _ops.batch_memcpy(src_ptrs, dst_ptrs, sizes)


def pointer_table(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """A torch.uint64 tensor, on the tensors' device, of their data_ptr() values, computed in C++."""
    tensors = list(tensors)
    if not tensors:
        return torch.empty(0, dtype=torch.uint64)
    return _ops.pointer_table(tensors)


def write_pointers_(table: torch.Tensor, tensors: Sequence[torch.Tensor], start: int = 0) -> torch.Tensor:
    """Write the tensors' data_ptr() values, bit-exact, into the 1-D int64/uint64 `table` at start...

    What ``table[idx] = tensor.data_ptr()`` means, without the Python int that overflows int64 for an XPU
    address. Returns `table`.
    """
    tensors = list(tensors)
    if tensors:
        _ops.write_pointers_(table, tensors, start)
    return table


@torch.library.register_fake("xpu_state_copy::batch_memcpy")
def _batch_memcpy_fake(src_ptrs, dst_ptrs, sizes):
    return None


@torch.library.register_fake("xpu_state_copy::_sycl_batch_memcpy")
def _sycl_batch_memcpy_fake(src_ptrs, dst_ptrs, sizes):
    return None


@torch.library.register_fake("xpu_state_copy::pointer_table")
def _pointer_table_fake(tensors):
    return torch.empty(len(tensors), dtype=torch.uint64, device=tensors[0].device)


@torch.library.register_fake("xpu_state_copy::write_pointers_")
def _write_pointers_fake(table, tensors, start=0):
    return None
