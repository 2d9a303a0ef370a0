"""Run functions on a module right after its body has run, whoever imports it. The vLLM plugin patches
vllm.v1.worker.mamba_utils this way, without importing it (and vLLM's heavy imports) at registration, and
starts building the kernels (prebuild) when it is imported; ops.py keeps the raw op out of torch.compile's
graphs once torch._dynamo is imported, which our own import then need not do."""
import importlib.abc
import sys


class _LoaderThenCall(importlib.abc.Loader):
    """The module's own loader, followed by the call once the module body has run."""

    def __init__(self, loader, after_exec):
        self._loader, self._after_exec = loader, after_exec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._after_exec(module)

    def __getattr__(self, name):  # get_source, get_filename, ... stay the original loader's
        return getattr(self._loader, name)


class AfterImport(importlib.abc.MetaPathFinder):
    """Finds module `name` through the finders after it and has each of `calls` run on the module, in the
    order they were installed, once its body has."""

    def __init__(self, name, call):
        self.name, self.calls = name, [call]

    def _run_calls(self, module):
        for call in list(self.calls):
            call(module)

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _LoaderThenCall(spec.loader, self._run_calls)
                return spec
            if spec is not None:
                return None
        return None


def install(name, call):
    """Have call(module) run once module `name` is imported: one AfterImport per name, first on
    sys.meta_path, holding each call once (a second install of the same call adds nothing)."""
    for finder in sys.meta_path:
        if isinstance(finder, AfterImport) and finder.name == name:
            if call not in finder.calls:
                finder.calls.append(call)
            return
    sys.meta_path.insert(0, AfterImport(name, call))
