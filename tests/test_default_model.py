"""The default model is committed (artifacts/default, its noise table regenerated at open):
its files are the ones its manifest names, and it is the configuration `make model` trains."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from model.artifacts.artifact import NOISE, Artifact, sha256_file
from training.config import TrainConfig

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "artifacts" / "default"


def test_the_committed_files_match_the_manifest(tmp_path: Path) -> None:
    manifest = json.loads((DEFAULT / "manifest.json").read_text())
    for name, sha in manifest["files"].items():
        if name == NOISE and not (DEFAULT / name).is_file():
            continue  # not committed: regenerated when the artifact is opened
        assert sha256_file(DEFAULT / name) == sha, name
    copy = tmp_path / "default"
    shutil.copytree(DEFAULT, copy, ignore=shutil.ignore_patterns(NOISE))
    opened = Artifact.open(copy)  # regenerates the noise table and checks every sha256
    assert opened.model_id == manifest["model_id"]
    assert opened.manifest["scaling"]["mode"] == "per_series"


def test_make_model_trains_the_committed_configuration() -> None:
    """The Makefile's recipe names the committed model's shape and training set."""
    manifest = json.loads((DEFAULT / "manifest.json").read_text())
    cfg, training = manifest["model_config"], manifest["training"]
    recipe = (REPO / "Makefile").read_text()
    recipe = recipe[recipe.index("model:") :]
    flags = dict(re.findall(r"--([a-z-]+) ([^\s\\]+)", recipe))
    run = TrainConfig.from_dict(training)  # the tree, or the flat record of an older export
    assert flags["dataset"] == run.data.dataset == "corpus"
    assert int(flags["d-model"]) == cfg["d_model"] and int(flags["window"]) == cfg["window"]
    assert int(flags["n-heads"]) == cfg["n_heads"] and cfg["lags"] is True
    assert "--lags" in recipe and flags["scaling"] == "per-series"
    for option in ("lags", "skip", "lag_inputs", "obs_scale"):  # the options beyond the paper
        assert cfg[option] is (f"--{option.replace('_', '-')} " in recipe), option
    assert int(flags["epochs"]) == run.optim.epochs and flags["schedule"] == run.optim.schedule
    ignored = (REPO / ".gitignore").read_text()
    assert "/artifacts/default/noise.f32" in ignored and "!/artifacts/default/" in ignored
