"""`smct serve`: uvicorn on service.main:app with the given host, port and artifact."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from training.cli import app


def test_serve_runs_uvicorn_on_the_service_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import uvicorn

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.append((a, kw)))
    monkeypatch.setenv("SMCT_ARTIFACT", "unset")  # restored after the test
    result = CliRunner().invoke(
        app, ["serve", "--host", "0.0.0.0", "--port", "9123", "--artifact", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    ((args, kwargs),) = calls
    assert args == ("service.main:app",)
    assert kwargs["host"] == "0.0.0.0" and kwargs["port"] == 9123
    assert os.environ["SMCT_ARTIFACT"] == str(tmp_path)


def test_serve_defaults_to_localhost_8000(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.append(kw))
    assert CliRunner().invoke(app, ["serve"]).exit_code == 0
    assert (calls[0]["host"], calls[0]["port"]) == ("127.0.0.1", 8000)
