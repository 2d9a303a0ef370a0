"""The package's layout: the API and the loading of the compiled module at the top (xpu_state_copy), the
engine plugins above it (xpu_state_copy.vllm, xpu_state_copy.sglang), the command-line tools and benchmarks
above those. Imports flow only towards the top package, never between the two engines, and form no cycle.

The import graph is read from the installed sources with ast, imports inside functions included: a lazy
import is still a dependency, and both cycles this layout removed were lazy ones. Each subpackage is also
imported alone in a fresh interpreter, which must load nothing from a layer above it.
"""
import ast
import json
import os
import pathlib
import subprocess
import sys
import textwrap
from importlib.machinery import EXTENSION_SUFFIXES

import pytest

import xpu_state_copy

PACKAGE = pathlib.Path(xpu_state_copy.__file__).resolve().parent
TOP = "xpu_state_copy"
# Subpackage -> layer: a module may import only from its own subpackage or from a lower layer.
LAYERS = {TOP: 0, f"{TOP}.vllm": 1, f"{TOP}.sglang": 1, f"{TOP}.tools": 2, f"{TOP}.benchmarks": 2}


def module_files(root, name):
    """{dotted module name: path} for every module of the package at `root`, subfolders and compiled modules
    (_C, whose file is _C.<platform tag>.so) included."""
    modules = {}
    for path in sorted(root.rglob("*")):
        suffix = next((s for s in [".py"] + EXTENSION_SUFFIXES if path.name.endswith(s)), None)
        if suffix is None or "__pycache__" in path.parts:
            continue
        parts = (name,) + path.relative_to(root).parent.parts + (path.name[:-len(suffix)],)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def _nearest_module(target, modules):
    """`target` if it is a module, else the closest enclosing one (a name imported from a package)."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def import_graph(modules):
    """{module: set of modules of this package it imports anywhere in its body}."""
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        if path.suffix != ".py":  # a compiled module: it imports nothing of ours
            graph[name] = targets
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = ".".join(base[:len(base) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module
                # `from pkg import x` imports pkg.x when x is a module, else a name of pkg.
                targets.update(f"{base}.{alias.name}" for alias in node.names)
        graph[name] = {m for m in (_nearest_module(t, modules) for t in targets) if m and m != name}
    return graph


def find_cycle(graph):
    """One import cycle as a list [a, b, ..., a], or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def subpackage(module):
    """The entry of LAYERS a module belongs to. xpu_state_copy.__main__ (`python -m xpu_state_copy`) is the
    command line, so a tool, though it has to sit in the top package."""
    if module == f"{TOP}.__main__":
        return f"{TOP}.tools"
    parts = module.split(".")
    candidate = ".".join(parts[:2])
    return candidate if candidate in LAYERS else TOP


def layer_violations(graph):
    """Imports that go up a layer or across from one engine to the other."""
    wrong = []
    for source, targets in graph.items():
        for target in targets:
            here, there = subpackage(source), subpackage(target)
            if here != there and LAYERS[there] >= LAYERS[here]:
                wrong.append(f"{source} imports {target}")
    return sorted(wrong)


def test_the_import_graph_has_no_cycle_and_flows_towards_the_top():
    graph = import_graph(module_files(PACKAGE, TOP))
    assert {f"{TOP}.vllm.plugin", f"{TOP}.sglang.plugin", f"{TOP}.tools.cli", f"{TOP}.ops"} <= set(graph)
    assert f"{TOP}.vllm.compat" in graph[f"{TOP}.vllm.plugin"]  # the walk sees the imports it should
    assert find_cycle(graph) is None, f"import cycle: {' -> '.join(find_cycle(graph))}"
    assert layer_violations(graph) == []


def test_the_walk_finds_a_lazy_cycle_and_an_upward_import(tmp_path):
    """The checks above on a made-up package: the cycle hides in a function, the upward import in a method."""
    root = tmp_path / TOP
    for folder in (root / "vllm", root / "tools"):
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("from .ops import copy\n")
    (root / "ops.py").write_text("def copy():\n    from ._loader import load\n")
    (root / "_loader.py").write_text("from . import _C\n\ndef load():\n    from . import ops\n")
    (root / f"_C{EXTENSION_SUFFIXES[0]}").write_bytes(b"")
    (root / "vllm" / "plugin.py").write_text("from .. import ops\n")
    (root / "tools" / "cli.py").write_text("from ..vllm import plugin\n")
    (root / "device.py").write_text("class A:\n    def f(self):\n        import xpu_state_copy.tools.cli\n")
    graph = import_graph(module_files(root, TOP))
    assert graph[f"{TOP}.tools.cli"] == {f"{TOP}.vllm.plugin"} and graph[f"{TOP}.vllm.plugin"] == {f"{TOP}.ops"}
    assert graph[f"{TOP}._loader"] == {f"{TOP}._C", f"{TOP}.ops"}
    cycle = find_cycle(graph)
    assert cycle is not None and set(cycle) == {f"{TOP}.ops", f"{TOP}._loader"}
    assert layer_violations(graph) == [f"{TOP}.device imports {TOP}.tools.cli"]


# Imports every module of one subpackage in a fresh interpreter; prints the package modules then loaded.
IMPORT_ALONE = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
print(json.dumps(sorted(m for m in sys.modules if m == "xpu_state_copy" or m.startswith("xpu_state_copy."))))
"""


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_each_subpackage_imports_alone_and_loads_nothing_above_it(package):
    modules = [m for m in module_files(PACKAGE, TOP) if subpackage(m) == package and not m.endswith("__main__")]
    if not modules:
        pytest.skip(f"{package} is not installed beside {PACKAGE}")  # benchmarks: only in a built wheel
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PACKAGE.parent), os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, "-c", textwrap.dedent(IMPORT_ALONE), json.dumps(modules)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(modules) <= set(loaded)
    above = [m for m in loaded if subpackage(m) != package and LAYERS[subpackage(m)] >= LAYERS[package]]
    assert above == [], f"importing {package} loaded {above}"
