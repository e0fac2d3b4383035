"""Errors: 422 naming the field and the fix, 401, 404, 413, and never a 500 for bad input."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.errors import InvalidInput
from tests.service.conftest import AppFactory
from tests.service.test_api import history, observe, put

JSON = {"content-type": "application/json"}


@pytest.fixture
def app_client(make_client: AppFactory) -> TestClient:
    """The embedded store suffices: input is checked before the store is touched."""
    return make_client(max_horizon=48, max_samples=500, max_body_bytes=64 * 1024)


def assert_422(r: Any, field: str, *words: str) -> None:
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "invalid_input"
    assert any(f["field"] == field for f in body["fields"]), body
    for word in words:
        assert word in body["message"], (word, body["message"])


def forecast(client: TestClient, runtime: Any, **fields: Any) -> Any:
    body = {"series": [{"id": "a", "values": history(runtime)}], **fields}
    return client.post("/v1/forecast", json=body)


def test_non_numeric_values(app_client: TestClient, runtime: Any) -> None:
    values: list[Any] = list(history(runtime))
    values[3] = "12"
    r = app_client.post("/v1/forecast", json={"series": [{"id": "a", "values": values}]})
    assert_422(r, "series[0].values", "values[3]", "not a number", "null for a missing value")
    bad: Any
    for bad in (True, {"x": 1}, []):
        values[3] = bad
        r = app_client.put("/v1/series/x", json={"values": values})
        assert r.status_code == 422, (bad, r.text)
    r = observe(app_client, 0, "a", "x")
    assert_422(r, "observations[0].value", "not a number")


def test_non_finite_values(app_client: TestClient, runtime: Any) -> None:
    text = '{"series": [{"id": "a", "values": [1.0, NaN, 2.0, Infinity]}]}'
    r = app_client.post("/v1/forecast", content=text, headers=JSON)
    assert_422(r, "series[0].values", "not finite")
    r = app_client.post("/v1/forecast", json={"series": [{"id": "a", "values": [1.0, 2.0, 1e300]}]})
    assert_422(r, "series[0].values[2]", "float32", "rescale")


def test_wrong_feature_count(app_client: TestClient, runtime: Any) -> None:
    f = runtime.n_features
    values: list[Any] = list(history(runtime))
    values[2] = [1.0] * (f + 1)
    r = app_client.post("/v1/forecast", json={"series": [{"id": "a", "values": values}]})
    assert_422(r, "series[0].values[2]", f"has {f + 1} features", f"takes {f}")
    put(app_client, runtime)
    t = app_client.get("/v1/series/s1").json()["seq"]
    r = app_client.post("/v1/series/s1/observations",
                        json={"observations": [{"seq": t, "value": [1.0] * (f + 1)}]})
    assert_422(r, "observations[0].value", "features")


def test_empty_or_short_history(app_client: TestClient, runtime: Any) -> None:
    r = app_client.put("/v1/series/x", json={"values": []})
    assert_422(r, "values", "at least 1")
    r = app_client.put("/v1/series/x", json={"values": [None] * max(runtime.min_history, 3)})
    assert_422(r, "values", "no observed value")
    if runtime.min_history > 1:
        short = history(runtime)[: runtime.min_history - 1]
        r = app_client.put("/v1/series/x", json={"values": short})
        assert_422(r, "values", f"at least {runtime.min_history}")
    r = app_client.post("/v1/forecast", json={"series": []})
    assert_422(r, "series", "at least 1")


def test_configured_maxima(app_client: TestClient, runtime: Any) -> None:
    assert_422(forecast(app_client, runtime, horizon=49), "horizon", "SMCT_MAX_HORIZON", "48")
    assert_422(forecast(app_client, runtime, num_samples=501), "num_samples", "SMCT_MAX_SAMPLES")
    assert_422(forecast(app_client, runtime, horizon=0), "horizon", "greater than or equal to 1")
    # far over: still the configured maximum, not a bound of the schema
    assert_422(forecast(app_client, runtime, horizon=10**7), "horizon", "SMCT_MAX_HORIZON", "48")
    assert_422(forecast(app_client, runtime, num_samples=10**9), "num_samples", "SMCT_MAX_SAMPLES")
    put(app_client, runtime)
    r = app_client.get("/v1/series/s1/forecast?horizon=100")
    assert_422(r, "horizon", "SMCT_MAX_HORIZON")


def test_work_limits_per_request(make_client: AppFactory, runtime: Any) -> None:
    """series x samples x horizon (model time) is bounded per request, series x samples
    (paths moved together) per stream, with a message that says how to split the request."""
    client = make_client(max_paths=300, max_sample_steps=1200)
    series = [{"id": str(i), "values": history(runtime, 30, i)} for i in range(4)]
    r = client.post("/v1/forecast", json={"series": series, "num_samples": 100, "horizon": 2})
    assert r.status_code == 200, r.text  # 400 paths: a whole forecast is computed in chunks
    r = client.post("/v1/forecast/stream", json={"series": series, "num_samples": 100,
                                                 "horizon": 2})
    assert_422(r, "series", "400 sample paths", "SMCT_MAX_PATHS", "smaller requests")
    r = client.post("/v1/forecast", json={"series": series[:3], "num_samples": 100, "horizon": 5})
    assert_422(r, "series", "1500 sample steps", "SMCT_MAX_SAMPLE_STEPS")
    r = client.post("/v1/forecast", json={"series": series[:1], "num_samples": 100,
                                          "horizon": 13})
    assert_422(r, "num_samples", "1300 sample steps")
    put(client, runtime)
    assert_422(client.get("/v1/series/s1/forecast?horizon=13&num_samples=100"), "num_samples",
               "SMCT_MAX_SAMPLE_STEPS")


def test_default_work_limits_admit_what_the_other_limits_allow() -> None:
    """Unset, SMCT_MAX_SAMPLE_STEPS admits one series at the maximum samples and horizon and
    the largest request at the default samples and horizon, whatever those are set to."""
    from service.inputs import forecast_params
    from service.schemas.values import MAX_SERIES
    from service.settings import Settings

    for settings in (Settings(), Settings(max_horizon=512, max_samples=20_000)):
        forecast_params(settings, horizon=settings.max_horizon, levels=None,
                        num_samples=settings.max_samples)
        forecast_params(settings, horizon=None, levels=None, num_samples=None,
                        n_series=MAX_SERIES)
    over = Settings().sample_steps_limit // (256 * 10_000) + 1  # series
    with pytest.raises(InvalidInput, match="SMCT_MAX_SAMPLE_STEPS"):
        forecast_params(Settings(), horizon=256, levels=None, num_samples=10_000, n_series=over)


def test_default_samples_follow_the_levels_within_the_limits() -> None:
    """A request that names no sample count gets the count its levels need
    (model/filtering/predictive.samples_for), never more than the limits admit, so that it is
    not refused for a count it did not ask for."""
    from model.filtering.predictive import samples_for
    from service.inputs import forecast_params
    from service.settings import Settings

    free = Settings()
    assert forecast_params(free, horizon=12, levels=None, num_samples=None).n_samples == 1162
    wide = forecast_params(free, horizon=12, levels=(50.0, 99.0), num_samples=None)
    assert wide.n_samples == samples_for([0.5, 0.99]) == 2551
    tight = Settings(max_sample_steps=12_000, max_paths=3_000)
    assert forecast_params(tight, horizon=12, levels=None, num_samples=None).n_samples == 1000
    streamed = forecast_params(tight, horizon=2, levels=None, num_samples=None, n_series=3,
                               stream=True)
    assert streamed.n_samples == 1000
    assert forecast_params(Settings(default_samples=300), horizon=12, levels=None,
                           num_samples=None).n_samples == 300


def test_levels_outside_0_100(app_client: TestClient, runtime: Any) -> None:
    assert_422(forecast(app_client, runtime, levels=[0, 80]), "levels[0]", "greater than 0")
    assert_422(forecast(app_client, runtime, levels=[100]), "levels[0]", "less than 100")
    put(app_client, runtime)
    r = app_client.get("/v1/series/s1/forecast?levels=80,120")
    assert_422(r, "query.levels", "outside (0, 100)")
    r = app_client.get("/v1/series/s1/forecast?levels=abc")
    assert_422(r, "query.levels", "not a number")


def test_levels_keep_their_digits_and_are_limited(app_client: TestClient, runtime: Any) -> None:
    """A level keeps the digits it was asked with, in the GET's query and the POST's body (not
    rounded to 6 digits: 99.99999 is not 100, 12.3456789 not 12.3457); NaN is refused as not
    finite; a GET asks for at most 16 levels, as a body does."""
    r = forecast(app_client, runtime, levels=[12.3456789, 99.99999], horizon=2, num_samples=50)
    assert r.status_code == 200, r.text
    assert set(r.json()["forecasts"][0]["intervals"]) == {"12.3456789", "99.99999"}
    put(app_client, runtime)
    r = app_client.get("/v1/series/s1/forecast?levels=99.99999,12.3456789&horizon=2")
    assert r.status_code == 200, r.text
    assert set(r.json()["intervals"]) == {"12.3456789", "99.99999"}
    assert_422(app_client.get("/v1/series/s1/forecast?levels=nan"), "query.levels", "outside")
    r = app_client.post(
        "/v1/forecast", content=b'{"series": [{"id": "a", "values": [1, 2, 3]}], "levels": [NaN]}',
        headers=JSON,
    )
    assert r.status_code == 422 and "finite" in r.text, r.text
    many = ",".join(str(10 + i) for i in range(17))
    assert_422(app_client.get(f"/v1/series/s1/forecast?levels={many}"), "query.levels", "16")


def test_return_samples_takes_booleans_only(app_client: TestClient, runtime: Any) -> None:
    for flag in (0, 1, "1", "yes", "true"):
        assert_422(forecast(app_client, runtime, return_samples=flag), "return_samples")
    put(app_client, runtime)
    for flag in ("1", "yes", "on", "True"):
        r = app_client.get(f"/v1/series/s1/forecast?horizon=1&return_samples={flag}")
        assert_422(r, "query.return_samples", "true or false")
    r = app_client.get("/v1/series/s1/forecast?horizon=1&num_samples=5&return_samples=true")
    assert r.status_code == 200 and len(r.json()["samples"]) == 5, r.text


def test_the_openapi_document_lists_201_on_create(app_client: TestClient) -> None:
    put_op = app_client.get("/openapi.json").json()["paths"]["/v1/series/{series_id}"]["put"]
    assert {"200", "201"} <= set(put_op["responses"])


def test_unknown_fields_and_bad_json(app_client: TestClient, runtime: Any) -> None:
    assert_422(forecast(app_client, runtime, horizn=3), "horizn", "remove this field")
    r = app_client.post("/v1/forecast", content=b"{not json", headers=JSON)
    assert r.status_code == 422 and "JSON" in r.json()["message"]
    r = app_client.put("/v1/series/x", json=[1, 2, 3])
    assert r.status_code == 422
    # bodies json.loads cannot start on: FastAPI's bare 400 "error parsing the body" before
    for raw in (b'\xff\xfe{"values": [1]}', b"[" * 5000 + b"]" * 5000):
        r = app_client.put("/v1/series/x", content=raw, headers=JSON)
        assert r.status_code == 422, r.text
        assert "not UTF-8, or it nests too deeply" in r.json()["message"]


def test_bad_series_id_and_seqs(app_client: TestClient, runtime: Any) -> None:
    r = app_client.put("/v1/series/bad%20id!", json={"values": history(runtime)})
    assert_422(r, "path.series_id", "the id 'bad id!' is not allowed; use letters, digits")
    # a stateless series' id is a label: any text, answered back as given
    cities = [{"id": name, "values": history(runtime)} for name in ("Los Angeles", "São Paulo")]
    r = app_client.post("/v1/forecast", json={"series": cities, "horizon": 2})
    assert r.status_code == 200 and [f["id"] for f in r.json()["forecasts"]] == [
        "Los Angeles", "São Paulo"]
    r = app_client.post("/v1/forecast", json={"series": [{"id": "tab\there",
                                                         "values": history(runtime)}]})
    assert_422(r, "series[0].id", "the id 'tab\\there' is not allowed; send 1 to 128")
    obs = [{"seq": 5, "value": 1}, {"seq": 7, "value": 1}]
    r = app_client.post("/v1/series/x/observations", json={"observations": obs})
    assert_422(r, "observations", "consecutive")
    r = observe(app_client, -1, 1, "x")
    assert_422(r, "observations[0].seq", "greater than or equal to 0")
    dup = {"series": [{"id": "a", "values": history(runtime)}] * 2}
    assert_422(app_client.post("/v1/forecast", json=dup), "series", "appears twice")


def test_oversized_body_is_413(app_client: TestClient, runtime: Any) -> None:
    big = {"values": [0.5] * 20_000}  # ~100 kB > 64 kB
    r = app_client.put("/v1/series/x", json=big)
    assert r.status_code == 413 and "SMCT_MAX_BODY_BYTES" in r.json()["message"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit applies as it streams
        yield b'{"values": ['
        for _ in range(20_000):
            yield b"0.5, "
        yield b"0.5]}"

    r = app_client.put("/v1/series/x", content=chunks(), headers=JSON)
    assert r.status_code == 413


def test_api_keys(make_client: AppFactory, runtime: Any) -> None:
    client = make_client(api_keys="k1, k2")
    body = {"series": [{"id": "a", "values": history(runtime)}], "horizon": 2}
    r = client.post("/v1/forecast", json=body)
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert "Authorization: Bearer" in r.json()["message"]
    r = client.post("/v1/forecast", json=body, headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    r = client.post("/v1/forecast", json=body, headers={"Authorization": "Basic azE6"})
    assert r.status_code == 401
    for key in ("k1", "k2"):
        r = client.post("/v1/forecast", json=body, headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 200, r.text
    assert client.get("/v1/models").status_code == 401
    for open_path in ("/health/live", "/health/ready", "/metrics"):
        assert client.get(open_path).status_code == 200
    # the key is checked before the body is read: an anonymous client's malformed or invalid
    # body is a 401 that asks for a key, not a 422 with the parser's details
    for raw in (b'{"series": [', b'{"values": "' + b"x" * 100 + b'"}'):
        for method, path in (("POST", "/v1/forecast"), ("PUT", "/v1/series/a")):
            r = client.request(method, path, content=raw, headers=JSON)
            assert r.status_code == 401 and r.json()["error"] == "unauthorized", r.text
            assert r.headers["WWW-Authenticate"] == "Bearer"
    keyed = {**JSON, "Authorization": "Bearer k1"}
    r = client.post("/v1/forecast", content=b'{"series": [', headers=keyed)
    assert r.status_code == 422


def test_unknown_route_and_method(app_client: TestClient) -> None:
    r = app_client.get("/v1/nothing")
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    assert "GET /v1/nothing" in r.json()["message"] and "/docs" in r.json()["message"]
    r = app_client.patch("/v1/series/x", json={})
    assert r.status_code == 405
    # an id with a slash is no route at all: the 404 says what an id may hold
    for path in ("/v1/series/a/b", "/v1/series/a%2Fb"):
        r = app_client.put(path, json={"values": [1.0, 2.0, 3.0]})
        assert r.status_code == 404 and "holds no slash" in r.json()["message"], r.text


def test_refusals_read_as_sentences(app_client: TestClient, runtime: Any) -> None:
    """No pydantic prefixes ("Value error, ") and no "[0]" field for a body that does not
    parse: the message names the body and where it broke."""
    r = app_client.post("/v1/forecast", content=b'{"series": [',
                        headers={"content-type": "application/json"})
    assert_422(r, "body", "JSON decode error at character", "valid JSON")
    assert r.json()["fields"][0]["field"] == "body"
    twice = [{"id": "a", "values": history(runtime)}] * 2
    r = app_client.post("/v1/forecast", json={"series": twice})
    assert_422(r, "series", "appears twice")
    r = app_client.get("/v1/series/zz/forecast?levels=0")
    assert r.status_code == 422 and "Value error" not in r.text, r.text


GARBAGE: list[Any] = [
    None, 0, "x", [], {}, {"values": None}, {"values": [[]]}, {"values": [[None]]},
    {"values": [1e308, -1e308, 1e-308]}, {"values": [[1, 2], 3]}, {"observations": None},
    {"observations": [{}]}, {"observations": [{"seq": 1e20, "value": 1}]},
    {"observations": [{"seq": "1", "value": 1}]}, {"observations": [{"seq": 2**70, "value": 1}]},
    {"series": [{"id": "", "values": [1]}]},
    {"series": [{"id": "a", "values": [1, 2]}], "horizon": 1.5},
    {"series": [{"id": "a", "values": [1, 2, 3]}], "levels": [50, 50, 50]},
    {"series": [{"id": "a", "values": [1, 2, 3]}], "num_samples": -5},
    {"series": [{"id": "a", "values": [1, 2, 3]}], "return_samples": "yes"},
]


def test_no_input_makes_it_answer_500(app_client: TestClient, runtime: Any) -> None:
    put(app_client, runtime)
    targets = [
        ("POST", "/v1/forecast"), ("POST", "/v1/forecast/stream"), ("PUT", "/v1/series/g"),
        ("PUT", "/v1/series/s1"), ("POST", "/v1/series/s1/observations"),
        ("POST", "/v1/series/zz/observations"),
    ]
    for method, path in targets:
        for body in GARBAGE:
            r = app_client.request(method, path, json=body)
            assert r.status_code < 500, (method, path, body, r.status_code, r.text)
    for query in ("horizon=-1", "horizon=x", "num_samples=0", "levels=", "levels=nan",
                  "return_samples=maybe", "levels=1e400"):
        r = app_client.get(f"/v1/series/s1/forecast?{query}")
        assert r.status_code < 500, (query, r.text)
    for bad in ("abc", "-1", str(2**64)):  # Redis stream ids stop at 2^64 - 1
        r = app_client.get("/v1/series/s1/events", headers={"Last-Event-ID": bad})
        assert r.status_code == 422 and "last-event-id" in r.text.lower(), (bad, r.text)


def test_a_body_without_the_json_content_type_says_so(app_client: TestClient) -> None:
    body = '{"series": [{"id": "a", "values": [1, 2, 3, 4, 5, 6, 7, 8]}]}'
    r = app_client.post(
        "/v1/forecast", content=body, headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert r.status_code == 422
    assert "Content-Type: application/json" in r.json()["message"]
    r = app_client.put("/v1/series/x", json={"values": "abc"})
    assert r.status_code == 422
    assert r.json()["message"] == "values: send a JSON array of values"  # said once
