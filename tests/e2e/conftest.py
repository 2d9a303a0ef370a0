"""Fixtures of the end-to-end suite (engine_runs.py)."""
from engine_runs import all_runs, release  # noqa: F401 (fixtures)
