"""Where a Python module stores a raw ``data_ptr()`` into a table, found from its syntax tree.

A store such as ``self.state_base_addrs[idx] = state.data_ptr()`` overflows on XPU (the address has bit 63
set) when the table is an int64 tensor. Reading the module's syntax tree instead of matching its text means
no formatting hides a store: the value split over lines, wrapped in parentheses, written through a local
alias (``addr = state.data_ptr()`` then ``table[i] = addr``) or offset (``x.data_ptr() + off``) is still a
raw store. A value passed through any call first (``to_signed(x.data_ptr())``) is a converted store and is
not reported: the function it went through decides what is stored.
"""
import ast
import dataclasses
import inspect
import textwrap
from typing import List, Optional


def source_tree(obj) -> Optional[ast.Module]:
    """The syntax tree of a function's (or class's) source, unwrapped from decorators, or None where Python
    cannot show that source."""
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(obj))))
    except Exception:  # OSError, TypeError, SyntaxError, a __wrapped__ loop (ValueError): no source to read
        return None


@dataclasses.dataclass(frozen=True)
class PointerStore:
    """One ``<table>[...] = <raw address>`` statement."""

    function: str  # qualified name of the enclosing function, e.g. "Context._populate_metadata"
    table: str  # the subscripted expression as written, e.g. "self.state_base_addrs"
    self_attribute: Optional[str]  # "state_base_addrs" when the table is self.<attribute>, else None
    filename: str
    line: int

    def where(self) -> str:
        return f"{self.filename}:{self.line} ({self.function}: {self.table}[...] = <data_ptr()>)"


def _is_raw_address(node, raw_names) -> bool:
    """True when the value is a data_ptr() result reached without passing through any other call."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr == "data_ptr"
    if isinstance(node, ast.Name):
        return node.id in raw_names
    if isinstance(node, ast.BinOp):
        return _is_raw_address(node.left, raw_names) or _is_raw_address(node.right, raw_names)
    if isinstance(node, ast.UnaryOp):
        return _is_raw_address(node.operand, raw_names)
    if isinstance(node, ast.IfExp):
        return _is_raw_address(node.body, raw_names) or _is_raw_address(node.orelse, raw_names)
    return False


def self_attribute(node) -> Optional[str]:
    """"x" for the expression ``self.x``, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


class _StoreFinder(ast.NodeVisitor):
    def __init__(self, filename, line_offset):
        self.filename, self.line_offset = filename, line_offset
        self.scope: List[str] = []
        self.raw_names: List[set] = [set()]  # per function: local names holding a raw address
        self.stores: List[PointerStore] = []

    def _enter(self, node, is_function):
        self.scope.append(node.name)
        if is_function:
            self.raw_names.append(set())
        self.generic_visit(node)
        if is_function:
            self.raw_names.pop()
        self.scope.pop()

    def visit_ClassDef(self, node):
        self._enter(node, is_function=False)

    def visit_FunctionDef(self, node):
        self._enter(node, is_function=True)

    visit_AsyncFunctionDef = visit_FunctionDef

    def _assigned(self, targets, value, line):
        raw = value is not None and _is_raw_address(value, self.raw_names[-1])
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)):  # `a[i], b = x.data_ptr(), 1`: pair them up
                values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
                if values is not None and len(values) == len(target.elts):
                    for one_target, one_value in zip(target.elts, values):
                        self._assigned([one_target], one_value, line)
                continue
            if isinstance(target, ast.Name):  # an alias: later stores of this name are raw too
                (self.raw_names[-1].add if raw else self.raw_names[-1].discard)(target.id)
            elif isinstance(target, ast.Subscript) and raw:
                self.stores.append(PointerStore(
                    function=".".join(self.scope) or "<module>", table=ast.unparse(target.value),
                    self_attribute=self_attribute(target.value), filename=self.filename,
                    line=line + self.line_offset))

    def visit_Assign(self, node):
        self.generic_visit(node)
        self._assigned(node.targets, node.value, node.lineno)

    def visit_AnnAssign(self, node):
        self.generic_visit(node)
        self._assigned([node.target], node.value, node.lineno)


def find_pointer_stores(source: str, filename: str = "<source>", first_line: int = 1) -> List[PointerStore]:
    """Every raw data_ptr() store into a subscripted table in `source`, in source order.

    `first_line` is the line of `source`'s first line in `filename`, so reported lines are the file's.
    Raises SyntaxError when the source does not parse.
    """
    tree = ast.parse(textwrap.dedent(source), filename=filename)
    finder = _StoreFinder(filename, first_line - 1)
    finder.visit(tree)
    return finder.stores
