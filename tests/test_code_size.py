"""Small modules and functions: no source module over MAX_MODULE_LINES lines, no function whose
body (its docstring aside) is over MAX_FUNCTION_LINES; ruff bounds their complexity
(pyproject.toml: C90, PLR0912, PLR0915)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("model", "training", "service", "cli", "timeseries", "client/smct_client")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
SOURCES = sorted(path for pkg in PACKAGES for path in (REPO / pkg).rglob("*.py"))


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


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
    lines = len(text.splitlines())
    assert lines <= MAX_MODULE_LINES, (
        f"{_rel(path)} has {lines} lines (at most {MAX_MODULE_LINES}): split it by job"
    )
    long = [
        f"{node.name} (line {node.lineno}): {_body_lines(node)} lines"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _body_lines(node) > MAX_FUNCTION_LINES
    ]
    assert not long, f"{_rel(path)}: functions over {MAX_FUNCTION_LINES} lines: {long}"
