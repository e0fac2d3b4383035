"""Property-based fuzzing of the API: no input answers 500, every refusal says what to fix,
and a refused observation changes nothing.

Each example takes a valid request body of an endpoint and breaks it in one place: a value
replaced by arbitrary JSON (nested lists and objects, strings, booleans, huge integers,
NaN and infinities, which Python's JSON parser accepts), a key removed or an unknown key
added. Hypothesis runs derandomized (a fixed sequence of examples, the same on every run) and
without its example database, so the test is deterministic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.service.test_api import history

SETTINGS = settings(
    max_examples=120,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
SPECIAL = st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e-308, 1e21])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | SPECIAL
    | st.text(max_size=6)
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)

# replacements a valid body may well take (a value, a missing one, a small count), so that
# the accepted path is exercised too; each test checks that some examples were accepted
BENIGN = st.floats(min_value=-50.0, max_value=50.0) | st.none() | st.integers(1, 4)

Path = tuple[str | int, ...]


def paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every place in a JSON value: (key or index, ...)."""
    out: list[Path] = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):  # a few items of long lists are enough
            out += paths(v, (*prefix, i))
    return out


def mutated(base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """`base` broken in one place: a value replaced, a key removed, or an unknown key added."""

    def apply(path: Path, how: str, value: Any) -> dict[str, Any]:
        body = json.loads(json.dumps(base))
        parent: Any = body
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if how == "replace":
            parent[last] = value
        elif how == "remove" and isinstance(parent, dict):
            del parent[last]
        elif isinstance(parent, dict):
            parent[f"{last}_extra"] = value
        else:
            parent[last] = value
        return dict(body)

    return st.builds(
        apply,
        st.sampled_from(paths(base)),
        st.sampled_from(["replace", "replace", "remove", "add"]),
        JSON_VALUES | BENIGN,
    )


def send(client: TestClient, method: str, url: str, body: Any) -> Any:
    """The body as Python's json.dumps writes it (NaN and Infinity tokens included)."""
    content = json.dumps(body, allow_nan=True)
    return client.request(
        method, url, content=content, headers={"Content-Type": "application/json"}
    )


def check_answer(r: Any) -> None:
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code >= 400:
        body = r.json()
        assert body["error"] and body["message"], body
    elif r.headers.get("content-type", "").startswith("application/json"):
        answer = json.loads(r.text, parse_constant=_no_constant)  # answers are strict JSON
        for numbers in _summaries(answer):  # and an answered forecast has every number
            assert all(v is not None for v in numbers), r.text[:300]


def _summaries(value: Any) -> list[list[Any]]:
    """Every mean, median and interval bound list of an answer (forecasts may be null)."""
    out: list[list[Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("mean", "median", "lo", "hi") and isinstance(item, list):
                out.append([v for v in item if not isinstance(v, list)]
                           + [w for v in item if isinstance(v, list) for w in v])
            else:
                out += _summaries(item)
    elif isinstance(value, list):
        for item in value:
            out += _summaries(item)
    return out


def _no_constant(name: str) -> Any:
    raise AssertionError(f"the answer holds {name}, which is not JSON")


@pytest.fixture
def fuzz_client(make_client: Callable[..., TestClient], store_url: str | None) -> TestClient:
    """On both state stores (the embedded one and a real Redis)."""
    return make_client(redis_url=store_url, max_horizon=48, max_samples=400)


def test_stateless_forecasts_and_streams_never_fail(fuzz_client: TestClient, runtime: Any) -> None:
    base = {
        "series": [{"id": "a", "values": history(runtime)}],
        "horizon": 3, "levels": [80, 95], "num_samples": 50, "return_samples": True,
    }

    assert send(fuzz_client, "POST", "/v1/forecast", base).status_code == 200
    accepted = []

    @SETTINGS
    @given(mutated(base))
    def run(body: dict[str, Any]) -> None:
        r = send(fuzz_client, "POST", "/v1/forecast", body)
        check_answer(r)
        accepted.append(r.status_code < 300)
        r = send(fuzz_client, "POST", "/v1/forecast/stream", body)
        assert r.status_code < 500, r.text
        if r.status_code < 300:  # refusals come before the stream starts: a started one ends
            events = [e for e in r.text.replace("\r\n", "\n").split("\n\n") if e.strip()]
            assert events[-1].startswith("event: done"), r.text[-300:]
            done = json.loads(events[-1].split("data: ", 1)[1])
            assert len(events) == done["horizon"] + 1, r.text[-300:]

    run()
    assert 0 < sum(accepted) < len(accepted)  # both paths were taken


def test_series_creation_never_fails(fuzz_client: TestClient, runtime: Any) -> None:
    base = {"values": history(runtime)}
    accepted = []

    @SETTINGS
    @given(mutated(base))
    def run(body: dict[str, Any]) -> None:
        r = send(fuzz_client, "PUT", "/v1/series/fz", body)
        check_answer(r)
        accepted.append(r.status_code < 300)
        if r.status_code < 300:  # what was answered is what is stored
            assert fuzz_client.get("/v1/series/fz").json()["seq"] == r.json()["seq"]

    run()
    assert 0 < sum(accepted) < len(accepted)


def test_a_refused_observation_changes_nothing(fuzz_client: TestClient, runtime: Any) -> None:
    assert fuzz_client.put("/v1/series/ob", json={"values": history(runtime)}).status_code == 201
    accepted = []

    def base(seq: int) -> dict[str, Any]:
        return {
            "observations": [{"seq": seq, "value": 0.3}, {"seq": seq + 1, "value": None}],
            "horizon": 2, "num_samples": 40,
        }

    seq0 = fuzz_client.get("/v1/series/ob").json()["seq"]
    assert send(fuzz_client, "POST", "/v1/series/ob/observations", base(seq0)).status_code == 200

    @SETTINGS
    @given(st.data())
    def run(data: st.DataObject) -> None:
        before = fuzz_client.get("/v1/series/ob").json()
        seq = before["seq"]
        body = data.draw(mutated(base(seq)))
        r = send(fuzz_client, "POST", "/v1/series/ob/observations", body)
        check_answer(r)
        accepted.append(r.status_code < 300)
        after = fuzz_client.get("/v1/series/ob").json()
        if r.status_code >= 400:
            assert (after["seq"], after["version"]) == (seq, before["version"]), r.text
        else:
            applied = r.json()["observations"]
            assert after["seq"] == seq + sum(1 for o in applied if o["seq"] >= seq), r.text

    run()
    assert 0 < sum(accepted) < len(accepted)


def test_stored_forecasts_never_fail(fuzz_client: TestClient, runtime: Any) -> None:
    assert fuzz_client.put("/v1/series/fc", json={"values": history(runtime)}).status_code == 201
    queries = st.dictionaries(
        st.sampled_from(["horizon", "levels", "num_samples", "return_samples", "other"]),
        st.one_of(st.text(max_size=6), st.integers(-(10**30), 10**30).map(str), SPECIAL.map(str)),
        max_size=4,
    )
    base = {"horizon": 2, "levels": [50, 99.5], "num_samples": 30}
    assert send(fuzz_client, "POST", "/v1/series/fc/forecast", base).status_code == 200

    accepted = []

    @SETTINGS
    @given(queries, mutated(base))
    def run(query: dict[str, str], body: dict[str, Any]) -> None:
        r = fuzz_client.get("/v1/series/fc/forecast", params=query)
        check_answer(r)
        accepted.append(r.status_code < 300)
        r = send(fuzz_client, "POST", "/v1/series/fc/forecast", body)
        check_answer(r)
        accepted.append(r.status_code < 300)

    run()
    assert 0 < sum(accepted[0::2]) < len(accepted) // 2  # GETs
    assert 0 < sum(accepted[1::2]) < len(accepted) // 2  # POSTs


def test_bodies_that_are_not_json_objects_are_refused(fuzz_client: TestClient) -> None:
    assert fuzz_client.put("/v1/series/raw", json={"values": [1.0] * 30}).status_code == 201
    seq = fuzz_client.get("/v1/series/raw").json()["seq"]
    texts = st.one_of(
        st.text(max_size=40),
        st.binary(max_size=40),
        st.sampled_from([b"\xff\xfe{}", b'{"values": [1, "\xc3"]}']),
        JSON_VALUES.map(lambda v: json.dumps(v, allow_nan=True)),
        st.sampled_from(['{"values": [1, 2', '{"observations": [{"seq": 0, "value": }]}',
                         "[" * 5000 + "]" * 5000, '{"values": NaN}', "\ufeff{}"]),
    )
    routes = [("POST", "/v1/forecast"), ("PUT", "/v1/series/raw2"),
              ("POST", "/v1/series/raw/observations"), ("POST", "/v1/series/raw/forecast")]

    @SETTINGS
    @given(st.sampled_from(routes), texts)
    def run(route: tuple[str, str], text: str | bytes) -> None:
        method, url = route
        content = text.encode() if isinstance(text, str) else text
        r = fuzz_client.request(
            method, url, content=content, headers={"Content-Type": "application/json"}
        )
        check_answer(r)
        assert r.status_code != 400, r.text  # a body that is no JSON document is a 422
        if r.status_code < 300:
            assert url != "/v1/series/raw/observations", text  # no valid observation list here

    run()
    assert fuzz_client.get("/v1/series/raw").json()["seq"] == seq
