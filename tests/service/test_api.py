"""Every endpoint of the API, against both state stores (embedded and a real Redis)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from model.filtering.predictive import samples_for
from service.schemas.series import ObservationsResponse
from tests.service.conftest import TEST_SAMPLES

LEVELS = ["80", "95"]


def history(runtime: Any, n: int = 30, seed: int = 0) -> list[float]:
    """A synthetic-1-like series, long enough for the model."""
    rng = np.random.default_rng(seed)
    x = [0.0]
    for _ in range(max(n, runtime.min_history) - 1):
        x.append(0.5 * x[-1] + rng.standard_normal())
    return [round(v, 6) for v in x]


def put(client: TestClient, runtime: Any, series_id: str = "s1", n: int = 30) -> dict[str, Any]:
    r = client.put(f"/v1/series/{series_id}", json={"values": history(runtime, n)})
    assert r.status_code in (200, 201), r.text
    return dict(r.json())


def observe(client: TestClient, seq: int, value: Any, series_id: str = "s1") -> Any:
    """POST one observation."""
    body = {"observations": [{"seq": seq, "value": value}]}
    return client.post(f"/v1/series/{series_id}/observations", json=body)


def check_forecast(f: dict[str, Any], horizon: int, levels: list[str] = LEVELS) -> None:
    assert len(f["mean"]) == len(f["median"]) == horizon
    assert sorted(f["intervals"]) == sorted(levels)
    for band in f["intervals"].values():
        assert len(band["lo"]) == len(band["hi"]) == horizon
        assert len(band["lo_se"]) == len(band["hi_se"]) == horizon
        assert all(lo <= hi for lo, hi in zip(band["lo"], band["hi"], strict=True))
        assert all(se >= 0 for se in band["lo_se"] + band["hi_se"])
    assert all(isinstance(v, float) for v in f["mean"])  # univariate: numbers, not lists


# --------------------------------------------------------------------------- stateless


def test_forecast_answers_one_forecast_per_series(client: TestClient, runtime: Any) -> None:
    body = {
        "series": [
            {"id": "a", "values": history(runtime)}, {"id": "b", "values": history(runtime, seed=1)}
        ],
        "horizon": 5, "levels": [95, 80], "num_samples": 200,
    }
    r = client.post("/v1/forecast", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["horizon"] == 5 and out["levels"] == LEVELS and out["num_samples"] == 200
    assert [f["id"] for f in out["forecasts"]] == ["a", "b"]
    for f in out["forecasts"]:
        check_forecast(f, 5)
        assert "samples" not in f or f["samples"] is None
        lo80, hi80 = f["intervals"]["80"]["lo"], f["intervals"]["80"]["hi"]
        lo95, hi95 = f["intervals"]["95"]["lo"], f["intervals"]["95"]["hi"]
        assert all(a <= b + 1e-9 for a, b in zip(lo95, lo80, strict=True))  # nested bands
        assert all(a >= b - 1e-9 for a, b in zip(hi95, hi80, strict=True))


def test_default_samples_keep_the_bounds_error_near_two_percent_of_the_width(
    make_client: Any, runtime: Any
) -> None:
    """A forecast that names no sample count draws the fewest paths whose bounds' Monte Carlo
    error stays under 2 % of the width for a Gaussian law at the levels asked, and reports each
    bound's error: about 2 % of the width (the default model's one-step laws are near Gaussian;
    the errors, estimated from about 20 order statistics each, vary by some 20 %: the mean over
    the steps and bounds stays within 1-3 %); four times the samples, half the error."""
    client = make_client(default_samples=None)
    body: dict[str, Any] = {"series": [{"id": "a", "values": history(runtime)}], "horizon": 12}
    out = client.post("/v1/forecast", json=body).json()
    assert out["num_samples"] == samples_for([0.8, 0.95]) == 1162
    wide = client.post("/v1/forecast", json=body | {"levels": [99]}).json()
    assert wide["num_samples"] == samples_for([0.99])
    ratios = []
    for band in out["forecasts"][0]["intervals"].values():
        width = np.subtract(band["hi"], band["lo"])
        ratios += [np.divide(band["lo_se"], width), np.divide(band["hi_se"], width)]
    assert 0.01 < float(np.mean(ratios)) < 0.03
    more = client.post("/v1/forecast", json=body | {"num_samples": 4 * 1162}).json()
    se = np.mean([out["forecasts"][0]["intervals"]["80"]["hi_se"]])
    se_more = np.mean([more["forecasts"][0]["intervals"]["80"]["hi_se"]])
    assert se / se_more == pytest.approx(2.0, rel=0.25)


def test_forecast_returns_samples_when_asked(client: TestClient, runtime: Any) -> None:
    body = {"series": [{"id": "a", "values": history(runtime)}], "horizon": 3, "num_samples": 50,
            "return_samples": True}
    f = client.post("/v1/forecast", json=body).json()["forecasts"][0]
    assert np.asarray(f["samples"]).shape == (50, 3)
    median = np.median(np.asarray(f["samples"]), axis=0)
    assert np.allclose(median, f["median"], atol=1e-6 + 0.5 * np.ptp(f["samples"]))


def test_a_series_of_counts_is_forecast_in_its_support(client: TestClient, runtime: Any) -> None:
    """Declared counts (or read off a history of non-negative integers): no sample below 0,
    whole-number medians and bounds; declared non-negative: no bound below 0, decimals kept;
    an unknown support is a 422 naming the field, its series unforecast."""
    counts = [float(abs(round(v))) for v in history(runtime, 40)]
    body: dict[str, Any] = {"horizon": 4, "num_samples": 200, "return_samples": True,
                            "levels": [80]}
    for series, whole in (({"values": counts}, True), ({"values": counts, "support": "counts"},
                                                       True),
                          ({"values": history(runtime, 40), "support": "nonnegative"}, False)):
        r = client.post("/v1/forecast", json=body | {"series": [{"id": "c", **series}]})
        assert r.status_code == 200, r.text
        f = r.json()["forecasts"][0]
        samples = np.asarray(f["samples"])
        lo, hi = np.asarray(f["intervals"]["80"]["lo"]), np.asarray(f["intervals"]["80"]["hi"])
        assert samples.min() >= 0 and lo.min() >= 0, series
        if whole:
            for a in (samples, lo, hi, np.asarray(f["median"])):
                np.testing.assert_array_equal(a, np.round(a))
        else:
            assert np.any(samples != np.round(samples))
    r = client.post("/v1/forecast", json=body | {
        "series": [{"id": "c", "values": counts, "support": "integer"}]})
    assert r.status_code == 422, r.text
    assert r.json()["fields"] == [{"field": "series[0].support",
                                   "message": "Input should be 'real', 'nonnegative' or 'counts'"}]


def test_a_stored_series_keeps_its_support(client: TestClient, runtime: Any) -> None:
    """A series PUT with `support` (or read off its history) keeps it: GET shows it, and its
    forecasts, fetched or after observations, stay in it; a series stored before supports
    existed reads as real."""
    counts = [float(abs(round(v))) for v in history(runtime, 40)]
    r = client.put("/v1/series/cnt", json={"values": counts})
    assert r.status_code == 201 and r.json()["support"] == "counts", r.text
    r = client.put("/v1/series/pos", json={"values": history(runtime, 40),
                                          "support": "nonnegative"})
    assert r.json()["support"] == "nonnegative"
    assert client.get("/v1/series/cnt").json()["support"] == "counts"
    query = {"horizon": 4, "num_samples": 200, "levels": 80, "return_samples": "true"}
    for sid, whole in (("cnt", True), ("pos", False)):
        fetched = client.get(f"/v1/series/{sid}/forecast", params=query).json()
        seq = client.get(f"/v1/series/{sid}").json()["seq"]
        body = {"observations": [{"seq": seq, "value": 2.0}], "horizon": 4, "num_samples": 200}
        updated = client.post(f"/v1/series/{sid}/observations", json=body).json()["forecast"]
        samples = np.asarray(fetched["samples"])
        assert samples.min() >= 0 and np.array_equal(samples, np.round(samples)) == whole, sid
        for f in (fetched, updated):
            bounds = np.asarray([f["intervals"][lv][k] for lv in f["intervals"]
                                 for k in ("lo", "hi")])
            assert bounds.min() >= 0, sid
            if whole:
                np.testing.assert_array_equal(bounds, np.round(bounds))
                np.testing.assert_array_equal(f["median"], np.round(f["median"]))
    r = client.put("/v1/series/real", json={"values": history(runtime, 40)})
    assert r.json()["support"] == "real"


def test_forecast_uses_service_defaults(client: TestClient, runtime: Any) -> None:
    out = client.post("/v1/forecast", json={"series": [{"id": "a", "values": history(runtime)}]})
    assert out.status_code == 200, out.text
    body = out.json()
    assert (body["horizon"], body["levels"], body["num_samples"]) == (12, LEVELS, TEST_SAMPLES)
    check_forecast(body["forecasts"][0], 12)


def test_missing_values_in_history_are_accepted(client: TestClient, runtime: Any) -> None:
    values: list[float | None] = list(history(runtime))
    values[5] = values[9] = None
    r = client.post("/v1/forecast", json={"series": [{"id": "a", "values": values}], "horizon": 2})
    assert r.status_code == 200, r.text


# --------------------------------------------------------------------------- series lifecycle


def test_put_get_replace_delete(client: TestClient, runtime: Any) -> None:
    r = client.put("/v1/series/s1", json={"values": history(runtime, 30)})
    assert r.status_code == 201
    meta = r.json()
    assert meta["id"] == "s1" and meta["seq"] == 30 and meta["version"] == 1
    assert meta["particles"] > 0 and 0 < meta["ess"] <= meta["particles"] + 1e-6
    assert meta["state_bytes"] > 0 and meta["model_version"] == runtime.model_version
    assert client.get("/v1/series/s1").json() == meta

    r = client.put("/v1/series/s1", json={"values": history(runtime, 40)})
    assert r.status_code == 200
    assert (r.json()["seq"], r.json()["version"]) == (40, 2)
    assert r.json()["created_at"] == meta["created_at"] < r.json()["updated_at"]

    assert client.delete("/v1/series/s1").status_code == 204
    for method, path in [("GET", "/v1/series/s1"), ("DELETE", "/v1/series/s1"),
                         ("GET", "/v1/series/s1/forecast")]:
        r = client.request(method, path)
        assert r.status_code == 404 and r.json()["error"] == "series_not_found"
    r = client.post("/v1/series/s1/observations", json={"observations": [{"seq": 0, "value": 1}]})
    assert r.status_code == 404 and "PUT /v1/series/s1" in r.json()["message"]

    # created again: versions go on after the deleted series' events (the `deleted` one was
    # 3), so a follower resuming with an id of the old series misses none of the new one's
    r = client.put("/v1/series/s1", json={"values": history(runtime, 30)})
    assert r.status_code == 201 and r.json()["version"] == 4


def test_a_series_season_is_given_implied_by_its_frequency_or_none(
    client: TestClient, runtime: Any
) -> None:
    """season_length as given (1 is none), or the frequency's where the values show it (a
    daily cycle in 96 hours, none in a line); the state and the metadata keep it; both at
    once, or a frequency that is none, are refused naming the field, and nothing is created.
    The test model reads no season, so none is detected from the values."""
    values = history(runtime, 96)
    cycle = [v + 3.0 * float(np.sin(2 * np.pi * t / 24)) for t, v in enumerate(values)]
    quarters = [v + 3.0 * (t % 4 == 0) for t, v in enumerate(values)]
    line = [0.1 * t for t in range(96)]
    for body, season in (
        ({"season_length": 12}, 12), ({"season_length": 1}, 0),
        ({"freq": "h", "values": cycle}, 24), ({"freq": "h", "values": line}, 0),
        ({"freq": "QS", "values": quarters}, 4), ({"freq": "QS", "values": line}, 0), ({}, 0),
    ):
        r = client.put("/v1/series/seasonal", json={"values": values, **body})
        assert r.status_code in (200, 201) and r.json()["season_length"] == season, body
        assert client.get("/v1/series/seasonal").json()["season_length"] == season
    client.delete("/v1/series/seasonal")
    for body, field in (
        ({"season_length": 12, "freq": "MS"}, "season_length"), ({"freq": "weekly-ish"}, "freq"),
    ):
        r = client.put("/v1/series/refused", json={"values": values, **body})
        assert r.status_code == 422 and r.json()["fields"][0]["field"] == field, r.json()
        assert client.get("/v1/series/refused").status_code == 404
    r = client.post("/v1/forecast", json={"series": [{"id": "a", "values": values, "freq": "x"}]})
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "series[0].freq"
    r = client.post(
        "/v1/forecast", json={"series": [{"id": "a", "values": values, "season_length": 7}]}
    )
    assert r.status_code == 200


def test_a_forecast_is_dated_by_the_frequency_after_the_last_timestamp(
    client: TestClient, runtime: Any
) -> None:
    """`freq` with `last_timestamp`: each step's time stamp (a month's start after a mid-month
    last value, hours across a day); without them none; `last_timestamp` without `freq`, or
    one that is no time, is refused naming the field."""
    values = history(runtime, 48)
    for last, freq, expected in (
        ("2024-11-01", "MS", ["2024-12-01T00:00:00", "2025-01-01T00:00:00",
                              "2025-02-01T00:00:00"]),
        ("2024-11-15", "MS", ["2024-12-01T00:00:00", "2025-01-01T00:00:00",
                              "2025-02-01T00:00:00"]),
        ("2024-12-31T22:00:00", "h", ["2024-12-31T23:00:00", "2025-01-01T00:00:00",
                                      "2025-01-01T01:00:00"]),
    ):
        body = {"series": [{"id": "a", "values": values, "freq": freq, "last_timestamp": last},
                           {"id": "b", "values": values}], "horizon": 3}
        r = client.post("/v1/forecast", json=body)
        assert r.status_code == 200, r.json()
        dated, plain = r.json()["forecasts"]
        assert dated["timestamps"] == expected and "timestamps" not in plain
    for extra, field in (({"last_timestamp": "2024-11-01"}, "series[0].last_timestamp"),
                         ({"last_timestamp": "soon", "freq": "D"}, "series[0].last_timestamp")):
        r = client.post("/v1/forecast", json={"series": [{"id": "a", "values": values, **extra}]})
        assert r.status_code == 422 and field in r.text, r.json()


def test_a_series_forecast_is_dated_from_its_last_timestamp_and_its_seq(
    client: TestClient, runtime: Any
) -> None:
    """A series created with `freq` and `last_timestamp`: its forecast is dated from the month
    after, and two observations later from two months further; without them, undated;
    `last_timestamp` without `freq` is refused naming the field, and nothing is created."""
    values = history(runtime, 48)
    r = client.put("/v1/series/dated", json={"values": values, "freq": "MS",
                                             "last_timestamp": "2024-10-01T00:00:00"})
    assert r.status_code == 201, r.json()
    r = client.get("/v1/series/dated/forecast", params={"horizon": 2})
    assert r.json()["timestamps"] == ["2024-11-01T00:00:00", "2024-12-01T00:00:00"]
    obs = {"observations": [{"seq": 48, "value": 0.3}, {"seq": 49, "value": None}]}
    assert client.post("/v1/series/dated/observations", json=obs).status_code == 200
    r = client.get("/v1/series/dated/forecast", params={"horizon": 2})
    assert r.json()["timestamps"] == ["2025-01-01T00:00:00", "2025-02-01T00:00:00"]
    client.put("/v1/series/plain", json={"values": values, "freq": "MS"})
    assert "timestamps" not in client.get("/v1/series/plain/forecast").json()
    r = client.put("/v1/series/undated", json={"values": values,
                                               "last_timestamp": "2024-10-01T00:00:00"})
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "last_timestamp", r.json()
    assert client.get("/v1/series/undated").status_code == 404


def test_a_long_history_is_accepted_and_numbered_whole(client: TestClient, runtime: Any) -> None:
    """5,000 values: the filter runs on the last SMCT_MAX_FILTER_STEPS of them (a bounded
    model time; it used to hold the model thread for a step per value), and the series still
    counts them all: seq 5000 is the next observation."""
    assert runtime.max_filter_steps < 5000
    r = client.put("/v1/series/long", json={"values": history(runtime, 5000)})
    assert r.status_code == 201 and r.json()["seq"] == 5000
    obs = {"observations": [{"seq": 5000, "value": 0.4}]}
    r = client.post("/v1/series/long/observations", json=obs)
    assert r.status_code == 200 and r.json()["seq"] == 5001
    r = client.post("/v1/forecast", json={"series": [{"id": "a", "values": history(runtime, 5000)}],
                                          "horizon": 2})
    assert r.status_code == 200 and len(r.json()["forecasts"][0]["mean"]) == 2


def test_observation_scores_the_issued_forecast(client: TestClient, runtime: Any) -> None:
    meta = put(client, runtime)
    t = meta["seq"]
    r = observe(client, t, 0.3)
    assert r.status_code == 200, r.text
    ObservationsResponse.model_validate_json(r.text)  # the documented schema
    out = r.json()
    assert (out["id"], out["seq"], out["version"]) == ("s1", t + 1, 2)
    (res,) = out["observations"]
    assert res["seq"] == t and res["value"] == pytest.approx(0.3)
    assert sorted(res["intervals"]) == LEVELS
    for level in LEVELS:
        lo, hi = res["intervals"][level]["lo"], res["intervals"][level]["hi"]
        assert lo <= hi
        assert res["covered"][level] == (lo <= 0.3 <= hi)
    assert res["anomaly"] == (not res["covered"]["95"])
    assert 0.0 <= res["pit"] <= 1.0
    assert math.isfinite(res["log_score"]) and res["crps"] >= 0.0
    assert 0 < res["ess"] <= meta["particles"] + 1e-6
    assert isinstance(res["resampled"], bool)
    check_forecast(out["forecast"], 12)
    after = client.get("/v1/series/s1").json()
    assert (after["seq"], after["version"]) == (t + 1, 2)


def test_several_observations_and_a_missing_one(client: TestClient, runtime: Any) -> None:
    t = put(client, runtime)["seq"]
    obs = [{"seq": t, "value": 0.1}, {"seq": t + 1, "value": None}, {"seq": t + 2, "value": -0.2}]
    r = client.post("/v1/series/s1/observations", json={"observations": obs, "horizon": 4})
    assert r.status_code == 200, r.text
    out = r.json()
    assert [o["seq"] for o in out["observations"]] == [t, t + 1, t + 2]
    missing = out["observations"][1]
    assert missing["value"] is None and missing["covered"] is None and missing["pit"] is None
    assert missing["anomaly"] is None and missing["log_score"] is None
    assert out["seq"] == t + 3 and out["version"] == 2
    check_forecast(out["forecast"], 4)


def test_repeated_seq_is_idempotent(client: TestClient, runtime: Any) -> None:
    t = put(client, runtime)["seq"]
    body = {"observations": [{"seq": t, "value": 1.5}, {"seq": t + 1, "value": 2.5}]}
    first = client.post("/v1/series/s1/observations", json=body)
    again = client.post("/v1/series/s1/observations", json=body)
    assert first.status_code == again.status_code == 200
    assert again.content == first.content  # the same bytes, rendered from the same record
    ObservationsResponse.model_validate_json(again.text)
    assert again.headers["Idempotent-Replay"] == "true"
    assert "Idempotent-Replay" not in first.headers
    meta = client.get("/v1/series/s1").json()
    assert (meta["seq"], meta["version"]) == (t + 2, 2)  # no second update
    # the same value written differently (int for float) is the same observation
    one = client.post("/v1/series/s1/observations",
                      json={"observations": [{"seq": t + 1, "value": 2.5}]})
    assert one.status_code == 200
    assert one.json()["observations"] == first.json()["observations"][1:]


def test_a_seq_remembered_in_the_former_format_is_refused_as_too_old_to_repeat(
    make_client: Any, runtime: Any, redis_url: str
) -> None:
    """Redis data written before writes were remembered whole kept a record per seq (its first
    line the value): it is not read, so a repeat of that seq is the 409 of a seq older than the
    writes remembered, which changes nothing, and the series goes on."""
    import redis

    client = make_client(redis_url=redis_url)
    t = put(client, runtime)["seq"]
    assert observe(client, t, 0.5).status_code == 200
    raw = redis.Redis.from_url(redis_url)
    raw.delete("smct:{s1}:applied")
    raw.hset("smct:{s1}:applied", str(t), "[0.5]\n2\n1\nw")  # value, version, ending, writer
    again = observe(client, t, 0.5)
    assert again.status_code == 409 and again.json()["next_seq"] == t + 1
    assert "cannot be repeated" in again.json()["message"]
    assert client.get("/v1/series/s1").json()["version"] == 2
    assert observe(client, t + 1, 1.5).status_code == 200
    raw.close()


def test_partly_repeated_request_applies_only_new_seqs(client: TestClient, runtime: Any) -> None:
    t = put(client, runtime)["seq"]
    first = observe(client, t, 1)
    both = client.post(
        "/v1/series/s1/observations",
        json={"observations": [{"seq": t, "value": 1.0}, {"seq": t + 1, "value": 2}]},
    )
    assert both.status_code == 200, both.text
    assert both.json()["observations"][0] == first.json()["observations"][0]
    assert both.json()["seq"] == t + 2 and both.json()["version"] == 3


def test_gap_and_changed_value_are_409_with_the_next_seq(client: TestClient, runtime: Any) -> None:
    t = put(client, runtime)["seq"]
    gap = observe(client, t + 2, 1)
    assert gap.status_code == 409
    assert gap.json()["next_seq"] == t and f"next seq is {t}" in gap.json()["message"]
    observe(client, t, 1)
    changed = observe(client, t, 2)
    assert changed.status_code == 409 and changed.json()["next_seq"] == t + 1
    old = observe(client, 3, 2)
    assert old.status_code == 409 and old.json()["next_seq"] == t + 1
    meta = client.get("/v1/series/s1").json()
    assert (meta["seq"], meta["version"]) == (t + 1, 2)


def test_forecast_from_stored_state(client: TestClient, runtime: Any) -> None:
    put(client, runtime)
    query = {"horizon": 3, "levels": "50,90", "num_samples": 100}
    r = client.get("/v1/series/s1/forecast", params=query)
    assert r.status_code == 200, r.text
    check_forecast(r.json(), 3, ["50", "90"])
    query2 = "horizon=2&levels=80&levels=99.5&return_samples=true&num_samples=20"
    r = client.get(f"/v1/series/s1/forecast?{query2}")
    assert r.status_code == 200, r.text
    check_forecast(r.json(), 2, ["80", "99.5"])
    assert np.asarray(r.json()["samples"]).shape == (20, 2)
    assert client.get("/v1/series/s1/forecast").status_code == 200


def test_models_and_health(client: TestClient, runtime: Any) -> None:
    (model,) = client.get("/v1/models").json()["models"]
    assert model["model_version"] == runtime.model_version
    assert model["n_features"] == runtime.n_features and model["min_history"] == runtime.min_history
    assert isinstance(model["manifest"], dict)
    assert client.get("/health/live").json()["status"] == "ok"
    ready = client.get("/health/ready")
    assert ready.status_code == 200 and ready.json()["checks"] == {"artifact": "ok", "store": "ok"}


def test_openapi_documents_every_route_with_examples(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    for path, method in [
        ("/v1/forecast", "post"), ("/v1/forecast/stream", "post"),
        ("/v1/series/{series_id}", "put"),
        ("/v1/series/{series_id}", "get"), ("/v1/series/{series_id}", "delete"),
        ("/v1/series/{series_id}/observations", "post"), ("/v1/series/{series_id}/forecast", "get"),
        ("/v1/series/{series_id}/events", "get"), ("/v1/models", "get"), ("/health/live", "get"),
        ("/health/ready", "get"), ("/metrics", "get"),
    ]:
        assert method in paths[path], (path, method)
        assert paths[path][method].get("summary")
    schemas = spec["components"]["schemas"]
    for name in ("ForecastRequest", "SeriesCreate", "ObservationsRequest", "ErrorBody"):
        assert schemas[name].get("examples"), name
    assert "422" in paths["/v1/series/{series_id}/observations"]["post"]["responses"]
    # what /docs sends by default, the first example of each body, is accepted as it is
    first = {name: schemas[name]["examples"][0] for name in (
        "ForecastRequest", "SeriesCreate", "ObservationsRequest", "SeriesForecastRequest")}
    assert client.post("/v1/forecast", json=first["ForecastRequest"]).status_code == 200
    created = client.put("/v1/series/example", json=first["SeriesCreate"])
    assert created.status_code == 201, created.text
    assert first["ObservationsRequest"]["observations"][0]["seq"] == created.json()["seq"]
    r = client.post("/v1/series/example/observations", json=first["ObservationsRequest"])
    assert r.status_code == 200, r.text
    r = client.post("/v1/series/example/forecast", json=first["SeriesForecastRequest"])
    assert r.status_code == 200, r.text
    assert "409" in paths["/v1/series/{series_id}/observations"]["post"]["responses"]


def test_a_forecast_is_re_fetched_for_free_until_the_series_changes(
    client: TestClient, runtime: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GET forecast carries an ETag; the same GET with it in If-None-Match is 304 with no body
    and no path drawn; an unchanged state gives the same bytes; an update, other parameters or
    a replaced series give another tag (and a 200)."""
    t = put(client, runtime)["seq"]
    url = "/v1/series/s1/forecast?horizon=4&levels=80"
    first = client.get(url)
    assert first.status_code == 200 and first.headers["etag"].startswith('"')
    tag = first.headers["etag"]
    drawn = []
    real = runtime.forecast
    monkeypatch.setattr(runtime, "forecast", lambda *a, **k: drawn.append(1) or real(*a, **k))
    again = client.get(url)
    assert again.content == first.content and again.headers["etag"] == tag and len(drawn) == 1
    for header in (tag, f'W/{tag}, "other"', "*"):
        cached = client.get(url, headers={"If-None-Match": header})
        assert cached.status_code == 304 and cached.content == b"" and len(drawn) == 1
        assert cached.headers["etag"] == tag
    other = client.get(url, headers={"If-None-Match": '"not-it"'})
    assert other.status_code == 200 and len(drawn) == 2
    wider = client.get("/v1/series/s1/forecast?horizon=5&levels=80", headers={"If-None-Match": tag})
    assert wider.status_code == 200 and wider.headers["etag"] != tag
    assert observe(client, t, 0.3).status_code == 200
    after = client.get(url, headers={"If-None-Match": tag})
    assert after.status_code == 200 and after.headers["etag"] != tag
    put(client, runtime)  # replaced: a new state, a new tag
    assert client.get(url, headers={"If-None-Match": after.headers["etag"]}).status_code == 200
