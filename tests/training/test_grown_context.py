"""A model's context grown for fine-tuning (`smct train --init DIR --window W`,
training/finetune.grow_window): the lags it adds start unused, so the grown model forecasts as
its init model until training finds a use for them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from cli.app import app
from model.network.config import ModelConfig
from model.network.smc_transformer import LONG_SLOPE, N_LAG_TERMS, SMCTransformer
from tests.weights import trained_like
from training import trainer
from training.checkpoint import Checkpoint
from training.datasets import load_dataset
from training.finetune import GROWN_LAG_BIAS, grow_window

CFG = ModelConfig(d_model=16, n_heads=2, window=6, d_ff=8, lags=True, skip=True,
                  lag_inputs=True, obs_scale=True)


def _window(model: SMCTransformer, x: torch.Tensor, particles: int) -> tuple[torch.Tensor, ...]:
    """The model's own noisy query of the last input and keys and values of the steps before,
    lag 1 first: x (B, T, 1) -> q (B, P, D), window (B, P, T - 1, 2, D)."""
    b, t, _ = x.shape
    d = model.cfg.d_model
    eps = torch.randn(b, particles * t, 3, d)
    qkv = model.encode(x.repeat(1, particles, 1), eps).view(b, particles, t, 3, d)
    return qkv[:, :, -1, 0], qkv[:, :, :-1, 1:].flip(2)


def test_the_grown_model_keeps_every_weight_and_adds_unused_lags() -> None:
    model = trained_like(CFG)
    grown = grow_window(model, 20)
    assert grown.cfg == ModelConfig(**{**CFG.to_dict(), "window": 20})
    before, after = model.state_dict(), grown.state_dict()
    assert before.keys() == after.keys()
    rows = slice(LONG_SLOPE * CFG.d_out, (LONG_SLOPE + 1) * CFG.d_out)
    for name, value in before.items():
        if name in ("lag_key", "lag_value"):
            assert torch.equal(after[name][:6], value) and not after[name][6:].any(), name
        elif name == "lag_bias":
            assert torch.equal(after[name][:, :6], value), name
            assert (after[name][:, 6:] == GROWN_LAG_BIAS).all()
        elif name.startswith("lag_coef."):  # the long slope reads lag 20 now: restarted at 0
            assert not after[name][rows].any(), name
            keep = torch.ones(N_LAG_TERMS * CFG.d_out, dtype=torch.bool)
            keep[rows] = False
            assert torch.equal(after[name][keep], value[keep]), name
        else:
            assert torch.equal(after[name], value), name
    assert grow_window(model, 6).state_dict().keys() == before.keys()  # the same window: as is


def test_the_grown_model_attends_as_its_model_over_the_lags_it_knew() -> None:
    """The grown model's scores are its model's over the lags it knew and GROWN_LAG_BIAS over
    the lags it adds (their embeddings are zero), so that where the added lags are not held yet
    it attends exactly as its model."""
    model = trained_like(CFG)
    grown = grow_window(model, 20)
    torch.manual_seed(1)
    walk = torch.cumsum(0.3 * torch.randn(4, 21, 1), dim=1)
    with torch.no_grad():
        q, window = _window(model, walk, particles=30)
        scores = grown.lag_scores(q, 20)
        torch.testing.assert_close(scores[..., :6], model.lag_scores(q, 6))
        assert (scores[..., 6:] == GROWN_LAG_BIAS).all()
        held = torch.ones(4, 20, dtype=torch.bool)
        held[:, 6:] = False
        torch.testing.assert_close(
            grown.attend(q, window, held), model.attend(q, window[:, :, :6], held[:, :6])
        )


def test_a_context_cannot_shrink_or_grow_without_lag_embeddings() -> None:
    with pytest.raises(ValueError, match="cannot be cut to fewer"):
        grow_window(trained_like(CFG), 4)
    plain = ModelConfig(d_model=8, window=6, d_ff=8)
    with pytest.raises(ValueError, match="only a model with lag embeddings"):
        grow_window(SMCTransformer(plain), 12)


def _run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def test_train_grows_an_init_models_context(tmp_path: Path) -> None:
    """`smct train --init DIR --window W`: W above the model's grows its context (the run's
    first weights are the grown model's), W below it is refused with what to do."""
    common = ["--dataset", "synthetic-1", "--limit", "64", "--epochs", "1", "--d-ff", "8",
              "--particles", "5", "--threads", "1", "--no-progress", "--no-evaluate"]
    base, grown = tmp_path / "base", tmp_path / "grown"
    code, text = _run("train", *common, "--d-model", "8", "--lags", "--window", "4",
                      "--out", base)
    assert code == 0, text
    code, text = _run("train", *common, "--init", base, "--window", "12", "--out", grown)
    assert code == 0, text
    ckpt = Checkpoint.load(grown)
    assert ckpt.model.cfg.window == 12 and ckpt.model.cfg.d_model == 8
    start = trainer.initial_model(ckpt.train_config, load_dataset("synthetic-1", limit=64))
    expected = grow_window(Checkpoint.load(base).model, 12).state_dict()
    for name, value in start.state_dict().items():
        assert torch.equal(value, expected[name]), name
    code, text = _run("train", *common, "--init", base, "--window", "2",
                      "--out", tmp_path / "cut")
    assert code == 2 and "--window 2 (the model's is 4)" in text, text
    assert "a --window above the model's grows its context" in text, text
    assert not (tmp_path / "cut").exists()
