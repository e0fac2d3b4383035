"""Small modules and functions: no source module over MAX_MODULE_LINES lines of code (its
docstrings, comments and blank lines aside: a docstring that says what and why costs nothing),
no function whose body (its docstring aside) is over MAX_FUNCTION_LINES; ruff bounds their
complexity (pyproject.toml: C90, PLR0912, PLR0915)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "training", "service", "cli", "timeseries", "client/smct_client")
MAX_MODULE_LINES = 500  # of code
MAX_FUNCTION_LINES = 60
SOURCES = sorted(path for pkg in PACKAGES for path in (REPO / pkg).rglob("*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


def code_lines(text: str) -> int:
    """The lines of `text` that are code: not in a docstring (a module's, a class's or a
    function's), not blank, not a comment alone."""
    docs: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                docs.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return sum(
        1 for i, line in enumerate(text.splitlines(), 1)
        if i not in docs and line.strip() and not line.lstrip().startswith("#")
    )


def test_code_lines_leave_out_docstrings_comments_and_blank_lines() -> None:
    text = '''"""A module.

Its docstring."""

import os  # a comment after code counts


class A:
    """A class."""

    # a comment alone
    def f(self) -> str:
        """A function."""
        return "not a docstring"
'''
    assert code_lines(text) == 4  # import, class, def, return


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    return (node.end_lineno or body[-1].lineno) - body[0].lineno + 1


def test_the_sources_are_found() -> None:
    assert len(SOURCES) > 50


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_modules_and_functions_are_small(path: Path) -> None:
    text = path.read_text()
    lines = code_lines(text)
    assert lines <= MAX_MODULE_LINES, (
        f"{_rel(path)} has {lines} lines of code (at most {MAX_MODULE_LINES}): split it by job"
    )
    long = [
        f"{node.name} (line {node.lineno}): {_body_lines(node)} lines"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _body_lines(node) > MAX_FUNCTION_LINES
    ]
    assert not long, f"{_rel(path)}: functions over {MAX_FUNCTION_LINES} lines: {long}"
