"""Export a trained model as an artifact: weights, noise table, and ONNX graphs of the two steps
the service runs (model/artifacts/graphs.py), checked against eager PyTorch on the same noise.

The graphs are exported with torch.onnx.export(dynamo=True), opset 18, with a dynamic batch B
and particle/path axis P/N, traced on a realistic example (a few filter steps of noisy sines)
and checked on another of other sizes; the manifest (model/artifacts/artifact.py) records their
inputs and outputs, the parity found and the library versions.
Shapes: B batch, P particles, N paths, L window, D d_model, F inputs, O targets.
"""

from __future__ import annotations

import logging
import os
import shutil
import warnings
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from model.artifacts import artifact as art
from model.artifacts.graphs import (
    MEAN_COEF,
    MIN_PARTICLES,
    SEASON,
    UPDATE_OUTPUTS,
    UpdateGraph,
    forecast_graph,
    forecast_io,
    update_inputs,
)
from model.filtering.compact import compact_step, materialize
from model.filtering.filter import CompactState
from model.filtering.noise import (
    GENERATOR,
    TABLE_SEED,
    NoiseLayout,
    check_table,
    make_table,
    noise_rows,
    table_size_for,
)
from model.filtering.resampling import get_resampler
from model.network.config import ModelConfig
from model.network.smc_transformer import N_MEAN_TERMS, SMCTransformer

log = logging.getLogger(__name__)

OPSET = 18
PARITY_TOL = 1e-4


@dataclass(frozen=True)
class Example:
    """A realistic compact state (after a few filter steps) to trace and check the graphs."""

    update: tuple[Tensor, ...]  # UPDATE_INPUTS
    forecast: tuple[Tensor, ...]  # FORECAST_INPUTS (covariates only if the model has them)


def _start(
    cfg: ModelConfig, b: int, p: int, steps: int, gen: torch.Generator
) -> tuple[CompactState, Tensor]:
    """The compact state at step 1 of b noisy sines, and the sines (B, steps + 2, F)."""
    n_lag, f = cfg.window, cfg.d_in
    x_hist = torch.zeros(b, n_lag, f)
    valid = torch.zeros(b, n_lag, dtype=torch.bool)
    valid[:, 0] = True
    lineage = torch.zeros(b, p, n_lag, dtype=torch.long)
    lineage[:, :, 0] = torch.arange(p)
    series = torch.sin(
        torch.arange(steps + 2).view(1, -1, 1) * 0.5 + torch.arange(b).view(-1, 1, 1)
    )
    series = series.expand(b, steps + 2, f) + 0.1 * torch.randn(b, steps + 2, f, generator=gen)
    x_hist[:, 0] = series[:, 0]
    season = mean_coef = None
    if cfg.lag_inputs:  # seasons 0, 2, 4; a small correction of the mean
        season = torch.arange(b, dtype=torch.long) % 3 * 2
        mean_coef = 0.1 * torch.randn(b, N_MEAN_TERMS, cfg.target_dim, generator=gen)
    return CompactState(x_hist, valid, lineage, torch.zeros(b, p), season, mean_coef), series


def example(
    model: SMCTransformer, noise: Tensor, b: int, p: int, n: int, steps: int = 6
) -> Example:
    """Filter `steps` steps of a noisy sine through compact_step, starting at step 1."""
    cfg, gen = model.cfg, torch.Generator().manual_seed(0)
    layout = NoiseLayout(p, cfg.d_model, cfg.n_heads)
    n_lag = cfg.window
    seeds = np.arange(1, b + 1, dtype=np.uint64) * np.uint64(7919)
    state, series = _start(cfg, b, p, steps, gen)
    season, mean_coef = state.season, state.mean_coef

    def base(t: int) -> Tensor:
        step_nums = np.repeat(np.arange(t + 1, t - n_lag, -1)[None], b, axis=0)
        return torch.from_numpy(layout.base_rows(seeds, step_nums, noise.shape[0]))

    observed = torch.ones(b, dtype=torch.bool)
    systematic = get_resampler("systematic")
    with torch.no_grad():
        for t in range(1, steps + 1):
            state, _ = compact_step(
                model, noise, base(t), state, series[:, t], observed, systematic
            )
        observed = torch.arange(b) % 2 == 0  # some rows missing
        x = series[:, steps + 1].clone()
        x[~observed] = float("nan")
        flat = (state.x_hist, state.valid, state.lineage, state.logw)  # as UPDATE_INPUTS
        update: tuple[Tensor, ...] = (noise, base(steps + 1), *flat, x, observed)
        if season is not None and mean_coef is not None:
            update += (season, mean_coef)
        anc = systematic(state.logw, torch.rand(b, n, generator=gen))  # (B, N)
        chosen = state.lineage.gather(1, anc.unsqueeze(-1).expand(b, n, n_lag))
        paths = materialize(model, noise, base(steps + 1), state, chosen)
    d, o = cfg.d_model, cfg.d_out
    lagged: tuple[Tensor, ...] = ()
    if season is not None and mean_coef is not None:  # each path its own input window
        assert paths.inputs is not None
        lagged = (paths.inputs.expand(b, n, -1, -1).contiguous(), season, mean_coef)
    forecast: tuple[Tensor, ...] = (
        paths.window,
        paths.query,
        paths.x_prev,
        paths.valid,
        *lagged,
        torch.randn(b, n, d, generator=gen),
        torch.randn(b, n, o, generator=gen),
        torch.randn(b, n, 3, d, generator=gen),
    )
    if cfg.d_in > cfg.d_out:
        forecast += (torch.randn(b, cfg.d_in - cfg.d_out, generator=gen),)
    return Example(update=update, forecast=forecast)


def _export(
    module: nn.Module,
    args: tuple[Tensor, ...],
    names: tuple[str, ...],
    outputs: tuple[str, ...],
    dynamic: dict[str, dict[int, Any]],
    path: Path,
) -> None:
    shapes = {name: dynamic.get(name) for name in names}
    quiet = [logging.getLogger(n) for n in ("torch.onnx", "onnxscript", "onnx_ir")]
    levels = [q.level for q in quiet]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for q in quiet:
                q.setLevel(logging.ERROR)
            exported = torch.export.export(module, args, dynamic_shapes=shapes, strict=False)
            program = torch.onnx.export(
                exported,
                args,
                dynamo=True,
                opset_version=OPSET,
                input_names=list(names),
                output_names=list(outputs),
                verbose=False,
            )
            assert program is not None
            program.optimize()
            program.save(str(path))
    finally:
        for q, level in zip(quiet, levels, strict=True):
            q.setLevel(level)


def export_graphs(model: SMCTransformer, noise: Tensor, out: Path, threshold: float) -> None:
    """Write filter_step.onnx and forecast_step.onnx into `out`."""
    batch, paths = torch.export.Dim("B"), torch.export.Dim("N")
    parts = torch.export.Dim("P", min=MIN_PARTICLES)  # the graph assumes P - 1 != 1
    ex = example(model, noise, b=3, p=5, n=6)
    _export(
        UpdateGraph(model, threshold),
        ex.update,
        update_inputs(model),
        UPDATE_OUTPUTS,
        {
            "base": {0: batch},
            "x_hist": {0: batch},
            "valid": {0: batch},
            "lineage": {0: batch, 1: parts},
            "logw": {0: batch, 1: parts},
            "x": {0: batch},
            "observed": {0: batch},
            SEASON: {0: batch},
            MEAN_COEF: {0: batch},
        },
        out / art.FILTER_GRAPH,
    )
    bn = {0: batch, 1: paths}
    names, outputs = forecast_io(model)
    _export(
        forecast_graph(model),
        ex.forecast,
        names[: len(ex.forecast)],
        outputs,
        {
            "window": bn,
            "query": bn,
            "x_prev": bn,
            "valid": {0: batch},
            "inputs": bn,
            SEASON: {0: batch},
            MEAN_COEF: {0: batch},
            "eps_z": bn,
            "eps_x": bn,
            "eps_qkv": bn,
            "covariates": {0: batch},
        },
        out / art.FORECAST_GRAPH,
    )


def check_graphs(
    model: SMCTransformer, noise: Tensor, directory: Path, threshold: float
) -> dict[str, float]:
    """Max abs difference between eager PyTorch and onnxruntime on a fresh example (other
    sizes than the traced one). Raises ArtifactError above PARITY_TOL or if ancestors differ."""
    import onnxruntime as ort

    ex = example(model, noise, b=4, p=7, n=9, steps=model.cfg.window + 2)
    report: dict[str, float] = {}
    graphs = (
        (art.FILTER_GRAPH, UpdateGraph(model, threshold), ex.update, update_inputs(model)),
        (art.FORECAST_GRAPH, forecast_graph(model), ex.forecast, forecast_io(model)[0]),
    )
    for name, module, args, names in graphs:
        with torch.no_grad():
            eager = [t.numpy() for t in module(*args)]
        session = ort.InferenceSession(str(directory / name), providers=["CPUExecutionProvider"])
        onnx_out = session.run(None, {k: v.numpy() for k, v in zip(names, args, strict=False)})
        diffs = []
        for ref, got in zip(eager, onnx_out, strict=True):
            if ref.dtype in (np.int64, np.bool_) and not np.array_equal(ref, got):
                raise art.ArtifactError(f"{name}: integer outputs differ between torch and onnx")
            diffs.append(float(np.max(np.abs(ref.astype(np.float64) - got.astype(np.float64)))))
        report[name] = max(diffs)
        if report[name] > PARITY_TOL:
            raise art.ArtifactError(f"{name}: onnx differs from eager torch by {report[name]:.2e}")
    return report


def feature_spec(
    features: dict[str, list[str]], d_in: int, target_dim: int
) -> dict[str, list[str]]:
    """{"inputs", "targets", "covariates"} names from targets and inputs or covariates."""
    targets = [str(n) for n in features.get("targets", [])]
    inputs = [str(n) for n in features.get("inputs", [*targets, *features.get("covariates", [])])]
    if len(inputs) != d_in or len(targets) != target_dim or inputs[:target_dim] != targets:
        raise ValueError(
            f"features must name {d_in} inputs, the first {target_dim} of them the targets; got "
            f"inputs {inputs}, targets {targets}"
        )
    return {"inputs": inputs, "targets": targets, "covariates": inputs[target_dim:]}


def _check_exportable(cfg: ModelConfig, scaling: dict[str, Any]) -> None:
    """Raise ValueError unless a model of `cfg` with `scaling` can be served."""
    if cfg.obs != "gaussian":
        raise ValueError("only gaussian observation models can be exported for serving")
    if scaling.get("mode") not in art.SCALING_MODES:
        raise ValueError(
            f"scaling mode must be one of {art.SCALING_MODES}, got {scaling.get('mode')!r}"
        )
    if scaling["mode"] == "global" and not (
        len(scaling.get("loc", [])) == len(scaling.get("scale", [])) == cfg.d_in
    ):
        raise ValueError(f"global scaling needs loc and scale of {cfg.d_in} features")


def _graph_manifest(model: SMCTransformer, checks: dict[str, float]) -> dict[str, Any]:
    """The manifest's "graphs": each graph's input and output names, the opset and the
    parity `checks` found."""
    cfg = model.cfg
    forecast_names, forecast_outputs = forecast_io(model)
    covs = int(cfg.d_in > cfg.d_out)
    return {
        art.FILTER_GRAPH: {
            "inputs": list(update_inputs(model)),
            "outputs": list(UPDATE_OUTPUTS),
        },
        art.FORECAST_GRAPH: {
            "inputs": list(forecast_names[: len(forecast_names) - 1 + covs]),
            "outputs": list(forecast_outputs),
        },
        "opset": OPSET,
        "parity_max_abs": checks,
    }


def _versions() -> dict[str, str]:
    out: dict[str, str] = {"torch": str(torch.__version__)}
    for name in ("onnx", "onnxruntime", "onnxscript", "numpy", "smct"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "unknown"
    return out


def export_artifact(
    model: SMCTransformer,
    out: Path,
    *,
    particles: int,
    scaling: dict[str, Any],
    features: dict[str, list[str]],
    metrics: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
    threshold: float = 1.0,
    overwrite: bool = False,
) -> art.Artifact:
    """Write an artifact directory at `out` (atomically: built beside it, then renamed).

    scaling: {"mode": "global", "loc": [F], "scale": [F]} or {"mode": "per_series"} (more
    keys are kept); features: "targets" and "inputs" (or "covariates") names.
    """
    cfg = model.cfg
    _check_exportable(cfg, scaling)
    features = feature_spec(features, cfg.d_in, cfg.target_dim)
    out = Path(out)
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists; pass overwrite=True (--force) to replace it")
    layout = NoiseLayout(particles, cfg.d_model, cfg.n_heads)
    size = table_size_for(particles, cfg.d_model, cfg.n_heads)
    table = make_table(size)
    noise = noise_rows(table, layout)
    check_table(noise.shape[0], layout, cfg.window)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model = model.cpu().eval()
    try:
        torch.save(model.state_dict(), tmp / art.WEIGHTS)
        table.astype("<f4").tofile(tmp / art.NOISE)
        export_graphs(model, noise, tmp, threshold)
        checks = check_graphs(model, noise, tmp, threshold)
        art.write_manifest(
            tmp,
            {
                "model_config": cfg.to_dict(),
                "features": features,
                "context_length": cfg.window,
                "particles": particles,
                "filter": {"resampling": "systematic", "threshold": threshold},
                "scaling": scaling,
                "metrics": metrics or {},
                "training": training or {},
                "noise": {
                    "size": size,
                    "seed": TABLE_SEED,
                    "dtype": "float32",
                    "generator": GENERATOR,
                },
                "graphs": _graph_manifest(model, checks),
                "versions": _versions(),
            },
        )
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("artifact written to %s (parity %s)", out, checks)
    return art.Artifact.open(out)
