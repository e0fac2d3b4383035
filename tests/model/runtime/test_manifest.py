"""model/runtime/serving/manifest.py tells the four model directories apart and loads each for its
use: an artifact or a baseline artifact is served, an artifact or a checkpoint is fine-tuned, and
the rest are refused with the command that makes what is needed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from model.artifacts.artifact import ArtifactError
from model.artifacts.checkpoint import save_model
from model.runtime.runtime import Runtime
from model.runtime.serving import manifest
from model.runtime.serving.baseline_artifact import export_baseline
from model.runtime.serving.stateless import StatelessRuntime
from training.fitting import benchmark_config, build


@pytest.fixture(scope="module")
def dirs(artifact: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One directory of each kind: the SMC artifact (tests/model/conftest.py), a saved
    baseline, its export, and a checkpoint of the artifact's model."""
    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("kinds")
    build("lstm-drop-0.1", 1, 1, benchmark_config(d_model=8)).save(root / "forecaster")
    export_baseline(root / "forecaster", root / "baseline", context_length=16)
    model, _ = manifest.load_model(artifact)
    save_model(model, root / "checkpoint")
    (root / "checkpoint" / "scaling.json").write_text(json.dumps({"mode": "window"}))
    return {"artifact": artifact, "baseline": root / "baseline",
            "forecaster": root / "forecaster", "checkpoint": root / "checkpoint"}


def test_each_directory_is_told_by_what_it_holds(dirs: dict[str, Path], tmp_path: Path) -> None:
    for kind, path in dirs.items():
        assert manifest.kind(path) == kind
    with pytest.raises(ArtifactError, match="no manifest.json .* no model_config.json"):
        manifest.kind(tmp_path)
    (tmp_path / "manifest.json").write_text("[1, 2]")
    with pytest.raises(ArtifactError, match="not a JSON object"):
        manifest.kind(tmp_path)


def test_load_serves_artifacts_and_refuses_the_rest(dirs: dict[str, Path]) -> None:
    assert isinstance(manifest.load(dirs["artifact"], device="cpu"), Runtime)
    assert isinstance(manifest.load(dirs["baseline"], device="cpu"), StatelessRuntime)
    for kind in ("checkpoint", "forecaster"):
        with pytest.raises(ArtifactError, match=f"is a {kind}, not an artifact.*smct export"):
            manifest.load(dirs[kind])


def test_a_damaged_artifact_is_refused_by_its_reader(dirs: dict[str, Path], tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(dirs["artifact"], other)
    record = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**record, "type": "other"}))
    assert manifest.kind(other) == "artifact"
    with pytest.raises(ArtifactError, match="artifact type is 'other'"):
        manifest.load(other)


def test_load_model_reads_artifacts_and_checkpoints(dirs: dict[str, Path]) -> None:
    from_artifact, served = manifest.load_model(dirs["artifact"])
    from_checkpoint, trained = manifest.load_model(dirs["checkpoint"])
    assert served == "global" and trained == "window"  # the artifact fixture scales globally
    assert from_artifact.cfg == from_checkpoint.cfg
    for name, weights in from_artifact.state_dict().items():
        assert torch.equal(weights, from_checkpoint.state_dict()[name]), name
    with pytest.raises(ArtifactError, match="is a baseline"):
        manifest.load_model(dirs["baseline"])
