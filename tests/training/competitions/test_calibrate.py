"""The horizon calibration (training/competitions/calibrate.py): the fit against forecasters of
known miscalibration, and `smct calibrate` end to end on a subset of M1, writing a copy of the
default model's manifest."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from scipy.stats import norm
from typer.testing import CliRunner

from cli.app import app
from model.artifacts.artifact import Artifact
from model.series.spread import series_growth
from tests.model.conftest import variant
from training.competitions.calibrate import NONE, candidates, fit_growth
from training.competitions.scores import LEVELS, QUANTILES, Forecasts, Scores, score

ROOT = Path(__file__).resolve().parents[3]
N, H = 4000, 8


def _gaussian_scores(true: tuple[float, float], seed: int) -> object:
    """Scores at (g, length) of Gaussian forecasts N(100, sd^2), sd = h^(g min(1, length / t)),
    of outcomes drawn with the true (g, length), for series whose records t run from 10 to 200
    values (100 away from 0, so that WQL's scale, the mean |y|, is steady)."""
    steps = np.arange(1, H + 1, dtype=np.float64)
    rng = np.random.default_rng(seed)
    seen = rng.integers(10, 200, N)
    histories = [np.full(10, 100.0) + np.arange(10) for _ in range(N)]

    def sd(g: float, length: float) -> np.ndarray:
        return steps[None, :] ** series_growth(g, length, seen)[:, None]  # (N, H)

    truth = 100.0 + rng.standard_normal((N, H)) * sd(*true)

    def at(g: float, length: float) -> list[Scores]:
        s = sd(g, length)
        q = np.stack([100.0 + norm.ppf(p) * s for p in QUANTILES], axis=-1)
        intervals = {lv: (100.0 - norm.ppf(0.5 + lv / 2) * s, 100.0 + norm.ppf(0.5 + lv / 2) * s)
                     for lv in LEVELS}
        return [score(truth, Forecasts(q, np.full((N, H), 100.0), intervals), histories, 1)]

    return at


def test_the_fit_finds_the_growth_the_outcomes_have() -> None:
    """Outcomes whose spread grows as h^0.3, fading past 50 values, about forecasts grown by each
    candidate: the fit keeps (0.3, 50) (N x H = 32,000 outcomes: WQL's minimum is sharp to the
    grid); a growth that never fades: (0.3, inf); outcomes the forecasts already cover: none."""
    tried = candidates(lengths=(25.0, 50.0, 100.0, math.inf))
    for true, seed in (((0.3, 50.0), 0), ((0.3, math.inf), 1), (NONE, 2)):
        fit = fit_growth(_gaussian_scores(true, seed), ["synthetic"], tried)
        assert fit.kept == true, (true, {c: round(fit.relative(c), 5) for c in tried})
        assert fit.relative(fit.kept) <= min(fit.relative(c) for c in tried)
    record = fit_growth(_gaussian_scores((0.3, 50.0), 0), ["synthetic"], tried).record(1)
    assert record["horizon_growth"] == 0.3 and record["growth_length"] == 50.0
    flat = fit_growth(lambda g, n: [Scores(1.0, 1.0, 1.0, {0.8: 0.8}, {}, {}, 0.5)], ["flat"],
                      tried=[NONE, (0.1, 50.0)])
    assert flat.kept == NONE and "growth_length" not in flat.record(1)


def test_the_command_writes_the_fit_into_the_artifact(tmp_path: Path) -> None:
    """On every 60th series of M1: the record names the candidate kept, the series and each
    candidate's scores; the model id is the default's; --dry-run leaves the manifest."""
    copy = variant(ROOT / "artifacts" / "default", tmp_path / "default")
    before = (copy / "manifest.json").read_text()
    res = CliRunner().invoke(app, ["calibrate", "--artifact", str(copy), "--every", "60",
                                   "--threads", "1", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert (copy / "manifest.json").read_text() == before
    res = CliRunner().invoke(app, ["calibrate", "--artifact", str(copy), "--every", "60",
                                   "--threads", "1"])
    assert res.exit_code == 0, res.output
    record = json.loads((copy / "manifest.json").read_text())["calibration"]
    kept = (record["horizon_growth"], record.get("growth_length", math.inf))
    assert kept in candidates() and "every 60th" in record["fitted_on"]
    assert len(record["wql"]) == len(candidates()) and "0.00" in record["wql"]
    assert all(len(v) == 3 for v in record["wql"].values())  # M1's three frequencies
    assert f"horizon growth {kept[0]:.2f}" in res.output
    assert Artifact.open(copy).model_id == Artifact.open(ROOT / "artifacts" / "default").model_id
