"""The engine on the real runtime: concurrent requests become one batched model call."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from service.answers import render, stamped
from service.engine import Engine
from service.errors import InvalidInput
from service.inputs import ForecastParams
from tests.service.test_api import history

pytestmark = pytest.mark.anyio
PARAMS = ForecastParams(horizon=3, levels=(80.0, 95.0), n_samples=64)


class CountingRuntime:
    """Delegates to the real runtime and records (method, number of series) per call."""

    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime
        self.calls: list[tuple[str, int]] = []

    def __getattr__(self, name: str) -> Any:
        if name == "series_runtime":  # the series operations go through the counter too
            return self
        attr = getattr(self._runtime, name)
        if name not in ("create", "update_answered", "forecast", "forecast_history"):
            return attr

        def counted(items: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, len(items)))
            return attr(items, *args, **kwargs)

        return counted

    def sizes(self, name: str) -> list[int]:
        return [n for m, n in self.calls if m == name]


@pytest.fixture
async def engine(runtime: Any) -> Any:
    eng = Engine(CountingRuntime(runtime), max_batch=8, max_wait_s=0.05)  # type: ignore[arg-type]
    yield eng
    await eng.close()


def series(runtime: Any, i: int) -> np.ndarray:
    return np.asarray(history(runtime, 30, seed=i), dtype=np.float64)[:, None]


async def test_concurrent_updates_share_batched_calls(engine: Engine, runtime: Any) -> None:
    counting: CountingRuntime = engine.runtime  # type: ignore[assignment]
    states = await asyncio.gather(*(engine.create(series(runtime, i)) for i in range(12)))
    assert counting.sizes("create") == [8, 4]
    obs = np.array([[0.5]])
    updates = await asyncio.gather(
        *(engine.update(f"s{i}", s.state, obs, PARAMS) for i, s in enumerate(states))
    )
    # one call a batch absorbs the values and forecasts the answers (from the same batch)
    assert counting.sizes("update_answered") == [8, 4]
    for i, (before, upd) in enumerate(zip(states, updates, strict=True)):
        assert upd.state.seq == before.seq + 1
        rec = upd.rendered  # the answer's record as the model thread rendered it
        assert rec == render(upd.record, f"s{i}") and rec.version == 0  # before the write
        assert render(stamped(upd.record, 1), f"s{i}").results == rec.results
        forecast = json.loads(rec.forecast)
        assert forecast["id"] == f"s{i}" and len(forecast["mean"]) == 3
        (res,) = map(json.loads, rec.results)
        assert res["seq"] == before.seq and res["value"] == pytest.approx(0.5)
        (seen,) = upd.observed  # what the metrics take of it
        assert seen.covered is not None and seen.ess == pytest.approx(res["ess"], rel=1e-5)


async def test_different_parameters_are_separate_calls(engine: Engine, runtime: Any) -> None:
    counting: CountingRuntime = engine.runtime  # type: ignore[assignment]
    other = ForecastParams(horizon=5, levels=(50.0,), n_samples=32)
    out = await asyncio.gather(
        *(engine.forecast_history(f"a{i}", series(runtime, i), PARAMS) for i in range(3)),
        *(engine.forecast_history(f"b{i}", series(runtime, i), other) for i in range(3)),
    )
    assert sorted(counting.sizes("forecast_history")) == [3, 3]
    assert [len(f["mean"]) for f in out] == [3, 3, 3, 5, 5, 5]
    assert list(out[3]["intervals"]) == ["50"]


async def test_a_bad_series_fails_alone(engine: Engine, runtime: Any) -> None:
    bad = np.ones((30, runtime.n_features + 1))  # what the HTTP layer would refuse
    out = await asyncio.gather(
        engine.forecast_history("good", series(runtime, 0), PARAMS),
        engine.forecast_history("bad", bad, PARAMS),
        engine.forecast_history("good2", series(runtime, 1), PARAMS),
        return_exceptions=True,
    )
    assert not isinstance(out[0], BaseException) and not isinstance(out[2], BaseException)
    assert isinstance(out[1], InvalidInput)


def test_load_passes_the_filter_step_bound(artifact: Any) -> None:
    """SMCT_MAX_FILTER_STEPS reaches the runtime; under the model's window it is refused at
    load with the setting's name."""
    from model.runtime.runtime import InputError
    from service.settings import Settings

    eng = Engine.load(Settings(artifact=artifact, max_filter_steps=77))
    assert eng.runtime.max_filter_steps == 77
    with pytest.raises(InputError, match="SMCT_MAX_FILTER_STEPS"):
        Engine.load(Settings(artifact=artifact, max_filter_steps=1))


def test_an_empty_environment_variable_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    """`SMCT_MAX_FILTER_STEPS=` (or a blank compose entry) is the default, not an error."""
    from service.settings import Settings

    monkeypatch.setenv("SMCT_MAX_FILTER_STEPS", "")
    monkeypatch.setenv("SMCT_MAX_HORIZON", "")
    settings = Settings()
    assert settings.max_filter_steps is None and settings.max_horizon == 256
    monkeypatch.setenv("SMCT_MAX_FILTER_STEPS", "600")
    assert Settings().max_filter_steps == 600
