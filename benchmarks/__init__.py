"""Benchmark for xpu_state_copy.batch_memcpy against the peers vLLM could use.

Installed as ``xpu_state_copy.benchmarks``; run with ``xpu-state-copy bench``
or ``python -m xpu_state_copy bench``.  Modules import each other relatively so
the same files work from the source tree (``python -m benchmarks.run``).
"""
