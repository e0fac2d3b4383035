"""A model with covariates served over HTTP: histories carry every feature, forecasts take the
covariates' future values (`covariates`, one per forecast step), and each error says what to
send. The model has random weights (torch backend): these tests are about the API."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from tests.model.runtime.test_runtime import _torch_only_artifact
from tests.service.conftest import AppFactory
from tests.service.test_errors import assert_422


@pytest.fixture(scope="module")
def cov_runtime(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One target and one covariate, per-series scaling."""
    from model.network.config import ModelConfig
    from model.runtime.runtime import Runtime

    cfg = ModelConfig(d_in=2, d_out=1, d_model=8, n_heads=1, window=4, d_ff=8)
    out = tmp_path_factory.mktemp("covariates") / "a"
    return Runtime.load(_torch_only_artifact(out, cfg, {"mode": "per_series"}))


@pytest.fixture
def cov_client(make_client: AppFactory, cov_runtime: Any) -> TestClient:
    return make_client(runtime_override=cov_runtime)


def values(n: int = 20, seed: int = 0) -> list[list[float]]:
    """[target, covariate] pairs: sales driven by a temperature-like covariate."""
    rng = np.random.default_rng(seed)
    temp = 20 + 5 * np.sin(np.arange(n) / 3) + rng.normal(size=n)
    sales = 100 + 2 * temp + rng.normal(size=n)
    return [[round(float(s), 4), round(float(t), 4)] for s, t in zip(sales, temp, strict=True)]


def test_models_says_how_many_covariates(cov_client: TestClient, client: TestClient) -> None:
    assert cov_client.get("/v1/models").json()["models"][0]["covariates"] == 1
    assert client.get("/v1/models").json()["models"][0]["covariates"] == 0


def test_stateless_forecast_takes_future_covariates(cov_client: TestClient) -> None:
    def ask(covariates: Any) -> Any:
        series = {"id": "a", "values": values(), "covariates": covariates}
        return cov_client.post("/v1/forecast", json={"series": [series], "horizon": 3})

    r = ask([21.0, 22.5, 19.0])
    assert r.status_code == 200, r.text
    (f,) = r.json()["forecasts"]
    assert len(f["mean"]) == 3 and all(isinstance(m, float) for m in f["mean"])
    lo, hi = f["intervals"]["80"]["lo"], f["intervals"]["80"]["hi"]
    assert all(a < b for a, b in zip(lo, hi, strict=True))
    # a one-covariate step may also be a one-element list; other values, other forecast
    assert ask([[21.0], [22.5], [19.0]]).json()["forecasts"][0]["mean"] == f["mean"]
    assert ask([60.0, 60.0, 60.0]).json()["forecasts"][0]["mean"] != f["mean"]


@pytest.mark.parametrize(
    ("covariates", "field", "words"),
    [
        (None, "series[0].covariates", ("1 covariate(s) (f1)", "each of the 3 forecast steps")),
        ([1.0, 2.0], "series[0].covariates", ("holds 2 values", "one per forecast step (3")),
        ([1.0, [1.0, 2.0], 3.0], "series[0].covariates[1]", ("has 2 values", "1 covariate(s)")),
        ([1.0, None, 3.0], "series[0].covariates[1]", ("missing a value",)),
    ],
)
def test_stateless_covariate_errors(
    cov_client: TestClient, covariates: Any, field: str, words: tuple[str, ...]
) -> None:
    series: dict[str, Any] = {"id": "a", "values": values()}
    if covariates is not None:
        series["covariates"] = covariates
    r = cov_client.post("/v1/forecast", json={"series": [series], "horizon": 3})
    assert_422(r, field, *words)


def test_non_numeric_covariates_are_a_422(cov_client: TestClient) -> None:
    series = {"id": "a", "values": values(), "covariates": ["warm", 1.0, 2.0]}
    r = cov_client.post("/v1/forecast", json={"series": [series], "horizon": 3})
    assert r.status_code == 422 and "covariates[0]" in r.text and "not a number" in r.text


def test_a_model_without_covariates_refuses_them(client: TestClient) -> None:
    series = {"id": "a", "values": [0.1, 0.3, 0.2, 0.4, 0.5], "covariates": [1.0, 2.0]}
    r = client.post("/v1/forecast", json={"series": [series], "horizon": 2})
    assert_422(r, "series[0].covariates", "takes no covariates", "leave `covariates` out")


def test_online_series_with_covariates(cov_client: TestClient) -> None:
    """Observations carry both features; the answer's forecast needs the future covariates
    (null without them, and no error: the observation is absorbed either way); the stored
    state forecasts by POST with them, and a GET says to do so."""
    assert cov_client.put("/v1/series/shop", json={"values": values()}).status_code == 201
    r = cov_client.post(
        "/v1/series/shop/observations", json={"observations": [{"seq": 20, "value": [141.0, 20.5]}]}
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["seq"] == 21 and body["forecast"] is None
    assert body["observations"][0]["covered"] is not None

    obs = {"observations": [{"seq": 21, "value": [139.0, 19.8]}], "horizon": 2,
           "covariates": [[20.0], [21.0]]}
    r = cov_client.post("/v1/series/shop/observations", json=obs)
    assert r.status_code == 200, r.text
    assert len(r.json()["forecast"]["mean"]) == 2
    replay = cov_client.post("/v1/series/shop/observations", json=obs)  # idempotent
    assert replay.headers.get("Idempotent-Replay") == "true" and replay.json() == r.json()

    r = cov_client.get("/v1/series/shop/forecast?horizon=2")
    assert_422(r, "covariates", "1 covariate(s)", "POST /v1/series/shop/forecast")
    r = cov_client.get("/v1/series/shop/forecast?horizon=2&covariates=20&covariates=21")
    assert_422(r, "query", "JSON body of POST /v1/series/{series_id}/forecast")
    r = cov_client.post("/v1/series/shop/forecast", json={"horizon": 2, "levels": [50, 90],
                                                         "covariates": [20.0, 21.0]})
    assert r.status_code == 200, r.text
    assert len(r.json()["mean"]) == 2 and set(r.json()["intervals"]) == {"50", "90"}
    r = cov_client.post("/v1/series/shop/forecast", json={"horizon": 2, "covariates": [20.0]})
    assert_422(r, "covariates", "holds 1 values")
    assert cov_client.get("/v1/series/shop").json()["seq"] == 22  # errors changed nothing
    # a missing target (its covariate known) then a value: absorbed, the value scored
    gap = {"observations": [{"seq": 22, "value": [None, 20.2]},
                            {"seq": 23, "value": [140.0, 20.9]}]}
    r = cov_client.post("/v1/series/shop/observations", json=gap)
    assert r.status_code == 200, r.text
    assert r.json()["observations"][1]["covered"] is not None


def test_future_covariates_far_from_the_series_level_are_a_422(cov_client: TestClient) -> None:
    """Future covariates more than 1e6 scales from the level of the series' covariate are
    refused as such observations are (they used to give a 200 whose forecasts were all null:
    float32 overflow); an observation that sends them is not absorbed."""
    assert cov_client.put("/v1/series/far", json={"values": values()}).status_code == 201
    series = {"id": "a", "values": values(), "covariates": [1e20, 21.0, 22.0]}
    ok = {"id": "b", "values": values(), "covariates": [20.0, 21.0, 22.0]}
    r = cov_client.post("/v1/forecast", json={"series": [ok, series], "horizon": 3})
    assert_422(r, "series[1].covariates", "1e+20", "forecast step 1", "scales from")
    r = cov_client.post("/v1/forecast/stream", json={"series": [ok, series], "horizon": 3})
    assert_422(r, "series[1].covariates", "1e+20", "forecast step 1", "scales from")
    r = cov_client.post("/v1/series/far/forecast", json={"horizon": 2, "covariates": [20.0, -1e19]})
    assert_422(r, "covariates", "-1e+19", "forecast step 2")
    obs = {"observations": [{"seq": 20, "value": [141.0, 20.5]}], "horizon": 1,
           "covariates": [1e30]}
    r = cov_client.post("/v1/series/far/observations", json=obs)
    assert_422(r, "covariates", "forecast step 1")
    assert cov_client.get("/v1/series/far").json()["seq"] == 20  # nothing absorbed
    obs["covariates"] = [21.0]
    r = cov_client.post("/v1/series/far/observations", json=obs)
    assert r.status_code == 200 and all(v is not None for v in r.json()["forecast"]["mean"])


def test_a_covariate_never_observed_is_refused(cov_client: TestClient) -> None:
    """Scaled by its own history, a series needs each covariate seen once: its future values
    would otherwise go in unscaled (20 read as 20 standard deviations)."""
    unseen = [[v[0], None] for v in values()]
    r = cov_client.put("/v1/series/unseen", json={"values": unseen})
    assert r.status_code == 422 and "covariate (feature 1) that is never observed" in r.text
    assert cov_client.get("/v1/series/unseen").status_code == 404
    seen = {"id": "a", "values": values(), "covariates": [20.0]}
    body = {"series": [seen, {"id": "b", "values": unseen, "covariates": [20.0]}], "horizon": 1}
    for route in ("/v1/forecast", "/v1/forecast/stream"):  # the refusal names the series
        assert_422(cov_client.post(route, json=body), "series[1]", "never observed")
    unseen[3][1] = 20.0  # one value is enough
    assert cov_client.put("/v1/series/unseen", json={"values": unseen}).status_code == 201


def test_posted_forecast_of_a_univariate_series(client: TestClient, runtime: Any) -> None:
    """POST /v1/series/{id}/forecast is the GET with a body, for every model."""
    from tests.service.test_api import put

    put(client, runtime, "u")
    got = client.get("/v1/series/u/forecast?horizon=3&levels=80").json()
    posted = client.post("/v1/series/u/forecast", json={"horizon": 3, "levels": [80]}).json()
    assert posted == got
    r = client.post("/v1/series/u/forecast", json={"horizon": 3, "covariates": [1, 2, 3]})
    assert_422(r, "covariates", "takes no covariates")
    assert client.post("/v1/series/nope/forecast", json={}).status_code == 404


def test_stream_takes_future_covariates(cov_client: TestClient) -> None:
    series = {"id": "a", "values": values(), "covariates": [21.0, 22.5]}
    r = cov_client.post("/v1/forecast/stream", json={"series": [series], "horizon": 2})
    assert r.status_code == 200
    events = [line[len("data: "):] for line in r.text.splitlines() if line.startswith("data: ")]
    done = json.loads(events[-1])
    assert len(events) == 3 and len(done["forecasts"][0]["mean"]) == 2
    whole = cov_client.post("/v1/forecast", json={"series": [series], "horizon": 2}).json()
    assert done["forecasts"][0]["mean"] == pytest.approx(whole["forecasts"][0]["mean"], rel=1e-6)
    r = cov_client.post("/v1/forecast/stream", json={"series": [{"id": "a", "values": values()}]})
    assert_422(r, "series[0].covariates", "covariate(s)")



def test_a_baseline_with_covariates_is_served(tmp_path: Any) -> None:
    """A baseline trained with a covariate answers the stateless forecast from their future
    values as the SMC Transformer does (it used to be refused at load)."""
    import torch

    from model.runtime.serving.baseline_artifact import export_baseline
    from service.main import create_app
    from service.settings import Settings
    from training.fitting import benchmark_config, build

    torch.manual_seed(0)
    build("lstm-drop-0.1", 2, 1, benchmark_config(d_model=8)).save(tmp_path / "saved")
    export_baseline(tmp_path / "saved", tmp_path / "art", context_length=16)
    settings = Settings(artifact=tmp_path / "art", batch_max_wait_ms=1.0)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        assert c.get("/v1/models").json()["models"][0]["covariates"] == 1
        series = {"id": "a", "values": values(), "covariates": [21.0, 22.5]}
        r = c.post("/v1/forecast", json={"series": [series], "horizon": 2, "num_samples": 50})
        assert r.status_code == 200, r.text
        assert len(r.json()["forecasts"][0]["mean"]) == 2
        r = c.post("/v1/forecast/stream", json={"series": [series], "horizon": 2})
        assert r.status_code == 200 and r.text.count("event: step") == 2
        unseen = {"id": "b", "values": [[v[0], None] for v in values()], "covariates": [1, 2]}
        r = c.post("/v1/forecast", json={"series": [unseen], "horizon": 2})  # as the SMC's
        assert_422(r, "series[0]", "covariate (feature 1) that is never observed")
        series["covariates"] = [21.0, 1e20]
        r = c.post("/v1/forecast", json={"series": [series], "horizon": 2})
        assert_422(r, "series[0].covariates", "1e+20", "forecast step 2", "check its units")
        del series["covariates"]
        r = c.post("/v1/forecast", json={"series": [series], "horizon": 2})
        assert_422(r, "series[0].covariates", "1 covariate(s)")


def test_fuzzed_covariate_requests_never_fail(cov_client: TestClient) -> None:
    """tests/service/test_fuzz.py on the covariate model: every request broken in one place
    answers 2xx or a 4xx with a message, and a refused observation changes nothing."""
    from hypothesis import given
    from hypothesis import strategies as st

    from tests.service.test_fuzz import SETTINGS, check_answer, mutated, send

    assert cov_client.put("/v1/series/fz", json={"values": values()}).status_code == 201
    stateless = {"series": [{"id": "a", "values": values(), "covariates": [21.0, [22.0]]}],
                 "horizon": 2, "levels": [80]}
    forecast = {"horizon": 2, "covariates": [[20.0], 21.0], "num_samples": 30}
    for url, body in (("/v1/forecast", stateless), ("/v1/series/fz/forecast", forecast)):
        assert send(cov_client, "POST", url, body).status_code == 200  # the unbroken bodies

    accepted: list[tuple[bool, bool, bool]] = []

    @SETTINGS
    @given(st.data())
    def run(data: st.DataObject) -> None:
        before = cov_client.get("/v1/series/fz").json()
        seq = before["seq"]
        obs = {"observations": [{"seq": seq, "value": [140.0, None]},
                                {"seq": seq + 1, "value": [None, 20.0]}],
               "horizon": 1, "covariates": [[19.5]]}
        r = send(cov_client, "POST", "/v1/series/fz/observations", data.draw(mutated(obs)))
        check_answer(r)
        after = cov_client.get("/v1/series/fz").json()
        if r.status_code >= 400:
            assert (after["seq"], after["version"]) == (seq, before["version"]), r.text
        r2 = send(cov_client, "POST", "/v1/forecast", data.draw(mutated(stateless)))
        check_answer(r2)
        r3 = send(cov_client, "POST", "/v1/series/fz/forecast", data.draw(mutated(forecast)))
        check_answer(r3)
        accepted.append(tuple(x.status_code < 300 for x in (r, r2, r3)))  # type: ignore[arg-type]

    run()
    for i in range(3):  # each endpoint both accepted and refused some of them
        assert 0 < sum(a[i] for a in accepted) < len(accepted), i
