"""The model directories smct reads, told apart by what they hold, and one load for each use.

    kind(path)        "artifact":   `smct export` of an SMC Transformer (manifest.json, type
                                    "smct-artifact"; model/artifacts/artifact.py)
                      "baseline":   `smct export` of a baseline (type "smct-baseline";
                                    model/runtime/serving/baseline_artifact.py)
                      "forecaster": a baseline saved by `smct benchmark --save-models` (its
                                    manifest's type is its registry name; model/baselines)
                      "checkpoint": `smct train --out` (model_config.json and weights.pt;
                                    model/artifacts/checkpoint.py)
    servable(path)    its kind where it can be served (an artifact or a baseline artifact)
    load(path, ...)   the serving runtime of an artifact or a baseline artifact
    load_model(path)  the SMC Transformer of an artifact or a checkpoint, and how its training
                      windows were scaled (what fine-tuning starts from)

Every reader raises ArtifactError with what the directory lacks and the command that writes
one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from model.artifacts.artifact import Artifact, ArtifactError
from model.artifacts.checkpoint import MODEL_CONFIG, WEIGHTS
from model.artifacts.formats import ARTIFACT_TYPE, BASELINE_TYPE, MANIFEST

if TYPE_CHECKING:
    from model.network.smc_transformer import SMCTransformer
    from model.runtime.serving.served import ServedRuntime
    from model.series.adaptation import AdaptConfig

Kind = Literal["artifact", "baseline", "forecaster", "checkpoint"]
SCALING_FILE = "scaling.json"  # a checkpoint's record of its training windows' scaling


def kind(path: Path | str) -> Kind:
    """What the directory `path` holds (its manifest's type, or a checkpoint's files)."""
    path = Path(path)
    if not path.is_dir():
        why = "is not a directory" if path.exists() else "does not exist"
        raise ArtifactError(f"{path} {why}")
    manifest = _manifest(path)
    if manifest is not None:
        if manifest.get("type") == BASELINE_TYPE:
            return "baseline"
        if manifest.get("type") != ARTIFACT_TYPE and "config" in manifest:
            return "forecaster"  # model/baselines/base.write_manifest's
        return "artifact"  # (whose reader says what is wrong with another type)
    if (path / MODEL_CONFIG).is_file() and (path / WEIGHTS).is_file():
        return "checkpoint"
    raise ArtifactError(
        f"{path} is neither an artifact nor a checkpoint: no {MANIFEST} (`smct export`; a "
        f"baseline's: `smct benchmark --save-models`) and no {MODEL_CONFIG} with {WEIGHTS} "
        "(`smct train --out`)"
    )


def load(
    path: Path | str,
    *,
    backend: str = "torch",
    device: str = "auto",
    threads: int = 1,
    max_filter_steps: int | None = None,
    adapt: AdaptConfig | None = None,
) -> ServedRuntime:
    """The runtime that serves `path`: an artifact's on `backend`, or a baseline artifact's
    (which runs on torch). A checkpoint or a saved forecaster is refused with the command
    that exports it."""
    if servable(path) == "baseline":
        from model.runtime.serving.stateless import StatelessRuntime

        return StatelessRuntime.load(path, device=device)
    from model.runtime.runtime import Runtime

    return Runtime.load(
        path, backend=backend, device=device, threads=threads,
        max_filter_steps=max_filter_steps, adapt=adapt,
    )


def servable(path: Path | str) -> Kind:
    """The kind of `path` where it can be served ("artifact" or "baseline"), without loading
    it; ArtifactError, with the command that exports one, where it cannot."""
    found = kind(path)
    if found not in ("artifact", "baseline"):
        raise ArtifactError(
            f"{path} is a {found}, not an artifact: serve it after `smct export --checkpoint "
            f"{path} --out DIR`"
        )
    return found


def load_model(path: Path | str) -> tuple[SMCTransformer, str]:
    """The SMC Transformer of an artifact or a checkpoint, and how its training windows were
    scaled: "global" (one scaler), "window" (each by its own history; an artifact served per
    series) or "series" (each series by its own training part)."""
    path = Path(path)
    found = kind(path)
    if found == "artifact":
        artifact = Artifact.open(path)
        mode = artifact.manifest["scaling"]["mode"]
        return artifact.load_model(), "global" if mode == "global" else "window"
    if found == "checkpoint":
        from model.artifacts.checkpoint import load_model as load_checkpoint_model

        record = _json(path / SCALING_FILE) or {}
        return load_checkpoint_model(path), str(record.get("mode", "global"))
    raise ArtifactError(
        f"{path} is a {found}: an SMC Transformer artifact (`smct export`) or checkpoint "
        "(`smct train --out`) is needed"
    )


def _manifest(path: Path) -> dict[str, Any] | None:
    if not (path / MANIFEST).is_file():
        return None
    manifest = _json(path / MANIFEST)
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{path / MANIFEST} is not a JSON object")
    return manifest


def _json(file: Path) -> Any:
    if not file.is_file():
        return None
    try:
        return json.loads(file.read_text())
    except (OSError, ValueError) as err:
        raise ArtifactError(f"{file} is not valid JSON: {err}") from None
