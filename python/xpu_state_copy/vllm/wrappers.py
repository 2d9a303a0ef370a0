"""Finding vLLM's own function behind whatever replaced it in its module: a profiler's timer, another plugin's
wrapper. functools.wraps leaves the way back in __wrapped__; a wrapper written without it usually still holds
the function it calls, in a closure cell, a default argument, an attribute, or a global its code reads. The
plugin routes the module-level batch_memcpy that vLLM's do_mamba_copy_block calls, so a wrapper that still
calls vLLM's function gets our copies too; whether it does is what this module checks, as far as it can."""
import functools
import inspect

_MOST_OBJECTS = 64  # how many objects one search looks into: wrappers nest a few deep, not more


def defined_in(function, module, name) -> bool:
    """Whether `function` is `name` as the source of `module` defines it (its code, which wrappers do not copy)."""
    code = getattr(function, "__code__", None)
    return (code is not None and code.co_name == name
            and code.co_filename == getattr(module, "__file__", None))


def _held_by(obj):
    """The objects a wrapper may call its original through."""
    held = [getattr(obj, "__wrapped__", None), getattr(obj, "__func__", None)]
    if isinstance(obj, functools.partial):
        held.append(obj.func)
    if inspect.isfunction(obj):
        held += [cell.cell_contents for cell in obj.__closure__ or () if cell.cell_contents is not None]
        held += list(obj.__defaults__ or ()) + list((obj.__kwdefaults__ or {}).values())
        held += [obj.__globals__.get(name) for name in obj.__code__.co_names]
    elif callable(obj) and not inspect.isclass(obj) and not inspect.ismodule(obj):
        held += list(getattr(obj, "__dict__", {}).values())  # a callable object holding the original
    return [h for h in held if h is not None and callable(h)]


def vllm_function(module, name):
    """vLLM's own `name` as `module` defines it, found from what `module.name` is now: that function itself, or
    the one a chain of wrappers leads to. None when nothing found there is vLLM's function."""
    seen, todo = set(), [getattr(module, name, None)]
    while todo and len(seen) < _MOST_OBJECTS:
        obj = todo.pop(0)
        if obj is None or id(obj) in seen:
            continue
        seen.add(id(obj))
        if defined_in(obj, module, name):
            return obj
        try:
            todo += _held_by(obj)
        except Exception:  # an object that does not let itself be read: nothing found through it
            continue
    return None


def describe(obj) -> str:
    """What replaced a function, for a warning: where its code was defined (a wrapper made with
    functools.wraps carries the wrapped function's names, but not its code)."""
    code = getattr(obj, "__code__", None)
    if code is not None:
        module = getattr(obj, "__globals__", {}).get("__name__", "?")
        return f"{module}.{getattr(code, 'co_qualname', code.co_name)} ({code.co_filename}:{code.co_firstlineno})"
    return f"a {type(obj).__module__}.{type(obj).__qualname__} object"
