"""Shapes and observation models of the network."""

from __future__ import annotations

import pytest
import torch

from model.filtering.filter import StepNoise, filter_init, filter_step
from model.filtering.inference import forecast_paths, run_filter
from model.filtering.resampling import get_resampler
from model.network.config import ModelConfig
from model.network.smc_transformer import SMCTransformer


def test_multi_head_attention_shapes_and_window_mask() -> None:
    cfg = ModelConfig(d_in=3, d_out=2, d_model=8, n_heads=2, window=4, d_ff=16)
    model = SMCTransformer(cfg)
    x = torch.randn(5, 9, 3)  # covariates: 3 inputs, 2 targets
    run = run_filter(model, x, 6, generator=torch.Generator().manual_seed(0))
    assert run.pred.shape == (5, 8, 6, 2) and run.state.window.shape == (5, 6, 4, 2, 8)
    assert bool(run.state.valid.all())
    paths = forecast_paths(
        model,
        run.state,
        3,
        11,
        covariates=torch.zeros(5, 3, 1),
        generator=torch.Generator().manual_seed(0),
    )
    assert paths.shape == (5, 11, 3, 2) and torch.isfinite(paths).all()


def test_attention_ignores_lags_that_do_not_exist_yet() -> None:
    cfg = ModelConfig(d_in=1, d_out=1, d_model=4, window=5)
    model = SMCTransformer(cfg)
    q = torch.randn(1, 2, 4)
    window = torch.randn(1, 2, 5, 2, 4)
    valid = torch.tensor([[True, True, False, False, False]])
    garbage = window.clone()
    garbage[:, :, 2:] = 1e6
    assert torch.allclose(model.attend(q, window, valid), model.attend(q, garbage, valid))


def test_categorical_weights_are_the_probability_of_the_observed_class() -> None:
    cfg = ModelConfig(d_in=4, d_out=4, d_model=8, window=3, obs="categorical")
    model = SMCTransformer(cfg)
    gen = torch.Generator().manual_seed(0)
    onehot = torch.nn.functional.one_hot(torch.tensor([1, 3]), 4).float()
    state = filter_init(model, onehot, 5, torch.randn(2, 5, 3, 8, generator=gen))
    y = torch.nn.functional.one_hot(torch.tensor([2, 0]), 4).float()
    noise = StepNoise.draw(2, 5, 8, gen)
    _, stats = filter_step(
        model, state, y, torch.ones(2, dtype=torch.bool), noise, get_resampler("systematic")
    )
    expected = torch.log_softmax(stats.pred, -1)[torch.arange(2), :, torch.tensor([2, 0])]
    assert torch.allclose(stats.loglik, expected)
    paths = forecast_paths(model, state, 4, 7, generator=gen)
    assert paths.shape == (2, 7, 4) and int(paths.max()) < 4  # class indices


def test_config_validation_messages() -> None:
    with pytest.raises(ValueError, match="divisible"):
        ModelConfig(d_model=10, n_heads=3)
    with pytest.raises(ValueError, match="unknown model config keys"):
        ModelConfig.from_dict({"d_model": 8, "bogus": 1})
