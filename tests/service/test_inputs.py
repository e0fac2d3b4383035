"""Request values as the model's inputs (service/inputs.py), on the real runtime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.errors import InvalidInput
from service.inputs import ModelInputs


def test_values_are_checked_against_the_model(runtime: Any) -> None:
    inputs = ModelInputs(runtime)
    f = runtime.n_features
    x = inputs.matrix([1.0, None, [2.0] * f if f > 1 else 2.0], "values")
    assert x.shape == (3, f) and np.isnan(x[1]).all()
    with pytest.raises(InvalidInput, match="features"):
        inputs.matrix([[1.0] * (f + 1)], "values")
    with pytest.raises(InvalidInput, match="no observed value"):
        inputs.history([None] * max(runtime.min_history, 2), "values")


# a level whose interval's tails round to one half, and one whose fraction rounds to 0
TINY = (1e-100, 5e-324)


def test_a_tiny_level_needs_ever_more_samples_so_it_takes_the_most() -> None:
    """The paths a level's bounds need grow without bound as it nears 0 (infinitely many
    where its tails round to one half): a forecast that names no count takes the service's
    maximum, whatever the level; its fraction is never 0, which the model refuses."""
    from model.filtering.predictive import samples_for
    from service.inputs import MIN_FRACTION, forecast_params
    from service.settings import Settings

    assert samples_for([1e-12], most=10_000) == 10_000 < samples_for([1e-12])
    assert samples_for([1e-102], most=500) == 500
    with pytest.raises(ValueError, match="infinitely many samples"):
        samples_for([1e-102])
    for settings in (Settings(), Settings(max_samples=300), Settings(levels=f"{TINY[0]},80")):
        for levels in ((TINY[0],), TINY, (1e-10, 95.0)):
            params = forecast_params(settings, horizon=3, levels=levels, num_samples=None)
            assert params.n_samples == settings.max_samples
        assert settings.sample_steps_limit >= settings.max_samples * settings.max_horizon
    params = forecast_params(Settings(), horizon=3, levels=(*TINY, 80.0), num_samples=10)
    assert params.fractions == [MIN_FRACTION, 1e-102, 0.8]


def test_a_tiny_level_is_answered_on_every_forecast_route(make_client: Any, runtime: Any) -> None:
    """On the four forecast routes, a forecast at tiny levels that names no sample count draws
    SMCT_MAX_SAMPLES paths and answers every level asked, the tiny ones with the same bounds
    about the median (their tails all round to one half)."""
    from service.settings import level_label
    from tests.service.test_api import history, put
    from tests.service.test_sse import parse_sse

    client = make_client(default_samples=None, max_samples=300)
    put(client, runtime)
    ask: dict[str, Any] = {"horizon": 3, "levels": [*TINY, 80], "return_samples": True}
    stateless = {**ask, "series": [{"id": "a", "values": history(runtime)}]}
    query = {"horizon": 3, "levels": ",".join(map(str, ask["levels"])), "return_samples": "true"}
    stream = client.post("/v1/forecast/stream", json=stateless)
    assert stream.status_code == 200, stream.text
    *steps, done = parse_sse(iter(stream.text.splitlines()))
    assert len(steps) == 3 and done.event == "done"
    answers = {
        "POST /v1/forecast": client.post("/v1/forecast", json=stateless),
        "POST /v1/forecast/stream": done.data,
        "GET /v1/series/s1/forecast": client.get("/v1/series/s1/forecast", params=query),
        "POST /v1/series/s1/forecast": client.post("/v1/series/s1/forecast", json=ask),
    }
    labels = [level_label(level) for level in TINY]
    for route, answer in answers.items():
        if not isinstance(answer, dict):
            assert answer.status_code == 200, (route, answer.text)
            answer = answer.json()
        forecast = answer["forecasts"][0] if "forecasts" in answer else answer
        assert answer.get("num_samples", 300) == 300 and len(forecast["samples"]) == 300, route
        tiny, other = (forecast["intervals"][label] for label in labels)
        assert tiny == other, route
        for lo, median, hi in zip(tiny["lo"], forecast["median"], tiny["hi"], strict=True):
            assert lo <= median <= hi, route
        wide = forecast["intervals"]["80"]
        assert all(w <= t for w, t in zip(wide["lo"], tiny["lo"], strict=True)), route
