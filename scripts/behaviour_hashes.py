"""Hashes of what the model and the service answer, to check that a change of structure leaves
behaviour byte for byte as it was.

    python scripts/behaviour_hashes.py [--artifact artifacts/default] [--threads 1] [--verbose]

On the committed default artifact, with fixed seeds and one torch thread, it prints one sha256
a line, named:
    stateless/...  forecasts from histories (Runtime.forecast_history, on the torch and ONNX
                   backends): series of different lengths, seasons, missing values and levels,
                   quantiles, request seeds, samples; and POST /v1/forecast's JSON
    online/...     online updates of stored series: the runtime's states and results after
                   each update, the service's engine (Engine.update: the state bytes and
                   the answer's encoded record), and the HTTP answers of PUT, POST
                   observations (new and repeated) and GET forecast on the embedded store
    refused/...    refused inputs: the runtime's InputError (message and field) and the
                   service's error answers (status and body)
then `all`, the hash of every line before it. Run it on two trees and diff the outputs. The
time stamps of a series' metadata (created_at, updated_at) are left out of its answers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from model.series.state_bytes import as_rows

REPO = Path(__file__).resolve().parents[1]
LEVELS = (0.5, 0.8, 0.95)
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
TIME_FIELDS = ("created_at", "updated_at")


def histories() -> dict[str, tuple[np.ndarray, int]]:
    """Named series (T, 1) and their season lengths: monthly, weekly, short, trending with
    missing values, a flat one, a long one (past the filter's bound on steps)."""
    rng = np.random.default_rng(20261203)
    t = np.arange(600, dtype=np.float64)
    monthly = 100 + 10 * np.sin(2 * np.pi * t[:60] / 12) + rng.normal(0, 1, 60)
    weekly = 5 + np.sin(2 * np.pi * t[:91] / 7) + rng.normal(0, 0.3, 91)
    trend = 3 + 0.2 * t[:40] + rng.normal(0, 0.5, 40)
    trend[[5, 17, 38, 39]] = np.nan
    long = 1000 + np.cumsum(rng.normal(0, 2, 600))
    return {
        "monthly": (monthly[:, None], 12),
        "weekly": (weekly[:, None], 7),
        "short": (np.array([[10.2], [10.8], [11.1], [10.7], [11.4]]), 0),
        "trend-gaps": (trend[:, None], 0),
        "flat": (np.full((12, 1), 4.0), 0),
        "long": (long[:, None], 0),
    }


def _rows(x: np.ndarray) -> np.ndarray:
    """An array as hashed: records (a state's trend, its own law) as the rows they hold."""
    return as_rows(x) if x.dtype.names else x


def digest(*parts: Any) -> str:
    """sha256 of arrays (dtype, shape and bytes), strings, bytes, numbers, None and nested
    sequences and dicts of them."""
    h = hashlib.sha256()

    def feed(x: Any) -> None:
        if isinstance(x, np.ndarray):
            x = _rows(x)
            h.update(f"a{x.dtype.str}{x.shape}".encode())
            h.update(np.ascontiguousarray(x).tobytes())
        elif isinstance(x, bytes):
            h.update(b"b%d:" % len(x) + x)
        elif isinstance(x, str):
            h.update(b"s%d:" % len(x.encode()) + x.encode())
        elif isinstance(x, dict):
            h.update(b"d%d" % len(x))
            for k in sorted(x, key=repr):
                feed(repr(k))
                feed(x[k])
        elif isinstance(x, list | tuple):
            h.update(b"l%d" % len(x))
            for v in x:
                feed(v)
        else:
            h.update(repr(x).encode())

    for p in parts:
        feed(p)
    return h.hexdigest()


def forecast_parts(f: Any) -> list[Any]:
    """A runtime Forecast's arrays in a fixed order."""
    return [f.mean, f.median, f.intervals, f.quantiles, f.errors, f.samples]


def state_parts(s: Any) -> list[Any]:
    """A SeriesState: its bytes, and its fields (what the bytes leave at their defaults too)."""
    return [s.to_bytes(), {k: v for k, v in vars(s).items() if not k.startswith("_")}]


def result_parts(r: Any) -> str:
    return repr(r)  # UpdateResult: a frozen dataclass of floats, arrays and tuples


def _stateless(rt: Any, name: str) -> Iterator[tuple[str, str]]:
    series = histories()
    names = list(series)
    hs = [series[n][0] for n in names]
    seasons = [series[n][1] for n in names]
    cases = {
        "batch-levels": dict(horizon=12, levels=LEVELS, n_samples=400, seasons=seasons),
        "batch-quantiles-seed": dict(
            horizon=7, levels=(0.8,), n_samples=300, seasons=seasons, quantiles=QUANTILES, seed=7
        ),
        "batch-samples-support": dict(
            horizon=4, levels=(0.9,), n_samples=64, seasons=seasons, return_samples=True,
            supports=["nonnegative", None, "counts", None, "real", None],
        ),
    }
    for case, kw in cases.items():
        out = rt.forecast_history(hs, **kw)
        yield f"stateless/{name}/{case}", digest([forecast_parts(f) for f in out])
    for n, (h, season) in series.items():  # one at a time: its own batch
        (f,) = rt.forecast_history([h], 24, (0.8, 0.95), 1000, seasons=[season], seed=3)
        yield f"stateless/{name}/single/{n}", digest(forecast_parts(f))


def _online(rt: Any) -> Iterator[tuple[str, str]]:
    """Runtime.update over four updates of the stored series, in one batch."""
    series = histories()
    names = ["monthly", "weekly", "short", "trend-gaps"]
    states = rt.create([series[n][0] for n in names], levels=[0.8, 0.95],
                       seasons=[series[n][1] for n in names])
    yield "online/runtime/create", digest([state_parts(s) for s in states])
    rng = np.random.default_rng(5)
    for k in range(4):
        obs = [np.array([[float(series[n][0][-1, 0]) + rng.normal()]] * (1 + (i + k) % 3))
               for i, n in enumerate(names)]
        if k == 2:
            obs[1][0, 0] = np.nan  # a missing value
            obs[3] = np.concatenate([obs[3], [[np.nan]]])  # a trailing one: pending
        updated = rt.update(states, obs, [0.8, 0.95])
        states = [s for s, _ in updated]
        results = [[result_parts(r) for r in res] for _, res in updated]
        yield f"online/runtime/update-{k}", digest([state_parts(s) for s in states], results)
        fc, states = rt.forecast_issued(states, 6, (0.8, 0.95), 200)
        yield f"online/runtime/issued-{k}", digest([forecast_parts(f) for f in fc],
                                                  [state_parts(s) for s in states])


def _engine(rt: Any) -> Iterator[tuple[str, str]]:
    """The service's engine (service/engine.py: the model thread, its batches of one here):
    create, then updates whose answers are the encoded records, then forecasts from the
    stored states."""
    import asyncio

    from service.engine import Engine
    from service.inputs import ForecastParams

    series = histories()
    names = ["monthly", "weekly", "short"]
    params = ForecastParams(horizon=12, levels=(80.0, 95.0), n_samples=250)

    async def run() -> list[tuple[str, str]]:
        engine = Engine(rt, max_wait_s=0.0, monitor_levels=(80.0, 95.0))
        out = []
        try:
            made = [await engine.create(series[n][0], series[n][1]) for n in names]
            out.append(("online/engine/create",
                        digest([[m.state, m.seq, m.ess, m.adaptation] for m in made])))
            stored = [m.state for m in made]
            for k in range(3):
                ups = [
                    await engine.update(n, stored[i], np.array([[series[n][0][-1, 0] + k]]),
                                        params)
                    for i, n in enumerate(names)
                ]
                out.append((f"online/engine/update-{k}", digest([
                    [u.state.state, u.state.seq, u.state.ess, u.state.adaptation, u.record]
                    for u in ups
                ])))
                stored = [u.state.state for u in ups]
            done = [await engine.forecast(n, stored[i], params) for i, n in enumerate(names)]
            out.append(("online/engine/forecast", digest(json.dumps(done, sort_keys=True))))
        finally:
            await engine.close()
        return out

    yield from asyncio.run(run())


def _body(response: Any) -> str:
    """A response as status and body, a series' time stamps left out."""
    text = response.text
    try:
        data = json.loads(text)
    except ValueError:
        return f"{response.status_code} {text}"
    if isinstance(data, dict) and any(k in data for k in TIME_FIELDS):
        data = {k: v for k, v in data.items() if k not in TIME_FIELDS}
        text = json.dumps(data)
    return f"{response.status_code} {text}"


def _http(rt: Any, verbose: bool) -> Iterator[tuple[str, str]]:
    """The service on the embedded store (one app, requests one after another)."""
    warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

    from service.main import create_app
    from service.settings import Settings

    settings = Settings(batch_max_wait_ms=1.0, default_samples=300)
    app = create_app(settings, runtime=rt)
    series = histories()
    with TestClient(app, raise_server_exceptions=False) as client:
        def send(name: str, method: str, url: str, body: Any = None) -> tuple[str, str]:
            r = client.request(method, url, json=body)
            if verbose:
                print(f"# {name}: {_body(r)[:300]}")
            return name, digest(_body(r))

        values = [None if np.isnan(v) else float(v) for v in series["trend-gaps"][0][:, 0]]
        yield send("stateless/http/forecast", "POST", "/v1/forecast", {
            "series": [
                {"id": "m", "values": series["monthly"][0][:, 0].tolist(), "season_length": 12},
                {"id": "t", "values": values},
                {"id": "s", "values": series["short"][0][:, 0].tolist()},
            ],
            "horizon": 9, "levels": [50, 80, 95], "num_samples": 500,
        })
        monthly = series["monthly"][0][:, 0].tolist()
        yield send("online/http/put", "PUT", "/v1/series/m",
                   {"values": monthly, "season_length": 12})
        yield send("online/http/put-weekly", "PUT", "/v1/series/w",
                   {"values": series["weekly"][0][:, 0].tolist(), "season_length": 7})
        seq = len(monthly)
        for k in range(4):
            obs = [{"seq": seq + j, "value": 100.0 + k + j if (k, j) != (2, 1) else None}
                   for j in range(1 + k % 2)]
            yield send(f"online/http/observe-{k}", "POST", "/v1/series/m/observations",
                       {"observations": obs, "horizon": 6})
            if k == 1:  # the same request again: the stored answer
                yield send("online/http/repeat", "POST", "/v1/series/m/observations",
                           {"observations": obs, "horizon": 6})
            seq += len(obs)
        yield send("online/http/forecast", "GET",
                   "/v1/series/m/forecast?horizon=5&levels=80&levels=95&num_samples=400")
        yield send("online/http/forecast-default", "GET", "/v1/series/w/forecast")
        yield send("online/http/info", "GET", "/v1/series/m")
        # refusals
        yield send("refused/http/runtime-value", "POST", "/v1/series/m/observations",
                   {"observations": [{"seq": seq, "value": 101.0},
                                     {"seq": seq + 1, "value": 1e15}]})
        yield send("refused/http/runtime-value-after-repeat", "POST",
                   "/v1/series/m/observations",
                   {"observations": [{"seq": seq - 1, "value": 104.0}, {"seq": seq, "value": 102.0},
                                     {"seq": seq + 1, "value": -1e15}]})
        yield send("refused/http/gap", "POST", "/v1/series/m/observations",
                   {"observations": [{"seq": seq + 5, "value": 1.0}]})
        yield send("refused/http/changed", "POST", "/v1/series/m/observations",
                   {"observations": [{"seq": seq - 1, "value": 1.0}]})
        yield send("refused/http/season", "PUT", "/v1/series/x",
                   {"values": monthly, "season_length": 70000})
        yield send("refused/http/no-values", "PUT", "/v1/series/x", {"values": [None, None]})
        yield send("refused/http/short", "POST", "/v1/forecast",
                   {"series": [{"id": "a", "values": [1.0]}], "horizon": 3})
        yield send("refused/http/level", "POST", "/v1/forecast",
                   {"series": [{"id": "a", "values": [1.0, 2.0, 3.0]}], "levels": [100]})
        yield send("refused/http/stream-far", "POST", "/v1/forecast/stream",
                   {"series": [{"id": "a", "values": [1.0, 1.0, 1.0, 1.0, 1e300]}], "horizon": 2})
        yield send("refused/http/missing", "GET", "/v1/series/nope/forecast")
        yield send("refused/http/covariates", "POST", "/v1/series/m/forecast",
                   {"horizon": 2, "covariates": [[1.0], [2.0]]})


def _refused(rt: Any) -> Iterator[tuple[str, str]]:
    """The runtime's refusals: InputError's message and the field at fault as a request names
    it (its `path`; on a tree whose InputError has none, its `field`, which held that)."""
    series = histories()
    states = rt.create([series["monthly"][0], series["short"][0]])
    calls = {
        "far-observation": lambda: rt.update(
            states, [np.array([[100.0], [1e15]]), np.array([[11.0]])], [0.8]),
        "bad-level": lambda: rt.forecast(states, 3, [1.5], 10),
        "bad-season": lambda: rt.create([series["short"][0]], seasons=[1]),
        "short-history": lambda: rt.create([np.array([[1.0]])]),
        "bad-shape": lambda: rt.update(states, [np.zeros((2, 3)), np.zeros((1, 1))], [0.8]),
        "count-mismatch": lambda: rt.update(states, [np.zeros((1, 1))], [0.8]),
        "infinite": lambda: rt.create([np.array([[1.0], [np.inf], [2.0]])]),
    }
    for name, call in calls.items():
        try:
            call()
        except ValueError as exc:
            where = getattr(exc, "path", getattr(exc, "field", None))
            yield f"refused/runtime/{name}", digest(type(exc).__name__, str(exc), {"field": where})
        else:
            yield f"refused/runtime/{name}", digest("accepted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, default=REPO / "artifacts" / "default")
    parser.add_argument("--threads", type=int, default=1, help="torch and onnxruntime threads")
    parser.add_argument("--verbose", action="store_true", help="print the HTTP answers too")
    args = parser.parse_args()
    import torch

    from model.runtime.runtime import Runtime

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    lines: list[tuple[str, str]] = []
    rt = Runtime.load(args.artifact, backend="torch", device="cpu", threads=args.threads)
    onnx = Runtime.load(args.artifact, backend="onnx", device="cpu", threads=args.threads)
    for part in (_stateless(rt, "torch"), _stateless(onnx, "onnx"), _online(rt),
                 _engine(rt), _refused(rt), _http(rt, args.verbose)):
        for name, value in part:
            lines.append((name, value))
            print(f"{name} {value}", flush=True)
    print(f"all {digest(lines)}")


if __name__ == "__main__":
    main()
