"""The build backend of pyproject.toml: setuptools', plus the environment's own site-packages.

A torch extension must compile against the torch that will import it. Under build isolation (a plain
`pip install .`) pip hides the environment's packages from the build, so `import torch` in setup.py would
fail or, had torch been listed as a build requirement, find a different torch with a different C++ ABI.
Putting the environment's site-packages back at the end of the path lets setup.py use the installed torch;
the isolated build's own packages (setuptools, wheel, ninja) still come first.
"""
import site
import sys

for _path in site.getsitepackages():
    if _path not in sys.path:
        sys.path.append(_path)

from setuptools.build_meta import *  # noqa: E402,F401,F403  (the PEP 517 hooks)
