"""Model artifacts: a directory with a JSON manifest beside the weights, the noise table and
the ONNX graphs. Opening one checks its type, format version and every file's sha256.

    manifest.json      type "smct-artifact", format_version, model_id, model config, features,
                       context length, particles, filter settings, scaling, evaluation metrics,
                       noise table, graphs, library versions, {file: sha256}, and the
                       calibration of its forecasts' spread over a horizon where one was
                       fitted (training/calibration.py)
    weights.pt         the SMCTransformer state dict (torch backend)
    noise.f32          the noise table (model/filtering/noise.py), little-endian float32; may be
                       left out (a committed artifact): opening regenerates it from the manifest's
                       generator and seed, and checks it against the manifest's sha256
    filter_step.onnx   model/filtering/compact.compact_step          (onnx backend)
    forecast_step.onnx model/filtering/filter.forecast_step          (onnx backend)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.artifacts.formats import ARTIFACT_TYPE, ARTIFACT_VERSION, MANIFEST, WEIGHTS
from model.network.config import ModelConfig
from model.network.smc_transformer import SMCTransformer

NOISE = "noise.f32"
FILTER_GRAPH = "filter_step.onnx"
FORECAST_GRAPH = "forecast_step.onnx"
FILES = (WEIGHTS, NOISE, FILTER_GRAPH, FORECAST_GRAPH)
REQUIRED = (
    "model_id",
    "model_config",
    "features",
    "context_length",
    "particles",
    "filter",
    "scaling",
    "noise",
    "files",
)
SCALING_MODES = ("global", "per_series")
GROWTH_RANGE = (0.0, 1.0)  # the horizon growth g an artifact's calibration may hold


class ArtifactError(Exception):
    """An artifact directory that cannot be used, with the reason."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def model_id_of(weights_sha: str, noise_sha: str) -> str:
    """What a series state is tied to: the weights and the noise table that rebuild it."""
    return hashlib.sha256(f"{weights_sha}:{noise_sha}".encode()).hexdigest()


def write_manifest(directory: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Add the checksums and model id of the files in `directory`, then write manifest.json."""
    files = {name: sha256_file(directory / name) for name in FILES}
    manifest = {
        "type": ARTIFACT_TYPE,
        "format_version": ARTIFACT_VERSION,
        "model_id": model_id_of(files[WEIGHTS], files[NOISE]),
        **manifest,
        "files": files,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _regenerate_noise(path: Path, manifest: dict[str, Any]) -> None:
    """Write the noise table of `manifest` into `path` from its generator and seed (a few
    hundred ms); the caller checks it against the manifest's sha256."""
    from model.filtering.noise import GENERATOR, make_table

    spec = manifest.get("noise", {})
    if spec.get("generator") != GENERATOR:
        return  # not one this code makes: reported as missing
    table = make_table(int(spec["size"]), int(spec["seed"]))
    tmp = path / f".{NOISE}.{id(table)}.tmp"
    try:
        table.astype("<f4").tofile(tmp)
        tmp.replace(path / NOISE)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise ArtifactError(
            f"{path}: {NOISE} is missing and cannot be written there ({err}); regenerate it "
            "where the directory is writable, or copy it in"
        ) from None


def _growth(manifest: dict[str, Any]) -> float:
    value = manifest.get("calibration", {}).get("horizon_growth", 0.0)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if number and np.isfinite(value) else np.nan


def write_calibration(path: Path, calibration: dict[str, Any]) -> None:
    """Set the manifest's calibration record (the model id and the files' checksums do not
    cover it: a calibration changes what the layer does with the model's paths, not the model)."""
    manifest = _read_manifest(path)
    manifest["calibration"] = calibration
    tmp = path / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    tmp.replace(path / MANIFEST)


def _read_manifest(path: Path) -> dict[str, Any]:
    """The manifest of the artifact at `path`, of this type and format version, with every
    required key."""
    if not (path / MANIFEST).is_file():
        raise ArtifactError(
            f"{path} is not an artifact directory: no {MANIFEST} (export one with `smct "
            "export`, or point at one)"
        )
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError) as err:
        raise ArtifactError(f"{path / MANIFEST} is not valid JSON: {err}") from None
    if not isinstance(manifest, dict) or manifest.get("type") != ARTIFACT_TYPE:
        found = manifest.get("type") if isinstance(manifest, dict) else None
        raise ArtifactError(f"{path}: artifact type is {found!r}, expected {ARTIFACT_TYPE!r}")
    if manifest.get("format_version") != ARTIFACT_VERSION:
        raise ArtifactError(
            f"{path}: artifact format version {manifest.get('format_version')!r} is not "
            f"supported (this code reads version {ARTIFACT_VERSION}); re-export it"
        )
    missing = [key for key in REQUIRED if key not in manifest]
    if missing:
        raise ArtifactError(f"{path}: manifest lacks {missing}")
    return manifest


def _check_files(path: Path, manifest: dict[str, Any], verify: bool) -> None:
    """Every file of the manifest is there (the noise table regenerated if missing) and, if
    `verify`, has its sha256."""
    for name in FILES:
        expected = manifest["files"].get(name)
        if expected is None:
            raise ArtifactError(f"{path}: manifest has no checksum for {name}")
        if name == NOISE and not (path / name).is_file():
            _regenerate_noise(path, manifest)
        if not (path / name).is_file():
            raise ArtifactError(f"{path}: file {name} is missing")
        if verify and sha256_file(path / name) != expected:
            raise ArtifactError(
                f"{path}: checksum mismatch for {name} (the file was changed or corrupted)"
            )


@dataclass(frozen=True)
class Artifact:
    """An opened, verified artifact directory."""

    path: Path
    manifest: dict[str, Any]

    @classmethod
    def open(cls, path: Path | str, *, verify: bool = True) -> Artifact:
        """Read the manifest and check type, version, files and (if `verify`) checksums."""
        path = Path(path)
        manifest = _read_manifest(path)
        _check_files(path, manifest, verify)
        if (
            verify
            and model_id_of(manifest["files"][WEIGHTS], manifest["files"][NOISE])
            != manifest["model_id"]
        ):
            raise ArtifactError(f"{path}: model_id does not match the weights and noise table")
        mode = manifest["scaling"].get("mode")
        if mode not in SCALING_MODES:
            raise ArtifactError(f"{path}: unknown scaling mode {mode!r}; valid: {SCALING_MODES}")
        growth = _growth(manifest)
        if not GROWTH_RANGE[0] <= growth <= GROWTH_RANGE[1]:
            raise ArtifactError(
                f"{path}: calibration.horizon_growth {growth!r} is outside {GROWTH_RANGE}"
            )
        length = manifest.get("calibration", {}).get("growth_length", 1.0)
        if isinstance(length, bool) or not isinstance(length, (int, float)) or not length > 0:
            raise ArtifactError(
                f"{path}: calibration.growth_length {length!r} is not a positive number of values"
            )
        return cls(path=path, manifest=manifest)

    @property
    def horizon_growth(self) -> float:
        """g of the spread's factor h^g at a forecast's step h (model/series/spread.py), from
        the artifact's calibration; 0 where it has none."""
        return _growth(self.manifest)

    @property
    def growth_length(self) -> float:
        """The record (values seen) past which a series' growth fades as length / t
        (model/series/spread.series_growth); inf (never) where the calibration names none."""
        value = self.manifest.get("calibration", {}).get("growth_length")
        return np.inf if value is None else float(value)

    @property
    def model_id(self) -> str:
        return str(self.manifest["model_id"])

    @property
    def config(self) -> ModelConfig:
        return ModelConfig.from_dict(self.manifest["model_config"])

    def file(self, name: str) -> Path:
        return self.path / name

    def load_model(self, device: str = "cpu") -> SMCTransformer:
        model = SMCTransformer(self.config)
        try:
            weights = torch.load(self.file(WEIGHTS), map_location=device, weights_only=True)
            model.load_state_dict(weights)
        except (RuntimeError, ValueError, OSError) as err:
            raise ArtifactError(f"{self.path}: cannot load {WEIGHTS}: {err}") from None
        return model.to(device).eval()

    def load_noise(self) -> np.ndarray:
        table = np.fromfile(self.file(NOISE), dtype="<f4")
        if table.size != int(self.manifest["noise"]["size"]):
            raise ArtifactError(
                f"{self.path}: {NOISE} holds {table.size} values, manifest says "
                f"{self.manifest['noise']['size']}"
            )
        return table.astype(np.float32, copy=False)
