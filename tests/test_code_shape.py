"""Rooms the size of one job (README, "How it is built"): no module of dh_cli over 400 lines
and no function over 60, counted from its `def` line to its last line."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dh_cli"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60


def function_lengths(source: str) -> dict[str, int]:
    """Lines of every function and method, nested ones too, by qualified name (Class.method)."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    lengths[name] = child.end_lineno - child.lineno + 1
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return lengths


def modules() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def long_functions() -> dict[str, int]:
    return {f"{rel}:{name}": lines for rel, source in modules().items()
            for name, lines in function_lengths(source).items() if lines > MAX_FUNCTION_LINES}


def test_the_counter_measures_functions_methods_and_nested_ones():
    source = "def f():\n    x = 1\n\n    def g():\n        pass\n    return x\n\n\nclass C:\n    def m(self):\n        pass\n"
    assert function_lengths(source) == {"f": 6, "f.g": 2, "C.m": 2}


def test_no_module_is_over_400_lines():
    over = {rel: len(source.splitlines()) for rel, source in modules().items()
            if len(source.splitlines()) > MAX_MODULE_LINES}
    assert over == {}, f"split these by job: {over}"


def test_no_function_is_over_60_lines():
    over = long_functions()
    assert over == {}, f"shorten these: {over}"
