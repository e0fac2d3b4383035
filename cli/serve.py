"""`smct serve`: the forecasting API under uvicorn, one or several worker processes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer


def serve(
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    artifact: Annotated[Optional[Path], typer.Option(help="default: $SMCT_ARTIFACT")] = None,  # noqa: UP045
    workers: Annotated[
        Optional[int],  # noqa: UP045
        typer.Option(help="worker processes, each with the model (default: $SMCT_WORKERS, 1); "
                     "more than one needs SMCT_REDIS_URL"),
    ] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level")] = "info",
) -> None:
    """Serve the forecasting API (service.main:app) with uvicorn; settings come from SMCT_*.

    One process serves about one core's worth of requests (its event loop and its model thread
    share Python's lock); `--workers N` runs N, which share the series through Redis and one
    /metrics exposition (prometheus_client's multiprocess mode, in $PROMETHEUS_MULTIPROC_DIR
    or a temporary folder)."""
    import os
    import tempfile
    from contextlib import ExitStack

    from pydantic import ValidationError

    from service.metrics import MULTIPROC_ENV, prepare_multiprocess_dir
    from service.settings import MAX_WORKERS, Settings

    if artifact is not None:
        os.environ["SMCT_ARTIFACT"] = str(artifact)
    try:
        settings = Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"SMCT_{'_'.join(str(part) for part in e['loc']).upper()}: {e['msg']}"
            for e in exc.errors()
        )
        raise typer.BadParameter(f"the SMCT_ environment is not valid: {problems}") from exc
    _check_artifact(settings.artifact)
    n = settings.workers if workers is None else workers
    if not 1 <= n <= MAX_WORKERS:
        raise typer.BadParameter(
            f"--workers must be between 1 and {MAX_WORKERS}, got {n}", param_hint="--workers"
        )
    if n > 1 and not settings.redis_url:
        raise typer.BadParameter(
            f"{n} workers would each keep their own series in the embedded store (a series "
            "created through one would be unknown to the others); set SMCT_REDIS_URL to a "
            "Redis they share, or serve with one worker", param_hint="--workers",
        )
    with ExitStack() as stack:
        given = os.environ.get(MULTIPROC_ENV)
        if n > 1 or given:
            directory = Path(given) if given else Path(
                stack.enter_context(tempfile.TemporaryDirectory(prefix="smct-metrics-"))
            )
            try:
                prepare_multiprocess_dir(directory)
            except OSError as exc:
                raise typer.BadParameter(
                    f"{MULTIPROC_ENV}={directory} cannot hold the workers' metrics ({exc}); "
                    "point it at a writable folder, or unset it",
                ) from exc
            os.environ[MULTIPROC_ENV] = str(directory)  # read by each worker's prometheus_client
            stack.callback(_restore_env, MULTIPROC_ENV, given)
        code = _run_server(host, port, log_level, n)
    if code:
        raise typer.Exit(code)


def _run_server(host: str, port: int, log_level: str, workers: int) -> int:
    """uvicorn on service.main:app; -> 0, or 3 when a worker failed to start (uvicorn.run
    says so for one process only, so several run under its supervisor here)."""
    import uvicorn
    from uvicorn.main import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    from service.protocol import JsonErrorsProtocol

    options: dict[str, Any] = {
        "host": host, "port": port, "log_level": log_level, "timeout_graceful_shutdown": 10,
        "http": JsonErrorsProtocol,  # unreadable requests answered in the JSON error body
    }
    if workers == 1:
        uvicorn.run("service.main:app", **options)  # exits 3 itself when start-up fails
        return 0
    config = uvicorn.Config("service.main:app", workers=workers, **options)
    supervisor = Multiprocess(config, sockets=[config.bind_socket()])
    try:
        supervisor.run()
    except KeyboardInterrupt:
        pass
    failed = any(p.exitcode == STARTUP_FAILURE for p in supervisor.processes)
    return STARTUP_FAILURE if failed else 0


def _restore_env(name: str, value: str | None) -> None:
    import os

    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def _check_artifact(path: Path) -> None:
    """A usage error, before any worker starts, where `path` holds nothing to serve."""
    from model.artifacts.artifact import ArtifactError
    from model.runtime.serving import manifest

    try:
        manifest.servable(path)
    except ArtifactError as exc:
        raise typer.BadParameter(str(exc), param_hint="--artifact / SMCT_ARTIFACT") from None
