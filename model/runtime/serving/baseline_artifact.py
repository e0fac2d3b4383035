"""The artifact of a baseline served as a model (model/runtime/serving/stateless.py serves it).

Every forecaster of the benchmark (model/baselines) draws predictive sample paths, so each can
be exported and answer the service's stateless forecast. `smct export` writes the artifact of
a saved forecaster:

    artifact/manifest.json   type "smct-baseline", format_version, model (registry name),
                             model_id, features, context_length, scaling (what serving
                             applies), training_scaling, metrics, versions,
                             {file: sha256} of every file under forecaster/
    artifact/forecaster/     the forecaster as its `save` wrote it (model/baselines)

Opening one verifies its type, version and every checksum.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.artifacts.artifact import ArtifactError, sha256_file
from model.artifacts.formats import BASELINE_TYPE, BASELINE_VERSION, MANIFEST
from model.series.inputs import MIN_HISTORY

FORECASTER_DIR = "forecaster"
DEFAULT_CONTEXT = 256


def forecaster_dims(forecaster: Any) -> tuple[int, int]:
    """(F inputs, O targets) of a loaded forecaster."""
    net = getattr(forecaster, "net", None)
    if net is not None:
        return int(net.d_in), int(net.d_out)
    o = int(getattr(forecaster, "d_out", 1))
    return o, o


def is_point_forecaster(forecaster: Any) -> bool:
    """Whether a loaded forecaster gives one path per series (the deterministic LSTM and
    Transformer: a network that is not stochastic), so that its intervals have zero width."""
    net = getattr(forecaster, "net", None)
    return net is not None and not net.stochastic


def export_baseline(
    forecaster_dir: Path,
    out: Path,
    *,
    context_length: int = DEFAULT_CONTEXT,
    scaling: dict[str, Any] | None = None,
    training_scaling: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    feature_names: Sequence[str] | None = None,
    data_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the artifact of a saved forecaster (a directory its `save` wrote) to `out`.
    `feature_names` name its inputs (targets first; default x0, x1, ...), `data_options` the
    id and time columns of the table it was trained on (`smct forecast` reads them).

    `scaling` is what serving applies: {"mode": "per_series"} (default: each series by the
    mean and standard deviation of the values it feeds the model) or {"mode": "global",
    "loc": [...], "scale": [...]} (one affine map, e.g. the training data's);
    `training_scaling` records how the training data were scaled (the scores in `metrics`
    are in those units)."""
    forecaster_dir, out = Path(forecaster_dir), Path(out)
    name, forecaster = _load_saved(forecaster_dir)
    d_in, d_out = forecaster_dims(forecaster)
    if context_length < MIN_HISTORY:
        raise ArtifactError(f"context_length must be at least {MIN_HISTORY}")
    scaling = check_scaling(scaling or {"mode": "per_series"}, d_in)
    names = [str(n) for n in feature_names or ()]
    if len(names) != d_in:
        names = [f"x{i}" for i in range(d_in)]
    target = out / FORECASTER_DIR
    if target.exists():
        shutil.rmtree(target)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(forecaster_dir, target)
    files = {
        str(p.relative_to(out)): sha256_file(p) for p in sorted(target.rglob("*")) if p.is_file()
    }
    model_id = hashlib.sha256(
        json.dumps(files, sort_keys=True).encode() + name.encode()
    ).hexdigest()
    manifest = {
        "type": BASELINE_TYPE,
        "format_version": BASELINE_VERSION,
        "model": name,
        "model_id": model_id,
        "features": {"inputs": names, "targets": names[:d_out]},
        "training": {"data_options": dict(data_options or {})},
        "context_length": int(context_length),
        "scaling": scaling,
        "training_scaling": training_scaling or {},
        "metrics": metrics or {},
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
        "files": files,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _load_saved(forecaster_dir: Path) -> tuple[str, Any]:
    """The registry name and the loaded forecaster of a directory its `save` wrote; an
    ArtifactError if it is none, or holds an SMC Transformer (exported as a stateful
    artifact)."""
    try:
        saved = json.loads((forecaster_dir / MANIFEST).read_text())
        name = saved["type"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ArtifactError(f"{forecaster_dir} is not a saved forecaster: {err}") from None
    if name == "smc-transformer":
        raise ArtifactError(
            f"{forecaster_dir} holds an SMC Transformer: export its training checkpoint, "
            f"`smct export --checkpoint {forecaster_dir / 'checkpoint'}`, which writes the "
            "stateful artifact"
        )
    try:
        # the baselines' modules (statsmodels, scipy) load here only: not when serving the model
        from model.baselines.registry import load_forecaster

        forecaster = load_forecaster(forecaster_dir)  # fails here, not in the service
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as err:
        raise ArtifactError(f"{forecaster_dir} is not a saved forecaster: {err}") from None
    return name, forecaster


def check_scaling(scaling: dict[str, Any], n_features: int) -> dict[str, Any]:
    """The `scaling` of a manifest, checked: {"mode": "per_series"}, or {"mode": "global"}
    with n_features locations and n_features positive scales."""
    mode = scaling.get("mode")
    if mode == "per_series":
        return {"mode": "per_series"}
    if mode != "global":
        raise ArtifactError(f"scaling mode must be per_series or global, got {mode!r}")
    try:
        loc = [float(v) for v in scaling["loc"]]
        scale = [float(v) for v in scaling["scale"]]
    except (KeyError, TypeError, ValueError):
        raise ArtifactError("global scaling needs numeric lists loc and scale") from None
    if len(loc) != n_features or len(scale) != n_features or min(scale) <= 0:
        raise ArtifactError(
            f"global scaling needs {n_features} locations and {n_features} positive scales"
        )
    return {"mode": "global", "loc": loc, "scale": scale}


def is_baseline(path: Path | str) -> bool:
    """Whether `path` is a baseline artifact (its manifest's type), without verifying it."""
    try:
        manifest = json.loads((Path(path) / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("type") == BASELINE_TYPE


def open_baseline(path: Path | str) -> dict[str, Any]:
    """The verified manifest of a baseline artifact (type, version, every file's sha256)."""
    path = Path(path)
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError) as err:
        raise ArtifactError(f"{path}: cannot read {MANIFEST}: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("type") != BASELINE_TYPE:
        raise ArtifactError(f"{path}: artifact type is not {BASELINE_TYPE!r}")
    if manifest.get("format_version") != BASELINE_VERSION:
        raise ArtifactError(
            f"{path}: baseline artifact format version {manifest.get('format_version')!r} is "
            f"not supported (this code reads version {BASELINE_VERSION}); re-export it"
        )
    for name, expected in manifest.get("files", {}).items():
        file = path / name
        if not file.is_file():
            raise ArtifactError(f"{path}: file {name} is missing")
        if sha256_file(file) != expected:
            raise ArtifactError(
                f"{path}: checksum mismatch for {name} (the file was changed or corrupted)"
            )
    if not manifest.get("files"):
        raise ArtifactError(f"{path}: manifest lists no files")
    return manifest
