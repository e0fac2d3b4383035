"""Inputs that once broke a series or a batch, and the issued-interval contract."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from tests.service.test_api import history, observe, put


def test_a_value_far_outside_the_series_scale_is_refused_and_changes_nothing(
    client: TestClient, runtime: Any
) -> None:
    t = put(client, runtime)["seq"]
    r = observe(client, t, 1e21)
    assert r.status_code == 422, r.text
    assert "scales from the series' level" in r.json()["message"]
    assert client.get("/v1/series/s1").json()["seq"] == t  # nothing absorbed
    ok = observe(client, t, 0.4)  # the series still works
    assert ok.status_code == 200, ok.text
    assert client.get("/v1/series/s1/forecast", params={"horizon": 2}).status_code == 200


def test_the_refusal_names_the_observation_of_the_request(
    client: TestClient, runtime: Any
) -> None:
    """The runtime refuses the k-th value it is given; the answer names the request's entry,
    counting the repeated (already applied) ones before it."""
    t = put(client, runtime)["seq"]
    assert observe(client, t, 0.3).status_code == 200
    obs = [{"seq": t, "value": 0.3}, {"seq": t + 1, "value": 0.1}, {"seq": t + 2, "value": 1e21}]
    r = client.post("/v1/series/s1/observations", json={"observations": obs})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["fields"][0]["field"] == "observations[2].value", body
    assert body["message"].startswith("observations[2].value: value 1e+21"), body
    assert client.get("/v1/series/s1").json()["seq"] == t + 1  # t + 1 not absorbed either


def test_an_integer_beyond_the_float_range_is_a_422(client: TestClient, runtime: Any) -> None:
    t = put(client, runtime)["seq"]
    huge = int("9" * 400)
    r = client.post(
        "/v1/series/s1/observations", json={"observations": [{"seq": t, "value": huge}]}
    )
    assert r.status_code == 422 and "not finite" in r.json()["message"], r.text
    body = {"series": [{"id": "a", "values": [1.0, 2.0, huge]}], "horizon": 2}
    assert client.post("/v1/forecast", json=body).status_code == 422


def test_issued_intervals_do_not_depend_on_the_value_they_score(
    client: TestClient, runtime: Any
) -> None:
    # two series with the same history have the same particles: the intervals issued for
    # their next observation must be identical whatever value then arrives
    values = history(runtime)
    for sid in ("low", "high"):
        assert client.put(f"/v1/series/{sid}", json={"values": values}).status_code == 201
    t = len(values)
    low = observe(client, t, values[-1] - 0.1, series_id="low").json()["observations"][0]
    high = observe(client, t, values[-1] + 50.0, series_id="high").json()["observations"][0]
    assert low["intervals"] == high["intervals"]
    assert high["anomaly"] is True and high["covered"]["95"] is False
    assert low["pit"] < high["pit"]
