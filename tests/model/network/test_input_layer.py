"""The deterministic layer under the stochastic one (ModelConfig.det_context,
model/network/input_layer.py): what it reads, that it adds nothing until trained when put
under a trained model (training/finetune.add_input_layer), and that the particles share it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from cli.app import app
from model.filtering.filter import filter_init, filter_step
from model.filtering.noise import NoiseLayout, make_table, noise_rows, step_noise
from model.filtering.resampling import get_resampler
from model.network.config import ModelConfig
from model.network.input_layer import windows_of
from model.network.smc_transformer import LONG_SLOPE, SMCTransformer
from tests.weights import trained_like
from training import trainer
from training.checkpoint import Checkpoint
from training.datasets import load_dataset
from training.finetune import add_input_layer, grow_window

CFG = ModelConfig(d_model=16, n_heads=2, window=6, d_ff=8, lags=True, skip=True,
                  lag_inputs=True, obs_scale=True)


def _filter(model: SMCTransformer, x: torch.Tensor, season: torch.Tensor) -> list[torch.Tensor]:
    """Every step's predictions and log-evidence of the filter on x (B, T, 1), on noise drawn
    from a fixed table at the model's width (the same for models of the same width)."""
    b, t, _ = x.shape
    p, hd = 9, model.cfg.n_heads
    layout = NoiseLayout(p, model.cfg.d_model, hd)
    table = noise_rows(make_table(1 << 15), layout)
    rows = torch.from_numpy(layout.base_rows(
        np.arange(b, dtype=np.uint64), np.repeat(np.arange(t)[None], b, 0), table.shape[0]
    ))
    observed = ~torch.isnan(x[..., 0])
    out = []
    with torch.no_grad():
        state = filter_init(model, x[:, 0], p, step_noise(table, rows[:, 0], p, hd).eps_qkv,
                            season)
        for s in range(1, t):
            noise = step_noise(table, rows[:, s], p, hd)
            state, stats = filter_step(model, state, x[:, s], observed[:, s], noise,
                                       get_resampler("systematic"))
            out += [stats.pred, stats.log_evidence]
    return out


def test_the_layer_reads_the_last_k_inputs_of_a_step_and_no_older() -> None:
    """c(tau) moves with X_tau .. X_{tau-K+1} and not with X_{tau-K}; the inputs that do not
    exist yet (at the series' start) are not read."""
    model = trained_like(ModelConfig(**{**CFG.to_dict(), "det_context": 3}))
    torch.manual_seed(1)
    x = torch.randn(2, 6, 1)
    valid = torch.ones(2, 6, dtype=torch.bool)
    valid[1, 2:] = False  # the second series holds two inputs
    base = model.window_means(x, valid)
    for j, moves in ((0, True), (2, True), (3, False)):
        changed = x.clone()
        changed[:, j] += 1.0
        after = model.window_means(changed, valid)
        # position 0 reads inputs 0..2: of the second series only 0 and 1 exist
        expect = moves and not (j == 2)
        assert bool((after[1, 0] != base[1, 0]).any()) == expect, j
        assert bool((after[0, 0] != base[0, 0]).any()) == moves, j
    inputs, held = windows_of(x, valid, 3)
    assert torch.equal(inputs[0, 2], x[0, 2:5]) and held[1, 1].tolist() == [True, False, False]
    assert held[0, 4].tolist() == [True, True, False]  # past the window: not read


def test_the_particles_share_the_layer() -> None:
    """No noise enters the layer: every particle's q, k, v means of an input are the same."""
    model = trained_like(ModelConfig(**{**CFG.to_dict(), "det_context": 3}))
    inputs = torch.randn(2, 1, 6, 1)
    valid = torch.ones(2, 6, dtype=torch.bool)
    qkv = model.encode(inputs[:, :, 0].expand(2, 5, 1), torch.zeros(2, 5, 3, 16), inputs, valid)
    assert torch.equal(qkv, qkv[:, :1].expand_as(qkv))
    assert qkv.shape == (2, 5, 3, 16)


@pytest.mark.parametrize("k", [1, 4])
def test_a_layer_put_under_a_model_forecasts_as_the_model(k: int) -> None:
    """add_input_layer of the model grown by K - 1 lags gives the model's predictions and
    evidence at every step (its output starts at zero and the attention reads the model's own
    lags), with missing steps, while every weight of the model is kept; trained (its output
    moved) it forecasts otherwise."""
    model = trained_like(CFG)
    with torch.no_grad():  # the long slope reads another lag once grown (grow_window)
        model.lag_coef.weight[LONG_SLOPE] = 0.0
        model.lag_coef.bias[LONG_SLOPE] = 0.0
    layered = add_input_layer(grow_window(model, CFG.window + k - 1), k).eval()
    assert layered.cfg.attended == CFG.window and layered.cfg.det_context == k
    kept = layered.state_dict()
    assert all(torch.equal(kept[name], value) for name, value in model.state_dict().items()
               if not name.startswith("lag_"))
    torch.manual_seed(2)
    x = torch.cumsum(0.5 * torch.randn(3, 16, 1), dim=1)
    x[1, 5:7] = float("nan")
    season = torch.tensor([0, 2, 3])
    for a, b in zip(_filter(model, x, season), _filter(layered, x, season), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        layered.under.to_qkv.bias.add_(0.5)
    moved = _filter(layered, x, season)
    assert not torch.allclose(moved[0], _filter(model, x, season)[0])


def test_a_layer_is_not_put_under_twice_and_needs_the_inputs() -> None:
    layered = add_input_layer(trained_like(CFG), 2)
    with pytest.raises(ValueError, match="leave --det-context out"):
        add_input_layer(layered, 3)
    with pytest.raises(ValueError, match="needs lag_inputs"):
        ModelConfig(d_model=16, window=6, det_context=2)
    with pytest.raises(ValueError, match="at most window"):
        ModelConfig(**{**CFG.to_dict(), "det_context": 7})


def _run(*args: object) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def test_train_puts_a_layer_under_an_init_model(tmp_path: Path) -> None:
    """`smct train --init DIR --det-context K`: the run starts from the model with a layer under
    it and its window grown by K - 1 (add_input_layer of grow_window, seeded as the run); a
    model with a layer keeps it, another K is refused with what to do."""
    common = ["--dataset", "synthetic-1", "--limit", "64", "--epochs", "1", "--d-ff", "8",
              "--particles", "5", "--threads", "1", "--no-progress", "--no-evaluate"]
    base, layered = tmp_path / "base", tmp_path / "layered"
    code, text = _run("train", *common, "--d-model", "8", "--lags", "--skip", "--lag-inputs",
                      "--window", "4", "--out", base)
    assert code == 0, text
    code, text = _run("train", *common, "--init", base, "--det-context", "3", "--out", layered)
    assert code == 0, text
    ckpt = Checkpoint.load(layered)
    assert (ckpt.model.cfg.window, ckpt.model.cfg.det_context, ckpt.model.cfg.attended) == (6, 3, 4)
    torch.manual_seed(ckpt.train_config.seed)
    start = trainer.initial_model(ckpt.train_config, load_dataset("synthetic-1", limit=64))
    model = Checkpoint.load(base).model
    assert not start.under.to_qkv.weight.any()
    for name, value in grow_window(model, 6).state_dict().items():
        assert torch.equal(start.state_dict()[name], value), name
    code, text = _run("train", *common, "--init", layered, "--out", tmp_path / "again")
    assert code == 0 and Checkpoint.load(tmp_path / "again").model.cfg.det_context == 3, text
    code, text = _run("train", *common, "--init", layered, "--det-context", "2",
                      "--out", tmp_path / "other")
    assert code == 2 and "--det-context 2 (the model's is 3)" in text, text
    assert not (tmp_path / "other").exists()
