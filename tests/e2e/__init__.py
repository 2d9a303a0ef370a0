"""The end-to-end suite is a package so that its conftest.py is `e2e.conftest`, not a second top-level
`conftest` that would stand in for tests/conftest.py (whose helpers other test modules import by that name).
Its modules import one another by bare name, as the engine driver they start as a script does."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
