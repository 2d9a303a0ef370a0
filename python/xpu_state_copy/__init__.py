"""xpu_state_copy: overflow-proof batched copies of Mamba/GDN recurrent states.

XPU device addresses have bit 63 set; as Python ints they overflow int64 tables and Triton address
arithmetic. Here addresses are taken from tensors in C++ and copied by one kernel launch (SYCL on Intel
GPUs and the OpenCL CPU device, a CUDA twin on NVIDIA GPUs, memmove on plain CPU tensors).
"""
from ._build import TorchVersionMismatch, build_info
from ._loader import BackendUnavailable, backend, sycl_status
from .ops import (STATE_KINDS, batch_memcpy, copy_states_, mamba_spec_decode_postprocess_,
                  mamba_spec_decode_precopy_, pointer_table, write_pointers_)
from .pointers import as_signed, as_unsigned
from .validate import UnsafeBatch, validate_batch

__version__ = "0.1.0"

__all__ = [
    "BackendUnavailable",
    "STATE_KINDS",
    "TorchVersionMismatch",
    "UnsafeBatch",
    "as_signed",
    "as_unsigned",
    "backend",
    "batch_memcpy",
    "build_info",
    "copy_states_",
    "mamba_spec_decode_postprocess_",
    "mamba_spec_decode_precopy_",
    "pointer_table",
    "sycl_status",
    "validate_batch",
    "write_pointers_",
]
