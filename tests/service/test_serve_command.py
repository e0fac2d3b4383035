"""`smct serve`: uvicorn on service.main:app with the given host, port and artifact."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cli.app import app

REPO = Path(__file__).resolve().parents[2]


def test_serve_runs_uvicorn_on_the_service_app(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import uvicorn

    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.append((a, kw)))
    monkeypatch.setenv("SMCT_ARTIFACT", "unset")  # restored after the test
    (tmp_path / "manifest.json").write_text('{"type": "smct-artifact"}')  # read at start-up
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


def test_several_workers_need_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded store lives in one process: a series PUT through one worker would be a 404
    through another. Refused before anything starts, saying what to set."""
    import cli.serve as cli

    calls: list[Any] = []
    monkeypatch.setattr(cli, "_run_server", lambda *a: calls.append(a) or 0)
    monkeypatch.delenv("SMCT_REDIS_URL", raising=False)
    for argv, env in ((["serve", "--workers", "2"], {}), (["serve"], {"SMCT_WORKERS": "3"})):
        result = CliRunner().invoke(app, argv, env=env)
        assert result.exit_code == 2, result.output
        assert "SMCT_REDIS_URL" in result.output and "one worker" in result.output
    for bad in ("0", "300"):
        result = CliRunner().invoke(app, ["serve", "--workers", bad])
        assert result.exit_code == 2 and "between 1 and 256" in result.output, result.output
    assert calls == []


def test_a_bad_environment_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import cli.serve as cli

    monkeypatch.setattr(cli, "_run_server", lambda *a: 0)
    result = CliRunner().invoke(app, ["serve"], env={"SMCT_LEVELS": "abc"})
    assert result.exit_code == 2, result.output
    assert "SMCT_LEVELS" in result.output and "pydantic.dev" not in result.output
    monkeypatch.setenv("SMCT_REDIS_URL", "redis://127.0.0.1:1/0")
    result = CliRunner().invoke(
        app, ["serve", "--workers", "2"], env={"PROMETHEUS_MULTIPROC_DIR": "/proc/no/such"}
    )
    assert result.exit_code == 2 and "writable folder" in result.output, result.output


def test_workers_share_one_metrics_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With Redis, `--workers N` runs N uvicorn workers; prometheus_client's multiprocess folder
    is set for them (a temporary one, removed afterwards), and put back as it was."""
    import cli.serve as cli
    from service.metrics import MULTIPROC_ENV

    seen: list[tuple[int, str | None, bool]] = []

    def run(host: str, port: int, log_level: str, workers: int) -> int:
        folder = os.environ.get(MULTIPROC_ENV)
        seen.append((workers, folder, folder is not None and Path(folder).is_dir()))
        return 0

    monkeypatch.setattr(cli, "_run_server", run)
    monkeypatch.setenv("SMCT_REDIS_URL", "redis://127.0.0.1:1/0")  # not reached: run is fake
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    assert CliRunner().invoke(app, ["serve", "--workers", "2"]).exit_code == 0
    monkeypatch.setenv("SMCT_WORKERS", "3")
    assert CliRunner().invoke(app, ["serve"]).exit_code == 0
    (first, folder, existed), (second, _, _) = seen
    assert first == 2 and second == 3
    assert folder is not None and existed and not Path(folder).exists()  # removed after
    assert MULTIPROC_ENV not in os.environ

    # a folder of the operator's (a volume): emptied of earlier runs' files, and kept
    mine = tmp_path / "prom"
    mine.mkdir()
    (mine / "counter_1.db").write_bytes(b"stale")
    (mine / "notes.txt").write_text("not ours")
    monkeypatch.setenv(MULTIPROC_ENV, str(mine))
    assert CliRunner().invoke(app, ["serve", "--workers", "2"]).exit_code == 0
    assert seen[-1][1] == str(mine) and os.environ[MULTIPROC_ENV] == str(mine)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_one_worker_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from service.metrics import MULTIPROC_ENV

    calls: list[tuple[dict[str, Any], str | None]] = []
    monkeypatch.setattr(
        uvicorn, "run", lambda *a, **kw: calls.append((kw, os.environ.get(MULTIPROC_ENV)))
    )
    monkeypatch.delenv("SMCT_WORKERS", raising=False)
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    assert CliRunner().invoke(app, ["serve"]).exit_code == 0
    ((kwargs, folder),) = calls
    assert "workers" not in kwargs and folder is None  # uvicorn's one process, as before


def test_workers_that_cannot_start_fail_the_command(tmp_path: Path) -> None:
    """uvicorn.run exits 0 when the workers of a multi-process run fail at start-up (it says 3
    for one process only): `smct serve --workers 2` exits 3, as with one worker."""
    broken = tmp_path / "broken"  # an artifact by its manifest, whose files are missing
    broken.mkdir()
    (broken / "manifest.json").write_text('{"type": "smct-artifact", "format_version": 2}')
    env = {
        **os.environ, "SMCT_ARTIFACT": str(broken),
        "SMCT_REDIS_URL": "redis://127.0.0.1:1/0", "PYTHONPATH": str(REPO),
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "cli.app", "serve", "--workers", "2", "--port", "0",
         "--log-level", "critical"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=180, check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr


def test_what_cannot_be_served_is_a_usage_error(tmp_path: Path) -> None:
    """A path that does not exist, or a training checkpoint, is refused before any worker
    starts, with what to do."""
    checkpoint = tmp_path / "run"
    checkpoint.mkdir()
    for name in ("model_config.json", "weights.pt"):
        (checkpoint / name).write_text("{}")
    for path, message in ((tmp_path / "missing", "does not exist"),
                          (checkpoint, "is a checkpoint, not an artifact")):
        result = CliRunner().invoke(app, ["serve", "--artifact", str(path)])
        flat = " ".join(result.output.replace("│", " ").split())
        assert result.exit_code == 2 and message in flat, result.output
