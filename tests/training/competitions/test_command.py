"""`smct competitions`: the acceptance checks on constructed results, and the command end to
end on a stratified subset of M3 (every 60th series) with the peers."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cli.app import app
from model.runtime.runtime import Runtime
from tests.docs.test_manual import TABLE_HEADING
from training.competitions.data import load_task
from training.competitions.forecasters import model_forecasts
from training.competitions.report import markdown
from training.competitions.run import TaskResult, acceptance
from training.competitions.scores import Scores
from training.quality.report import Setting

ROOT = Path(__file__).resolve().parents[3]


def _scores(wql: float, cover: float) -> Scores:
    return Scores(wql, 1.0, 10.0, {0.8: cover, 0.95: 0.9}, {0.8: np.array([cover])},
                  {0.8: (1.0 - cover) / 2, 0.95: 0.05}, 0.5)


def _result(frequency: str, model: float, ablation: float, ets: float, cover: tuple[float, float],
            competition: str = "m3") -> TaskResult:
    task = load_task(competition, frequency).stratified(1000)
    return TaskResult(task, 1000, {"model": _scores(model, cover[0]),
                                   "ablation": _scores(ablation, cover[1]),
                                   "ETS": _scores(ets, 0.7)})


def test_acceptance_checks_hold_only_where_every_frequency_meets_them() -> None:
    good = [_result(f, 0.090, 0.100, 0.095, (0.80, 0.78))
            for f in ("monthly", "quarterly", "yearly")]
    good.append(_result("monthly", 0.09, 0.1, 0.1, (0.8, 0.8), "tourism"))
    checks = {c.name: c for c in acceptance(good)}
    assert all(c.passed for c in checks.values()), checks
    assert checks["M3 model/ablation WQL, geometric mean <= 0.92"].measured == "0.900"
    # one frequency where the model loses to its ablation, ETS and its coverage
    bad = good[:2] + [_result("yearly", 0.105, 0.100, 0.095, (0.70, 0.78))] + good[3:]
    failed = {c.name for c in acceptance(bad) if not c.passed}
    assert failed == {"M3 model/ablation WQL <= 0.95 each", "M3 WQL at or below AutoETS's",
                      "M3 80 % coverage over the horizon >= the ablation's",
                      "M3 model/ablation WQL, geometric mean <= 0.92"}  # (0.9 0.9 1.05)^(1/3)
    assert acceptance([]) == []


@pytest.mark.timeout(900)
def test_the_command_on_a_subset_of_m3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = tmp_path / "competitions.md"
    res = CliRunner().invoke(app, [
        "competitions", "--artifact", str(ROOT / "artifacts" / "default"), "--competition", "m3",
        "--every", "60", "--threads", "1", "--output", str(out),
    ])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "| WQL | M3 monthly (24, h 18) | M3 quarterly (13, h 8) | M3 yearly (11, h 6) |" in text
    for row in ("model", "ablation", "model/ablation", "ETS (statsforecast, here)",
                "ARIMA (statsforecast, here)", "Theta (statsforecast, here)",
                "seasonal naive (statsforecast, here)"):
        assert f"| {row} |" in text
    assert "(fev) |" not in text  # a subset's figures are not set beside the published ones
    verdicts = re.findall(r"\| (PASS|FAIL) \|$", text, flags=re.M)
    assert len(verdicts) == 4  # M3's four checks
    headings = [line for line in text.splitlines() if line.startswith("`smct competitions")]
    assert len(headings) == 8 and all(TABLE_HEADING.match(line) for line in headings)
    assert "| model | " in text.split("## Which side the misses fall on")[1]
    by_length = text.split("## Coverage by the length of the history")[1]
    assert "| series | " in by_length and "| ETS | " in by_length
    cached = sorted(p.name for p in (tmp_path / "cache" / "smct" / "competitions").iterdir())
    assert len(cached) == 16 and cached[0].startswith("m3-monthly-every60-AutoARIMA-sf")


def test_other_particle_seeds_draw_the_forecasts_again_and_the_first_is_the_served_one() -> None:
    task = load_task("m3", "yearly").stratified(160)  # 5 series
    runtime = Runtime.load(ROOT / "artifacts" / "default", backend="torch", device="cpu")
    served = model_forecasts(runtime, task, samples=200)
    again = model_forecasts(runtime, task, samples=200)
    one = model_forecasts(runtime, task, samples=200, particle_seed=1)
    assert np.array_equal(served.quantiles, again.quantiles)
    assert np.array_equal(one.quantiles, model_forecasts(runtime, task, 200, 1).quantiles)
    assert not np.allclose(one.quantiles, served.quantiles)
    # other particles, the same series: the medians agree to a few percent of the level
    level = np.mean([np.abs(h[-6:]).mean() for h in task.histories])
    assert np.abs(one.point - served.point).mean() < 0.1 * level


def test_the_seeds_table_gives_each_runtimes_mean_and_sd_and_the_ratios() -> None:
    result = _result("yearly", 0.1, 0.1, 0.1, (0.8, 0.8))
    seeded = TaskResult(result.task, result.every, result.scores,
                        {"model": [0.10, 0.12, 0.11], "ablation": [0.10, 0.10, 0.10]})
    text = markdown([seeded], [], Setting("smct competitions --seeds 3", "a", 1.0))
    assert "| WQL over 3 seeds | M3 yearly (1, h 6) |" in text
    assert "| model | 0.1100 ± 0.0100 |" in text  # sd with n - 1
    assert "| ablation | 0.1000 ± 0.0000 |" in text
    assert "| model/ablation | 1.100 ± 0.100 |" in text
    assert "over the particles' seeds" not in markdown([result], [], Setting("c", "a", 1.0))
