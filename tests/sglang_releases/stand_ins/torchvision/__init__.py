"""A stand-in for torchvision in the SGLang release tests (see sglang_envs.py): importable, with every
submodule and attribute, so SGLang's model configs import; anything called raises. Nothing of SGLang's
state copies uses it."""
import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.28.0"  # what torch 2.13 pairs with; transformers reads it


class _Missing:
    """Any name of torchvision: attributes are more of the same, calling one says it is a stand-in."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name}: torchvision is a stand-in in this test environment")

    def __mro_entries__(self, bases):  # a class deriving from one derives from object
        return (object,)

    def __or__(self, other):  # in type annotations
        return self

    __ror__ = __or__


class _StandInModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{self.__name__}.{attr}")


class _Submodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StandInModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Submodules())
sys.modules[__name__].__class__ = _StandInModule
