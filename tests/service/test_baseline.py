"""A baseline served end to end: `smct benchmark --save-models`, `smct export`, then the
service on that artifact answers the stateless forecasts and refuses the /v1/series ones."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from cli.app import app as cli
from service.main import create_app
from service.settings import Settings
from tests.service.conftest import ThreadServer
from tests.service.test_sse import parse_sse

HISTORY = [10.2, 10.8, 11.1, None, 11.4, 11.9, 11.6, 12.0, 12.3, 12.1]


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("baselines")
    runner = CliRunner()
    result = runner.invoke(cli, [
        "benchmark", "--quick", "--datasets", "synthetic-1", "--models", "ensemble,ets,lstm",
        "--out", str(root / "results"), "--no-figures", "--no-progress", "--save-models",
    ])
    assert result.exit_code == 0, result.output
    out = {}
    for name in ("ensemble", "ets", "lstm"):
        saved = root / "results" / "synthetic-1" / "models" / name
        result = runner.invoke(cli, ["export", "--checkpoint", str(saved),
                                     "--out", str(root / name), "--scaling", "per-series"])
        assert result.exit_code == 0, result.output
        out[name] = root / name
    return out


@pytest.fixture(params=["ensemble", "ets"])
def client(request: pytest.FixtureRequest, artifacts: dict[str, Path]) -> Iterator[TestClient]:
    settings = Settings(artifact=artifacts[request.param], backend="onnx", batch_max_wait_ms=1.0)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def test_stateless_forecast(client: TestClient) -> None:
    body = {"series": [{"id": "a", "values": HISTORY}, {"id": "b", "values": [1.0, 3.0]}],
            "horizon": 3, "levels": [80, 95], "num_samples": 300, "return_samples": True}
    r = client.post("/v1/forecast", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    model = client.get("/v1/models").json()["models"][0]
    assert answer["model_version"] == model["model_version"] and model["stateful"] is False
    assert answer["point_forecast"] is False and model["point_forecast"] is False
    a = answer["forecasts"][0]
    assert a["id"] == "a" and len(a["mean"]) == 3 and len(a["samples"]) == 300
    lo95, lo80 = np.array(a["intervals"]["95"]["lo"]), np.array(a["intervals"]["80"]["lo"])
    hi80, hi95 = np.array(a["intervals"]["80"]["hi"]), np.array(a["intervals"]["95"]["hi"])
    assert (lo95 <= lo80).all() and (lo80 < hi80).all() and (hi80 <= hi95).all()
    # in the series' units: near its level, not near the scaled data's 0
    assert 9.0 < a["median"][0] < 14.0
    np.testing.assert_allclose(a["mean"], np.mean(a["samples"], axis=0))
    again = client.post("/v1/forecast", json=body).json()
    assert again["forecasts"] == answer["forecasts"]  # the same history, the same answer


def test_bad_input_is_still_a_422(client: TestClient) -> None:
    r = client.post("/v1/forecast", json={"series": [{"id": "a", "values": [1.0]}]})
    assert r.status_code == 422 and "at least 2" in r.json()["message"]
    r = client.post("/v1/forecast", json={"series": [{"id": "a", "values": [None, None]}]})
    assert r.status_code == 422 and "no observed value" in r.json()["message"]


@pytest.mark.parametrize(("method", "path", "body"), [
    ("PUT", "/v1/series/s1", {"values": [1.0, 2.0, 3.0]}),
    ("POST", "/v1/series/s1/observations", {"observations": [{"seq": 3, "value": 1.0}]}),
    ("GET", "/v1/series/s1/forecast", None),
    ("GET", "/v1/series/s1", None),
    ("DELETE", "/v1/series/s1", None),
    ("GET", "/v1/series/s1/events", None),
])
def test_series_endpoints_say_the_model_keeps_no_state(
    client: TestClient, method: str, path: str, body: dict | None
) -> None:
    r = client.request(method, path, json=body)
    assert r.status_code == 400, r.text
    error = r.json()
    assert error["error"] == "stateless_model" and "POST /v1/forecast" in error["message"]


def test_stream_of_a_baseline(artifacts: dict[str, Path]) -> None:
    settings = Settings(artifact=artifacts["ensemble"], batch_max_wait_ms=1.0)
    body = {"series": [{"id": "a", "values": HISTORY}], "horizon": 3, "num_samples": 200}
    with ThreadServer(create_app(settings)) as srv:
        whole = httpx.post(f"{srv.url}/v1/forecast", json=body, timeout=30).json()
        with httpx.stream("POST", f"{srv.url}/v1/forecast/stream", json=body, timeout=30) as r:
            assert r.status_code == 200
            events = list(parse_sse(r.iter_lines()))
    assert [e.event for e in events] == ["step", "step", "step", "done"]
    means = [e.data["forecasts"][0]["mean"][0] for e in events[:-1]]
    np.testing.assert_allclose(means, whole["forecasts"][0]["mean"])


def test_export_records_the_training_scaling(artifacts: dict[str, Path], tmp_path: Path) -> None:
    """synthetic-1 is not scaled (its scaler is the identity): the manifest says so; export
    serves as the model was trained by default (the training scaler), per series when asked
    (with a warning: the model never saw series scaled so)."""
    manifest = json.loads((artifacts["ensemble"] / "manifest.json").read_text())
    assert manifest["scaling"] == {"mode": "per_series"}
    assert manifest["training_scaling"] == {"mode": "global", "loc": [0.0], "scale": [1.0]}
    assert manifest["context_length"] == 25 and "multistep" in manifest["metrics"]
    saved = artifacts["ensemble"] / "forecaster"
    result = CliRunner().invoke(cli, ["export", "--checkpoint", str(saved), "--out",
                                      str(tmp_path / "g")])
    assert result.exit_code == 0, result.output
    assert "warning" not in result.output
    again = json.loads((tmp_path / "g" / "manifest.json").read_text())
    assert again["scaling"] == {"mode": "global", "loc": [0.0], "scale": [1.0]}
    result = CliRunner().invoke(cli, ["export", "--checkpoint", str(saved), "--out",
                                      str(tmp_path / "p"), "--scaling", "per-series"])
    assert result.exit_code == 0, result.output
    assert "not calibrated" in " ".join(result.output.split())


def test_a_point_forecaster_says_its_intervals_have_zero_width(
    artifacts: dict[str, Path], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """The deterministic LSTM draws one path per series: it is served, and its answers, the
    model's description, the start-up log and `smct forecast` say so."""
    settings = Settings(artifact=artifacts["lstm"], batch_max_wait_ms=1.0)
    body = {"series": [{"id": "a", "values": HISTORY}], "horizon": 3, "levels": [80, 95],
            "num_samples": 50}
    with caplog.at_level(logging.WARNING, logger="service.engine"), TestClient(
        create_app(settings), raise_server_exceptions=False
    ) as c:
        model = c.get("/v1/models").json()["models"][0]
        r = c.post("/v1/forecast", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["point_forecast"] is True and model["point_forecast"] is True
    forecast = answer["forecasts"][0]
    for level in ("80", "95"):
        interval = forecast["intervals"][level]
        assert interval["lo"] == interval["hi"] == forecast["median"]
    np.testing.assert_allclose(forecast["mean"], forecast["median"], rtol=1e-12)
    assert re.search(r"lstm-[0-9a-f]{12} is a point forecaster", caplog.text), caplog.text
    history = tmp_path / "h.csv"
    history.write_text("value\n" + "\n".join(str(v) for v in HISTORY if v is not None) + "\n")
    result = CliRunner().invoke(cli, ["forecast", "--artifact", str(artifacts["lstm"]),
                                      "--input", str(history), "--horizon", "2"])
    assert result.exit_code == 0, result.output
    assert re.search(r"lstm-[0-9a-f]{12} is a point forecaster: its intervals have zero width",
                     result.stderr), result.stderr
    assert json.loads(result.stdout)["point_forecast"] is True
