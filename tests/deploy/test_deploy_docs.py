"""docs/deployment.md and docs/scaling.md: the files they name exist, the key facts are there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = ("docs/deployment.md", "docs/scaling.md")


@pytest.mark.parametrize("doc", DOCS)
def test_named_repository_paths_exist(doc: str) -> None:
    text = (REPO / doc).read_text()
    paths = set(
        re.findall(r"`((?:docker|deploy|docs|tests)/[\w./-]*\w|docker-compose\.yml)`", text)
    )
    assert paths
    missing = sorted(path for path in paths if not (REPO / path).exists())
    assert not missing, f"{doc} names paths that do not exist: {missing}"


def test_deployment_covers_compose_and_every_kustomization() -> None:
    text = (REPO / "docs" / "deployment.md").read_text()
    assert "docker compose --profile train run --rm trainer" in text
    for path in (REPO / "deploy").glob("*/*/kustomization.yaml"):
        assert f"deploy/{path.parent.relative_to(REPO / 'deploy')}" in text
    assert "deploy/train" in text and "smct-secrets" in text


def test_scaling_covers_sizing_sharding_and_benchmark() -> None:
    text = (REPO / "docs" / "scaling.md").read_text()
    assert "smct:{<series_id>}:state" in text
    assert "hash tag" in text
    # the sizing is computed from the service's defaults: the doc must name them as they are
    from service.settings import Settings

    defaults = Settings()
    assert f"`SMCT_IDEMPOTENCY_WINDOW` writes\n  (default {defaults.idempotency_window})" in text
    assert f"`SMCT_EVENTS_MAXLEN` events (default {defaults.events_maxlen}," in text
    # the throughput figures live in docs/performance.md, with the command that measures them
    assert "benchmark figures in [performance.md](performance.md" in " ".join(text.split())
    performance = (REPO / "docs" / "performance.md").read_text()
    assert "`python bench/bench_service.py --artifact artifacts/default" in performance
    assert "SMCT_BATCH_MAX_SIZE" in text and "SMCT_BATCH_MAX_WAIT_MS" in text
