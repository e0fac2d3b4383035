"""`smct backtest` on a user's long table: the grid of dated rows, seasons, the report and the
CSV of every forecast, and agreement with `smct quality` on the same series."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from cli.app import app
from model.runtime.runtime import Runtime
from training.quality import backtest as bt
from training.quality.run import evaluate_series
from training.quality.suite import SuiteConfig, covid, with_eval_part

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "artifacts" / "default"
DATA = REPO.parent / "shared" / "data"
QUICK = SuiteConfig(eval_frac=0.3, origins=2, samples=200, peer_history=400)


def _table(path: Path) -> None:
    """Two daily series of 120 days with a weekly season, a missing value (an empty cell) and a
    missing row (a day left out)."""
    rng = np.random.default_rng(0)
    days = pd.date_range("2024-01-01", periods=120, freq="D")
    rows = []
    for name, level in (("a", 10.0), ("b", 200.0)):
        y = level + 3 * np.sin(2 * np.pi * np.arange(120) / 7) + rng.normal(0, 1, 120)
        for i, (d, v) in enumerate(zip(days, y, strict=True)):
            if name == "a" and i == 50:
                continue  # a missing row
            rows.append((name, d.date().isoformat(), "" if (name, i) == ("b", 100) else v))
    pd.DataFrame(rows, columns=["series_id", "timestamp", "value"]).to_csv(path, index=False)


def test_dated_rows_are_put_on_their_grid_and_the_season_comes_from_the_stamps(
    tmp_path: Path,
) -> None:
    _table(tmp_path / "t.csv")
    a, b = bt.table_series(tmp_path / "t.csv", QUICK, horizon=7)
    assert len(a.series.values) == len(b.series.values) == 120  # the day left out is back
    assert np.isnan(a.series.values[50]) and np.isnan(b.series.values[100])
    assert a.series.season == b.series.season == 7  # daily: a week
    assert a.series.eval_start == 120 - 36  # the last 30 %
    (c,) = bt.table_series(tmp_path / "t.csv", QUICK, horizon=7, season_length=1)[:1]
    assert c.series.season == 1  # declared none


def test_the_season_of_undated_rows_is_detected_from_the_history() -> None:
    t = np.arange(300.0)
    y = 5 * np.sin(2 * np.pi * t / 12) + np.random.default_rng(1).normal(0, 1, 300)
    assert bt._season(None, t, y) == 12
    noise = np.random.default_rng(2).normal(0, 1, 300)
    assert bt._season(None, t, noise) == 0


def test_backtest_writes_the_report_the_forecasts_and_the_charts(tmp_path: Path) -> None:
    _table(tmp_path / "t.csv")
    out = tmp_path / "bt"
    res = CliRunner().invoke(app, [
        "backtest", "--dataset", str(tmp_path / "t.csv"), "--artifact", str(DEFAULT),
        "--horizon", "7", "--origins", "2", "--samples", "200", "--out", str(out),
        "--threads", "1",
    ])
    assert res.exit_code == 0, res.output
    report = (out / "report.md").read_text()
    for method in ("default", "ETS", "ARIMA", "Theta", "naive"):
        assert f"| {method} |" in report
    with (out / "forecasts.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    one = [r for r in rows if r["method"] == "default" and r["kind"] == "one-step"]
    multi = [r for r in rows if r["method"] == "ETS" and r["kind"] == "multistep"]
    assert len(one) == 2 * 36 and len(multi) == 2 * 2 * 7
    gap = next(r for r in one if r["series"] == "b" and r["origin"] == "100")
    assert gap["value"] == "nan" and gap["crps"] == "nan" and gap["timestamp"].startswith(
        "2024-04-10")
    assert all(float(r["lo80"]) <= float(r["median"]) <= float(r["hi80"]) for r in one)
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["a.png", "b.png"]


def test_a_table_that_cannot_be_read_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("id,day,value\nx,1,2\n")
    res = CliRunner().invoke(app, ["backtest", "--dataset", str(tmp_path / "t.csv"),
                                   "--out", str(tmp_path / "bt")])
    assert res.exit_code == 2 and "missing columns" in res.output, res.output
    # --value-cols, the other commands' name that the message suggests, is read as --value-col
    res = CliRunner().invoke(app, ["backtest", "--dataset", str(tmp_path / "t.csv"),
                                   "--value-cols", "nope", "--out", str(tmp_path / "bt")])
    assert res.exit_code == 2 and "No such option" not in res.output, res.output


def test_backtest_serves_the_per_series_layer_the_service_settings_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SMCT_ADAPT_* (service/settings.py) reach the runtimes a backtest measures, as they reach
    the service's; a value that is no setting is a clear error, not a traceback."""
    from model.artifacts.artifact import ArtifactError

    seen = []

    def load(path: Path, **kwargs: object) -> Runtime:
        seen.append(kwargs["adapt"])
        raise ArtifactError("stop here")

    monkeypatch.setattr(Runtime, "load", load)
    monkeypatch.setenv("SMCT_ADAPT_SPREAD", "false")
    monkeypatch.setenv("SMCT_ADAPT_TREND", "false")
    _table(tmp_path / "t.csv")
    args = ["backtest", "--dataset", str(tmp_path / "t.csv"), "--out", str(tmp_path / "bt")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "stop here" in res.output, res.output
    assert not seen[0].spread and not seen[0].trend and seen[0].coverage
    monkeypatch.setenv("SMCT_ADAPT_SPREAD", "sometimes")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2 and "adapt_spread" in res.output, res.output


@pytest.mark.skipif(not (DATA / "covid").is_dir(), reason="needs ../shared/data")
def test_the_covid_panel_scores_as_smct_quality_scores_it(tmp_path: Path) -> None:
    """The counties of `smct quality`'s covid series, written as a user's long table, with the
    season the suite declares: the same evaluation points, season and scores. (Left to find
    it, the backtest keeps none: the 50 days of history before the evaluation part show the
    epidemic's rise, not a week.)"""
    (series,) = [with_eval_part(s, QUICK) for s in covid(DATA, counties=1)]
    frame = pd.read_csv(DATA / "covid" / "time_series_covid19_deaths_US.csv")
    days = [c for c in frame.columns if c.count("/") == 2]
    stamps = pd.to_datetime(days[1:], format="%m/%d/%y")[-len(series.values):]
    pd.DataFrame({"series_id": series.name, "timestamp": stamps, "deaths": series.values}).to_csv(
        tmp_path / "covid.csv", index=False)
    table = tmp_path / "covid.csv"
    assert bt.table_series(table, QUICK, horizon=series.horizon)[0].series.season == 1
    (item,) = bt.table_series(table, QUICK, horizon=series.horizon, season_length=7)
    assert item.series.season == series.season and item.series.eval_start == series.eval_start
    np.testing.assert_array_equal(item.series.values, series.values)
    rt = Runtime.load(DEFAULT, backend="torch", device="cpu")
    (mine,), _ = bt.evaluate_table({"model": rt}, [item], QUICK)
    theirs = evaluate_series({"model": rt}, series, QUICK)
    for kind in ("one_step", "multi_step"):
        for over in ("ETS", "ARIMA"):
            assert mine.ratio(kind, "model", over) == pytest.approx(
                theirs.ratio(kind, "model", over), rel=1e-9)


def test_the_peers_score_as_statsforecasts_own_cross_validation(tmp_path: Path) -> None:
    """On a small monthly panel (a season, trends, level-proportional noise), the backtest's
    AutoETS, AutoARIMA, AutoTheta and seasonal naive CRPS, one-step and multistep, within 2 % of
    those of statsforecast's
    own cross-validation without refitting on the same windows (its Gaussian intervals read
    alike); the report shows the multistep coverage of every step."""
    from statsforecast import StatsForecast
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta, SeasonalNaive

    from training.quality.scores import gaussian_crps

    rng = np.random.default_rng(4)
    months = pd.date_range("2005-01-01", periods=144, freq="MS")
    frames = []
    for i in range(3):
        t = np.arange(144)
        level = (50 + 20 * i) * (1 + 0.004 * (i + 1) * t) * (1 + 0.15 * np.sin(2 * np.pi * t / 12))
        y = level * (1 + 0.04 * rng.standard_normal(144))
        frames.append(pd.DataFrame({"unique_id": f"s{i}", "ds": months, "y": y}))
    panel = pd.concat(frames, ignore_index=True)
    panel.to_csv(tmp_path / "p.csv", index=False)
    cfg = SuiteConfig(eval_frac=0.25, origins=2, samples=200, peer_history=400)
    table = bt.table_series(tmp_path / "p.csv", cfg, horizon=12)
    default = Runtime.load(DEFAULT, backend="torch", device="cpu")
    results, refused = bt.evaluate_table({"default": default}, table, cfg)
    assert not refused and len(results) == 3
    start = results[0].series.eval_start  # 108: every series alike
    last = 144 - 12
    z80 = 1.2815515655446004
    names = {"ETS": "AutoETS", "ARIMA": "AutoARIMA", "Theta": "AutoTheta",
             "naive": "SeasonalNaive"}
    models = [AutoETS(season_length=12), AutoARIMA(season_length=12),
              AutoTheta(season_length=12), SeasonalNaive(season_length=12)]
    sf = StatsForecast(models=models, freq="MS")
    for h, windows, step, kind in ((12, 2, last - start, "multi_step"),
                                   (1, 144 - start, 1, "one_step")):
        cv = sf.cross_validation(df=panel, h=h, n_windows=windows, step_size=step, refit=False,
                                 level=[80])
        for r in results:
            own = cv[cv.unique_id == r.series.name]
            for name, col in names.items():
                sd = (own[f"{col}-hi-80"] - own[f"{col}-lo-80"]).to_numpy() / (2 * z80)
                crps = gaussian_crps(own[col].to_numpy(), sd, own["y"].to_numpy())
                ours = getattr(r, kind)[name]["crps"] * r.scale  # back in the series' units
                assert ours == pytest.approx(float(np.mean(crps)), rel=0.02), (kind, name)
    table_text = bt.horizon_table(results, list(names))
    assert table_text.count("\n") == 12 + 1 and "| 12 |" in table_text


def test_the_ratios_carry_a_bootstrap_interval_that_covers_as_it_says() -> None:
    """The 90 % bootstrap interval of a geometric mean over series: a point where every ratio
    is the same, NaN from one ratio; over 300 panels of 40 lognormal ratios whose geometric
    mean is 1, it holds 1 in 0.86 to 0.94 of them (the percentile bootstrap of a mean of 40 is
    near its nominal coverage; 300 panels put a binomial standard error of 0.017 on it)."""
    assert bt.bootstrap_interval([0.9] * 5) == pytest.approx((0.9, 0.9))
    assert all(np.isnan(bt.bootstrap_interval([0.9])))
    rng = np.random.default_rng(2)
    held = [lo <= 1.0 <= hi for lo, hi in (
        bt.bootstrap_interval(list(np.exp(rng.normal(0, 0.3, 40))), seed=k) for k in range(300))]
    assert 0.86 <= np.mean(held) <= 0.94


def test_the_charts_show_the_best_and_the_worst_series() -> None:
    """Fan charts of the six series the model forecasts best against AutoETS over many steps
    and the six it forecasts worst (the first twelve of the table before), or every series of
    a small table, best first."""

    class Result:
        def __init__(self, ratio: float) -> None:
            self.value = ratio

        def ratio(self, kind: str, method: str, over: str) -> float:
            assert (kind, over) == ("multi_step", "ETS")
            return self.value

    ratios = [1.3, 0.7, 1.0, 0.9, 1.8, 0.5, 1.1, 0.95, 1.2, 0.8, 1.05, 0.85, 1.5, 0.6]
    picked = bt.best_and_worst([Result(r) for r in ratios], "model")  # type: ignore[arg-type]
    assert [p.value for p in picked] == [0.5, 0.6, 0.7, 0.8, 0.85, 0.9,
                                         1.05, 1.1, 1.2, 1.3, 1.5, 1.8]
    few = bt.best_and_worst([Result(r) for r in ratios[:5]], "model")  # type: ignore[arg-type]
    assert [p.value for p in few] == sorted(ratios[:5])
