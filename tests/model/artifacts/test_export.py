"""Artifacts: manifest, verification, ONNX graphs against eager PyTorch, torch-vs-onnx runtime
parity, and the `smct forecast` command."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
import typer
from typer.testing import CliRunner

from cli.app import app
from model.artifacts.artifact import FILES, Artifact, ArtifactError, sha256_file
from model.artifacts.export import check_graphs
from model.filtering.noise import NoiseLayout, noise_rows
from model.runtime.runtime import Runtime
from tests.model.conftest import variant

PARITY = 1e-4


def test_manifest_describes_the_artifact(artifact: Path) -> None:
    m = json.loads((artifact / "manifest.json").read_text())
    assert m["type"] == "smct-artifact" and m["format_version"] == 2
    assert m["model_config"]["d_model"] == 8 and m["context_length"] == 24 and m["particles"] == 10
    assert m["features"] == {"inputs": ["x"], "targets": ["x"], "covariates": []}
    assert m["scaling"]["mode"] == "global" and m["filter"]["resampling"] == "systematic"
    assert "val_nll" in m["metrics"] and {"torch", "onnx", "onnxruntime", "smct"} <= set(
        m["versions"]
    )
    assert set(m["files"]) == set(FILES)
    assert all(m["files"][f] == sha256_file(artifact / f) for f in FILES)
    assert max(m["graphs"]["parity_max_abs"].values()) < PARITY


def _copy(artifact: Path, out: Path) -> Path:
    shutil.copytree(artifact, out)
    return out


def test_loading_refuses_damaged_artifacts(artifact: Path, tmp_path: Path) -> None:
    tampered = _copy(artifact, tmp_path / "tampered")
    with open(tampered / "forecast_step.onnx", "r+b") as fh:
        fh.seek(100)
        byte = fh.read(1)
        fh.seek(100)
        fh.write(bytes([byte[0] ^ 1]))
    missing = variant(artifact, tmp_path / "missing")
    (missing / "weights.pt").unlink()  # (a missing noise table is regenerated: below)
    cases = {
        "checksum mismatch for forecast_step.onnx": tampered,
        "file weights.pt is missing": missing,
        "artifact type is 'other'": variant(artifact, tmp_path / "type", type="other"),
        "format version 99 is not supported": variant(artifact, tmp_path / "v", format_version=99),
        "no manifest.json": tmp_path,
        "unknown scaling mode": variant(artifact, tmp_path / "s", scaling={"mode": "robust"}),
    }
    for message, path in cases.items():
        with pytest.raises(ArtifactError, match=message):
            Runtime.load(path)
    Artifact.open(artifact)  # the original is fine


def test_a_missing_noise_table_is_regenerated_and_checked(artifact: Path, tmp_path: Path) -> None:
    """An artifact without noise.f32 (as committed to a repository) is whole again once opened:
    the table is regenerated from the manifest's generator and seed and checked against its
    sha256; a manifest whose seed does not make the table it names is refused."""
    copy = tmp_path / "a"
    shutil.copytree(artifact, copy)
    (copy / "noise.f32").unlink()
    opened = Artifact.open(copy)
    assert sha256_file(copy / "noise.f32") == sha256_file(artifact / "noise.f32")
    assert opened.model_id == Artifact.open(artifact).model_id
    (copy / "noise.f32").unlink()
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["noise"]["seed"] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="checksum mismatch for noise.f32"):
        Artifact.open(copy)


def test_exported_graphs_equal_eager(artifact: Path) -> None:
    art = Artifact.open(artifact)
    model = art.load_model()
    noise = noise_rows(art.load_noise(), NoiseLayout(10, 8, 1))
    report = check_graphs(model, noise, artifact, threshold=1.0)
    assert max(report.values()) < PARITY


def test_torch_and_onnx_backends_agree(rt_torch: Runtime, rt_onnx: Runtime, ar_series: Any) -> None:
    """Same noise: max abs difference of issued intervals, scores and forecasts under 1e-4."""
    histories = ar_series(4, 30, seed=5)
    obs = [np.array([[0.3], [np.nan], [-1.0]])] * 4
    levels = [0.8, 0.95]
    out = {}
    for name, rt in (("torch", rt_torch), ("onnx", rt_onnx)):
        updated = rt.update(rt.create(histories), obs, levels)
        states = [s for s, _ in updated]
        out[name] = (updated, rt.forecast(states, 6, levels, 300, seed=0, quantiles=[0.1, 0.5]))
    (upd_t, fc_t), (upd_o, fc_o) = out["torch"], out["onnx"]
    diffs = []
    for (st, rs_t), (so, rs_o) in zip(upd_t, upd_o, strict=True):
        assert np.array_equal(st.lineage, so.lineage)
        for a, b in zip(rs_t, rs_o, strict=True):
            diffs += [np.abs(np.subtract(a.intervals[lv], b.intervals[lv])).max() for lv in levels]
            if a.pit is not None:
                diffs += [
                    np.abs(a.pit - b.pit).max(),
                    abs(a.log_score - b.log_score),
                    abs(a.crps - b.crps),
                ]
    for a, b in zip(fc_t, fc_o, strict=True):
        diffs += [np.abs(a.mean - b.mean).max(), np.abs(a.median - b.median).max()]
        diffs += [np.abs(a.quantiles[q] - b.quantiles[q]).max() for q in (0.1, 0.5)]
        diffs += [np.abs(np.subtract(a.intervals[lv], b.intervals[lv])).max() for lv in levels]
    assert max(diffs) < PARITY


@pytest.mark.parametrize(
    ("lag_inputs", "obs_scale", "det_context"),
    [(False, False, 0), (True, True, 0), (True, True, 3)],
)
def test_a_model_with_lags_and_skip_exports_and_serves(
    tmp_path: Path, ar_series: Any, lag_inputs: bool, obs_scale: bool, det_context: int
) -> None:
    """Relative-lag embeddings, the skip weight, the lagged targets, each particle's
    observation scale and a deterministic layer under the stochastic one (ModelConfig.lags,
    .skip, .lag_inputs, .obs_scale, .det_context) in the exported graphs: the graphs equal the
    eager model, and the torch and onnx runtimes agree on updates and forecasts (with a season
    of 3 steps, forecast past it)."""
    from model.artifacts.export import export_artifact
    from model.network.config import ModelConfig
    from model.network.smc_transformer import SMCTransformer

    torch.manual_seed(0)
    cfg = ModelConfig(
        d_model=8, n_heads=2, window=6, d_ff=8, lags=True, skip=True, lag_inputs=lag_inputs,
        obs_scale=obs_scale, det_context=det_context,
    )
    model = SMCTransformer(cfg).eval()
    names = ["lag_key", "lag_value", "lag_bias", "skip"]
    if lag_inputs:
        names += ["lag_coef.weight", "lag_coef.bias"]
    if obs_scale:
        names += ["obs.log_scale.weight", "obs.log_scale.bias"]
    if det_context:  # the layer's output, zero at first
        names += ["under.to_qkv.weight", "under.to_qkv.bias"]
    params = dict(model.named_parameters())
    with torch.no_grad():  # lag embeddings, skip weight and lag coefficients far from their start
        for name in names:
            params[name].add_(0.5 * torch.randn_like(params[name]))
    out = tmp_path / "lags"
    export_artifact(
        model, out, particles=10, scaling={"mode": "per_series"},
        features={"inputs": ["x"], "targets": ["x"]}, metrics={}, training={},
    )
    art = Artifact.open(out)
    noise = noise_rows(art.load_noise(), NoiseLayout(10, 8, 2))
    assert max(check_graphs(art.load_model(), noise, out, threshold=1.0).values()) < PARITY
    results = {}
    for backend in ("torch", "onnx"):
        rt = Runtime.load(out, backend=backend)
        states = rt.create(ar_series(1, 20), seasons=[3])
        ((state, res),) = rt.update(states, [np.array([[0.4]])], [0.8])
        (fc,) = rt.forecast([state], 7, [0.8], 200, seed=0)
        results[backend] = np.r_[res[0].intervals[0.8][0], res[0].intervals[0.8][1], fc.mean[:, 0]]
    # float32 rounding, relative to the values (random lag coefficients let the paths grow)
    gap = np.abs(results["torch"] - results["onnx"]) / np.maximum(1.0, np.abs(results["torch"]))
    assert gap.max() < PARITY


def test_a_seasonal_naive_model_repeats_the_season_it_is_told(tmp_path: Path) -> None:
    """Known answer: the network's own output zero, the last value's weight 1 and the
    coefficient of one season back 1 make the model the seasonal naive, X_t = X_{t-m} (up to a
    tiny Sigma_obs): served through the runtime (torch and onnx), a series of period 6 told its
    season is forecast as its last period repeated, two periods ahead; told none, as its last
    value (without the series' own correction of the mean, which would learn the period:
    tests/model/series/test_mean_adaptation.py, nor its pull towards its mean and the floor
    of its spread from its own errors, which widen a law this sure: tests/model/series/
    test_marginal.py and test_error_floor.py)."""
    from model.series.adaptation import AdaptConfig
    from tests.model.conftest import naive_lag_model

    out = naive_lag_model(tmp_path / "snaive", sigma_obs=1e-8, seasonal=True)
    pattern = np.array([3.0, 5.0, 4.0, 8.0, 6.0, 1.0])
    history = np.tile(pattern, 5)[:, None]  # 30 values, the last one 1.0
    for backend in ("torch", "onnx"):
        rt = Runtime.load(out, backend=backend,
                          adapt=AdaptConfig(mean=False, revert=False, bound=False))
        seasonal, flat = rt.create([history, history], seasons=[6, 0])
        fc_s, fc_f = rt.forecast([seasonal, flat], 12, [0.8], 50, seed=0)
        np.testing.assert_allclose(fc_s.median[:, 0], np.tile(pattern, 2), atol=1e-3)
        np.testing.assert_allclose(fc_f.median[:, 0], np.full(12, 1.0), atol=1e-3)


def test_forecast_command(artifact: Path, tmp_path: Path) -> None:
    x = np.cumsum(np.random.default_rng(0).normal(size=40))
    table = tmp_path / "history.csv"
    table.write_text(
        "series_id,timestamp,x\n"
        + "".join(
            f"{sid},{t},{v:.4f}\n" for sid in ("a", "b") for t, v in enumerate(x + (sid == "b"))
        )
    )
    runner = CliRunner()
    args = [
        "forecast",
        "--artifact",
        str(artifact),
        "--input",
        str(table),
        "--horizon",
        "5",
        "--samples",
        "200",
        "--levels",
        "80",
        "95",
        "--backend",
        "onnx",
    ]
    result = runner.invoke(app, [*args, "--plot", str(tmp_path / "fan.png")])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["levels"] == [80.0, 95.0] and [f["id"] for f in doc["forecasts"]] == ["a", "b"]
    assert np.asarray(doc["forecasts"][0]["intervals"]["95"]["lo"]).shape == (5, 1)
    assert (tmp_path / "fan.png").stat().st_size > 1000
    result = runner.invoke(app, [*args, "--format", "csv"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "id,step,target,mean,median,lo_80,hi_80,lo_95,hi_95" and len(lines) == 11


def test_forecast_command_seasons(tmp_path: Path) -> None:
    """Each series' season: --season-length for all, else --freq's or its CSV timestamps' where
    its values show it, else detected from its values; both options at once, or a frequency
    that is none, are refused."""
    from cli.forecast import _seasons

    x = 50 + 10 * np.sin(2 * np.pi * np.arange(120) / 12)
    hourly, steps = tmp_path / "hourly.csv", tmp_path / "steps.csv"
    for path, stamps in ((hourly, pd.date_range("2024-01-01", periods=120, freq="h")),
                         (steps, range(120))):
        rows = (f"{sid},{t},{v:.4f}\n" for sid in "ab" for t, v in zip(stamps, x, strict=True))
        path.write_text("series_id,timestamp,x\n" + "".join(rows))

    class Model:  # a runtime that reads seasons up to 24
        max_season = longest_season = 24

    def seasons(
        length: int | None = None, freq: str | None = None, table: Path = hourly
    ) -> list[int]:
        return _seasons(Model(), table, ["a", "b"], [x[:, None]] * 2, length, freq,
                        id_col="series_id", time_col="timestamp")

    assert seasons(length=7) == [7, 7] and seasons(length=1) == [0, 0]
    assert seasons(freq="MS") == [12, 12]  # the calendar's, in the values
    assert seasons(freq="QS") == [0, 0]  # the calendar's 4 is not in a cycle of 12
    assert seasons() == [24, 24]  # hourly stamps: a day holds two of the cycles
    assert seasons(table=steps) == [12, 12]  # step numbers: the cycle of 12 in the values
    for length, freq in ((7, "D"), (None, "often")):
        with pytest.raises(typer.BadParameter):
            seasons(length, freq)
