"""The cuda path, where a CUDA device is (skipped elsewhere): the runtime and the service on the
GPU give the answers they give on the CPU, and training runs there.

The filter's and the rollout's noise comes from the artifact's noise table, keyed by series
and step, so a GPU and a CPU draw the same noise: their answers differ by the kernels' float
rounding only, except where rounding tips a resampling decision (a particle picked by a
cumulative sum that lands within rounding of a draw), which moves a bound by a fraction of the
Monte Carlo error. The tolerances below are 5 % of the 80 % width: some twice the Monte Carlo
error of a bound at the sample counts used, and a hundred times float32 rounding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "artifacts" / "default"

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


def _history(n: int = 96, seed: int = 0) -> np.ndarray:
    """A seasonal AR(1) around a level of 50 (season 12)."""
    rng = np.random.default_rng(seed)
    x = np.zeros(n)
    for t in range(1, n):
        x[t] = 0.7 * x[t - 1] + rng.normal(0, 1.0)
    return 50 + 5 * np.sin(2 * np.pi * np.arange(n) / 12) + x


def _close(a: np.ndarray, b: np.ndarray, width: np.ndarray) -> None:
    np.testing.assert_array_less(np.abs(a - b), 0.05 * width + 1e-6)


def test_the_runtime_on_cuda_filters_and_forecasts_as_on_the_cpu() -> None:
    from model.runtime.runtime import Runtime

    cpu = Runtime.load(DEFAULT, backend="torch", device="cpu")
    gpu = Runtime.load(DEFAULT, backend="torch", device="cuda")
    assert gpu.backend.device == "cuda"
    hists = [_history(seed=s)[:, None] for s in range(3)]
    s_cpu, s_gpu = cpu.create(hists, seasons=[12] * 3), gpu.create(hists, seasons=[12] * 3)
    obs = [np.array([[51.0], [np.nan], [49.5]])] * 3
    u_cpu, u_gpu = cpu.update(s_cpu, obs, [0.8]), gpu.update(s_gpu, obs, [0.8])
    for (a, ra), (b, rb) in zip(u_cpu, u_gpu, strict=True):
        assert a.t == b.t
        for x, y in zip(ra, rb, strict=True):
            lo, hi = x.intervals[0.8]
            for k in (0, 1):
                _close(y.intervals[0.8][k], x.intervals[0.8][k], hi - lo)
    f_cpu = cpu.forecast([a for a, _ in u_cpu], 24, [0.8, 0.95], 4000)
    f_gpu = gpu.forecast([b for b, _ in u_gpu], 24, [0.8, 0.95], 4000)
    for fc, fg in zip(f_cpu, f_gpu, strict=True):
        width = fc.intervals[0.8][1] - fc.intervals[0.8][0]
        _close(fg.median, fc.median, width)
        for level in (0.8, 0.95):
            for k in (0, 1):
                _close(fg.intervals[level][k], fc.intervals[level][k], width)


def _answers(device: Literal["cpu", "cuda"]) -> dict[str, Any]:
    """The service's answers over HTTP, on the embedded store, with the model on `device`."""
    from fastapi.testclient import TestClient

    from service.main import create_app
    from service.settings import Settings

    settings = Settings(artifact=DEFAULT, device=device, batch_max_wait_ms=1.0)
    values = [float(v) for v in _history()]
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        r = client.put("/v1/series/s", json={"values": values, "season_length": 12})
        assert r.status_code in (200, 201), r.text
        observations = [{"seq": 96 + i, "value": v} for i, v in enumerate([51.0, 49.0, 52.5])]
        r = client.post("/v1/series/s/observations", json={"observations": observations})
        assert r.status_code == 200, r.text
        online = client.get("/v1/series/s/forecast", params={"horizon": 12, "num_samples": 4000})
        assert online.status_code == 200, online.text
        body = {"series": [{"id": "a", "values": values}], "horizon": 12, "num_samples": 4000}
        stateless = client.post("/v1/forecast", json=body)
        assert stateless.status_code == 200, stateless.text
        metrics = client.get("/metrics")
        assert metrics.status_code == 200
        return {"online": online.json(), "stateless": stateless.json()["forecasts"][0],
                "metrics": metrics.text}


def test_the_service_on_cuda_answers_as_on_the_cpu() -> None:
    cpu, gpu = _answers("cpu"), _answers("cuda")
    assert "smct_" in gpu["metrics"]
    for kind in ("online", "stateless"):
        a, b = cpu[kind], gpu[kind]
        lo, hi = (np.asarray(a["intervals"]["80"][k]) for k in ("lo", "hi"))
        width = hi - lo
        _close(np.asarray(b["median"]), np.asarray(a["median"]), width)
        for level in ("80", "95"):
            for k in ("lo", "hi"):
                _close(np.asarray(b["intervals"][level][k]), np.asarray(a["intervals"][level][k]),
                       width)


def test_training_on_cuda_lowers_the_loss_and_exports(tmp_path: Path) -> None:
    from model.artifacts.export import export_artifact
    from model.runtime.runtime import Runtime
    from training.config import TrainConfig
    from training.datasets import load_dataset
    from training.trainer import train

    cfg = TrainConfig.of(dataset="synthetic-1", particles=10, epochs=3, d_model=8, limit=256,
                         device="cuda", lr=3e-3)
    ckpt = train(cfg, load_dataset("synthetic-1", limit=256), progress=False)
    losses = [h["loss"] for h in ckpt.history]
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    record = ckpt.scaling
    export_artifact(
        ckpt.model.cpu(), tmp_path / "a", particles=10,
        scaling={"mode": "global", **record["scaler"]},
        features={"inputs": record["feature_names"], "targets": record["feature_names"][:1]},
        metrics={}, training={**cfg.to_dict(), "history": record["history"]},
    )
    rt = Runtime.load(tmp_path / "a", backend="torch", device="cuda")
    (f,) = rt.forecast(rt.create([np.zeros((30, 1))]), 5, [0.8], 500)
    assert np.all(np.isfinite(f.median))


def test_captured_blocks_answer_as_the_same_steps_run_eagerly() -> None:
    """The GPU's paths move in blocks captured as CUDA graphs (model/runtime/kernels/device.py):
    a forecast replayed from a captured block equals the same blocks run eagerly on the GPU to
    float rounding, asked twice it gives the same numbers (its noise is keyed), and it stays
    within the tolerance above of the CPU's (the host's noise, the compiled rollout)."""
    from model.runtime.kernels import device as device_rollout
    from model.runtime.kernels.device import DeviceSteps
    from model.runtime.runtime import Runtime

    gpu = Runtime.load(DEFAULT, backend="torch", device="cuda")
    cpu = Runtime.load(DEFAULT, backend="torch", device="cpu")
    engine: Any = gpu.backend
    assert engine.device_steps is not None and engine.device_steps.capture
    hists = [_history(seed=s)[:, None] for s in range(4)]
    s_gpu, s_cpu = gpu.create(hists, seasons=[12] * 4), cpu.create(hists, seasons=[12] * 4)
    for floats in (device_rollout.DEVICE_NOISE_FLOATS, 4 * 2000 * 65 * 5):  # one block, or five
        device_rollout.DEVICE_NOISE_FLOATS = floats
        try:
            captured = gpu.forecast(s_gpu, 24, [0.8, 0.95], 2000, seed=1)
            again = gpu.forecast(s_gpu, 24, [0.8, 0.95], 2000, seed=1)
            engine.device_steps = DeviceSteps(engine.model, engine.forecast_graph, capture=False)
            eager = gpu.forecast(s_gpu, 24, [0.8, 0.95], 2000, seed=1)
            engine.device_steps = DeviceSteps(engine.model, engine.forecast_graph, capture=True)
        finally:
            device_rollout.DEVICE_NOISE_FLOATS = 1 << 27
        host = cpu.forecast(s_cpu, 24, [0.8, 0.95], 2000, seed=1)
        for c, a, e, h in zip(captured, again, eager, host, strict=True):
            width = h.intervals[0.8][1] - h.intervals[0.8][0]
            np.testing.assert_array_equal(c.median, a.median)
            np.testing.assert_allclose(c.median, e.median, rtol=0, atol=1e-4 * width.max())
            _close(c.median, h.median, width)
            for level in (0.8, 0.95):
                for k in (0, 1):
                    _close(c.intervals[level][k], h.intervals[level][k], width)


def test_batches_of_different_sizes_replay_the_graph_of_their_bucket() -> None:
    """Batches of 3 and then 4 series (as the service gathers concurrent requests) replay the
    graphs captured for a batch of 4: none captured anew; the batch of 3 answers as its first
    three series did in the batch of 4 (each series' paths move apart from the others')."""
    from model.runtime.runtime import Runtime

    gpu = Runtime.load(DEFAULT, backend="torch", device="cuda")
    engine: Any = gpu.backend
    hists = [_history(seed=s)[:, None] for s in range(4)]
    states = gpu.create(hists, seasons=[12] * 4)
    four = gpu.forecast(states, 12, [0.8], 1000, seed=2)
    captured = len(engine.device_steps._captured)
    three = gpu.forecast(gpu.create(hists[:3], seasons=[12] * 3), 12, [0.8], 1000, seed=2)
    assert len(engine.device_steps._captured) == captured
    for a, b in zip(three, four, strict=True):  # float rounding of other batch shapes
        width = b.intervals[0.8][1] - b.intervals[0.8][0]
        np.testing.assert_allclose(a.median, b.median, rtol=0, atol=0.01 * width.max())
