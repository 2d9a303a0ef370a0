"""The op as torch sees it: opcheck, torch.compile keeps the copy, backend() reports what runs."""
import os
import random
import subprocess
import sys

import pytest
import torch

import xpu_state_copy
from batches import assert_matches, random_batch
from conftest import HAS_CUDA, SYCL_ORIGIN


def test_opcheck_batch_memcpy(target):
    batch = random_batch(random.Random(), target.device, [64, 5000, 0, 123])
    torch.library.opcheck(torch.ops.xpu_state_copy.batch_memcpy.default, batch.tables())


# The pointer ops return the addresses of their inputs; opcheck's AOTDispatcher check runs the op on copies
# of the inputs (other addresses) and compares, which by design cannot match, so that one check is left out.
POINTER_OP_CHECKS = ("test_schema", "test_autograd_registration", "test_faketensor")


def test_opcheck_pointer_ops(target):
    tensors = [torch.empty(4, device=target.device), torch.empty(16, device=target.device)]
    torch.library.opcheck(torch.ops.xpu_state_copy.pointer_table.default, (tensors,), test_utils=POINTER_OP_CHECKS)
    table = torch.zeros(4, dtype=torch.int64, device=target.device)
    torch.library.opcheck(torch.ops.xpu_state_copy.write_pointers_.default, (table, tensors, 1),
                          test_utils=POINTER_OP_CHECKS)


def test_compiled_keeps_the_copy(target):
    batch = random_batch(random.Random(), target.device, [4096, 77, 100000])
    expected = batch.expected()
    src, dst, sizes = batch.tables()

    # Not fullgraph: the copy is a graph break on purpose (test_compile_order.py says why).
    @torch.compile(backend="aot_eager" if target.device.type == "cpu" else "inductor")
    def step(src, dst, sizes, x):
        xpu_state_copy.batch_memcpy(src, dst, sizes)
        return x + 1  # the copy's result is unused: it must still happen

    out = step(src, dst, sizes, torch.ones(2, device=target.device))
    assert out.tolist() == [2.0, 2.0]
    if target.device.type != "cpu":
        torch.cuda.synchronize() if target.device.type == "cuda" else torch.xpu.synchronize()
    assert_matches(batch, expected)


def test_backend_names(monkeypatch):
    monkeypatch.delenv("XPU_STATE_COPY_BACKEND", raising=False)
    assert xpu_state_copy.backend("cpu") == "cpu"
    monkeypatch.setenv("XPU_STATE_COPY_BACKEND", "cpu")
    assert xpu_state_copy.backend("cpu") == "cpu"
    monkeypatch.setenv("XPU_STATE_COPY_BACKEND", "sycl")
    if SYCL_ORIGIN is None:
        with pytest.raises(xpu_state_copy.BackendUnavailable, match="intel-sycl-rt"):
            xpu_state_copy.backend("cpu")
    else:
        assert xpu_state_copy.backend("cpu") == SYCL_ORIGIN


@pytest.mark.skipif(HAS_CUDA, reason="this build has CUDA")
def test_cuda_backend_unavailable_says_why():
    with pytest.raises(xpu_state_copy.BackendUnavailable, match="built without CUDA"):
        xpu_state_copy.backend("cuda")


# A fresh interpreter: whether importing us imports torch._dynamo, and whether the raw op still breaks a
# graph when torch._dynamo is imported afterwards (the registration waits for that import).
LAZY_DYNAMO = """
import sys
import torch
import xpu_state_copy
assert "torch._dynamo" not in sys.modules, "importing xpu_state_copy imported torch._dynamo"
import torch._dynamo

def step(src, dst, sizes, x):
    torch.ops.xpu_state_copy.batch_memcpy(src, dst, sizes)
    return x + 1

arena = torch.zeros(64, dtype=torch.uint8)
tables = (xpu_state_copy.pointer_table([arena[:8]]), xpu_state_copy.pointer_table([arena[32:]]), torch.tensor([8]))
graphs = []

def record(graph_module, example_inputs):
    graphs.append(str(graph_module.graph))
    return graph_module

torch.compile(step, backend=record)(*tables, torch.ones(3))
print("graphs", len(graphs), "with the copy", sum("batch_memcpy" in g for g in graphs))
"""


def test_dynamo_is_imported_only_by_whoever_compiles(tmp_path):
    env = dict(os.environ, XPU_STATE_COPY_BACKEND="cpu")
    run = subprocess.run([sys.executable, "-c", LAZY_DYNAMO], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "graphs 1 with the copy 0" in run.stdout, run.stdout + run.stderr[-3000:]
