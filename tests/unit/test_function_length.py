"""No function of deploytool runs over MAX_LINES lines of its own (nested functions and classes count as theirs,
not their parent's) unless its docstring says why, with a line starting "Long:" — STYLE.md's small, readable
modules, checked rather than hoped for."""

from __future__ import annotations

import ast
from pathlib import Path

MAX_LINES = 60  # issue 37 counts functions over 60 lines
PACKAGE = Path(__file__).resolve().parents[2] / "deploytool"
Function = ast.FunctionDef | ast.AsyncFunctionDef


def span(n: Function | ast.ClassDef) -> tuple[int, int]:
    """A parsed function's or class's first and last line (the parser always sets end_lineno)."""
    assert n.end_lineno is not None
    return n.lineno, n.end_lineno


def own_lines(fn: Function) -> int:
    """Lines of `fn` less those of the functions and classes defined inside it."""
    inside = [n for n in ast.walk(fn)
              if n is not fn and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    nested = sum(span(n)[1] - span(n)[0] + 1 for n in inside
                 if not any(m is not n and span(m)[0] <= span(n)[0] and span(n)[1] <= span(m)[1] for m in inside))
    first, last = span(fn)
    return last - first + 1 - nested


def too_long(source: str, where: str = "") -> list[str]:
    out = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and own_lines(n) > MAX_LINES:
            doc = ast.get_docstring(n) or ""
            if not any(line.strip().startswith("Long:") for line in doc.splitlines()):
                out.append(f"{where}{n.name} ({own_lines(n)} lines)")
    return out


def test_the_rule_counts_a_functions_own_lines_and_accepts_a_stated_reason():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    assert too_long(f"def f():\n{body}\n") == [f"f ({MAX_LINES + 1} lines)"]
    assert too_long(f'def f():\n    """Long: a table."""\n{body}\n') == []
    inner = "\n".join(f"        y{i} = {i}" for i in range(MAX_LINES))
    assert too_long(f"def outer():\n    def inner():\n{inner}\n    return inner\n") == [f"inner ({MAX_LINES + 1} lines)"]


def test_no_function_is_long_without_a_reason():
    found = [x for p in sorted(PACKAGE.rglob("*.py")) for x in too_long(p.read_text(), f"{p.relative_to(PACKAGE)}: ")]
    assert not found, f"split these or say why in a 'Long:' docstring line: {found}"
