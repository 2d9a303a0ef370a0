"""copy_states_ keeps a few device plans cached. A plan used by a kernel on one stream and then evicted by
calls on another stream must stay allocated until that kernel has read it: the caching allocator only knows
the stream a plan was allocated on, and would hand its memory to the next allocation there while the kernel,
held up on its own stream, has not run yet. Needs CUDA (run by scripts/device_cuda.sh on a GPU)."""
import pytest
import torch

import xpu_state_copy
from conftest import HAS_CUDA

needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device and a CUDA build")

CACHED_PLANS = 8  # device_state_plan keeps this many
# 50 states make a plan of 50 * 7 int64 = 2800 bytes, which the caching allocator rounds to 3072: a size no
# other tensor here has (each pool is 1920 bytes, rounded to 2048), so the first plan allocated after the
# eviction takes exactly the evicted plan's block when nothing protects it.
STATES = 50


def _pools(n_states=STATES, blocks=4):
    return [torch.randn(blocks, 3, 40, device="cuda") for _ in range(n_states)]


@needs_cuda
@pytest.mark.parametrize("rounds", [3])
def test_evicted_plan_outlives_a_kernel_on_another_stream(rounds):
    for _ in range(rounds):
        ids = lambda v: torch.tensor([v], device="cuda")  # noqa: E731
        pools = _pools()
        kinds = ["whole"] * STATES
        # The plan is built and allocated on the default stream.
        xpu_state_copy.copy_states_(pools, kinds, ids(-1), ids(-1), ids(0))
        src, dst, shifts = ids(0), ids(1), ids(0)
        others = [_pools() for _ in range(2 * CACHED_PLANS)]
        others_before = [[p.clone() for p in o] for o in others]
        skip = ids(-1)
        expected = [p.clone() for p in pools]
        for e in expected:
            e[1] = e[0]
        torch.cuda.synchronize()

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(1_000_000_000)  # hold the kernel back (about half a second)
            xpu_state_copy.copy_states_(pools, kinds, src, dst, shifts)  # cache hit: the default-stream plan
        # Meanwhile on the default stream: enough new plans to evict that one, whose memory the next
        # allocations here would reuse and overwrite at once.
        for o in others:
            xpu_state_copy.copy_states_(o, kinds, skip, skip, skip)
        torch.cuda.synchronize()
        for got, want in zip(pools, expected):
            assert torch.equal(got, want), "the kernel on the side stream read an evicted plan"
        for o, before in zip(others, others_before):
            assert all(torch.equal(a, b) for a, b in zip(o, before)), "a skipped request wrote"
