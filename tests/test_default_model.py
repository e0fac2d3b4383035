"""The default model is committed (artifacts/default, its noise table regenerated at open):
its files are the ones its manifest names, it is the configuration `make model` trains, and the
recipe's arithmetic is the one that trained it (a short run of the same command, its weights
pinned)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import torch

from model.artifacts.artifact import NOISE, Artifact, sha256_file
from training.config import TrainConfig

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO / "artifacts" / "default"
# The weights of the Makefile's recipe cut to one epoch of two batches (SHORT_RECIPE): they
# change when anything in training's arithmetic does (the corpus, the configuration tree, the
# model, the objective, the optimiser), and then the committed model no longer is the recipe's:
# rebuild it with `make model`, then pin the new short run's hash here.
SHORT_RECIPE = {"--epochs": "1", "--limit": "128"}
SHORT_RECIPE_WEIGHTS = "b31fb91cedd9ce9ff949c42766b0d1ee89307aeaa5262c42cfa6b0e80972c1e7"


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
    recipe = recipe[recipe.index("\nmodel:") :]
    recipe = recipe[: recipe.index("\n\n")]  # the target's own lines
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


def _recipe(out: Path) -> tuple[list[str], dict[str, str]]:
    """The Makefile's `smct train` command and its environment, cut to SHORT_RECIPE."""
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    env = dict(v.split("=", 1) for v in re.search(r"RECIPE_ENV := (.*)", text)[1].split())
    train = re.search(r"\$\(RECIPE_ENV\) \.venv/bin/smct (train .*)", text)[1]
    argv = shlex.split(train)
    argv[argv.index("--out") + 1] = str(out)
    for flag, value in SHORT_RECIPE.items():
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    return [str(Path(sys.executable).with_name("smct")), *argv], env


def _weights_sha(checkpoint: Path) -> str:
    weights = torch.load(checkpoint / "weights.pt", map_location="cpu", weights_only=True)
    digest = hashlib.sha256()
    for name in sorted(weights):
        digest.update(name.encode())
        digest.update(weights[name].contiguous().numpy().tobytes())
    return digest.hexdigest()


def test_a_short_run_of_the_recipe_trains_the_pinned_weights(tmp_path: Path) -> None:
    """The recipe's command, pinned kernels and all, at one epoch of two batches, writes the
    weights it wrote when the committed model was built: training's arithmetic is unchanged."""
    argv, pinned = _recipe(tmp_path / "run")
    env = {**os.environ, **pinned}
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert pinned["ATEN_CPU_CAPABILITY"] == "avx2" and pinned["OMP_NUM_THREADS"] == "1"
    assert _weights_sha(tmp_path / "run") == SHORT_RECIPE_WEIGHTS
