"""The compact filter step (model/filtering/compact.py) against model/filtering/filter.py on the
same noise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.filtering.compact import compact_step, materialize, rollout_windows
from model.filtering.filter import CompactState, FilterState, filter_init, filter_step
from model.filtering.noise import NoiseLayout, check_table, make_table, noise_rows, step_noise
from model.filtering.resampling import get_resampler
from model.network.config import ModelConfig
from model.network.smc_transformer import SMCTransformer

CONFIGS = {
    "univariate": ModelConfig(d_model=16, window=5, d_ff=8),
    "multivariate-2-heads": ModelConfig(d_in=3, d_out=2, d_model=16, n_heads=2, window=4, d_ff=8),
    "lags-2-heads": ModelConfig(d_model=16, n_heads=2, window=5, d_ff=8, lags=True, skip=True),
    "lag-inputs": ModelConfig(
        d_model=16, n_heads=2, window=6, d_ff=8, lags=True, skip=True, lag_inputs=True
    ),
    "obs-scale": ModelConfig(
        d_model=16, n_heads=2, window=6, d_ff=8, lags=True, skip=True, lag_inputs=True,
        obs_scale=True,
    ),
    "det-context": ModelConfig(
        d_model=16, n_heads=2, window=7, d_ff=8, lags=True, skip=True, lag_inputs=True,
        obs_scale=True, det_context=3,
    ),
}


def _model(cfg: ModelConfig) -> SMCTransformer:
    torch.manual_seed(0)
    model = SMCTransformer(cfg).eval()
    with torch.no_grad():  # weights far from the initialisation, so every path matters
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model


def _check_rollout_layout(
    model: SMCTransformer, noise: torch.Tensor, base: torch.Tensor, state: CompactState,
    rebuilt: FilterState,
) -> None:
    """rollout_windows: materialize's window laid out as keys (B, Hd, R, L, P) and values
    (B, Hd, L, R, P), bit for bit; materialize without the window: the rest unchanged."""
    b, p, n_lag, _, d = rebuilt.window.shape
    hd = model.cfg.n_heads
    keys, values = rollout_windows(model, noise, base, state)
    kv = rebuilt.window.view(b, p, n_lag, 2, hd, d // hd)
    assert torch.equal(keys, kv[:, :, :, 0].permute(0, 3, 4, 2, 1))
    assert torch.equal(values, kv[:, :, :, 1].permute(0, 3, 2, 4, 1))
    rest = materialize(model, noise, base, state, window=False)
    assert rest.window.shape == rebuilt.window.shape
    assert torch.equal(rest.query, rebuilt.query) and torch.equal(rest.x_prev, rebuilt.x_prev)


@pytest.mark.parametrize("threshold", [1.0, 0.5])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_compact_step_equals_filter_step(name: str, threshold: float) -> None:
    """Same ancestors and, to float32 rounding, the same predictions, weights, ESS and imputed
    inputs as filter.filter_step on the same noise, with missing steps (one in a row, then two)."""
    cfg = CONFIGS[name]
    model, (b, p, steps, n_lag) = _model(cfg), (3, 7, 12, cfg.window)
    layout = NoiseLayout(p, cfg.d_model, cfg.n_heads)
    noise = noise_rows(make_table(1 << 16), layout)
    seeds = np.array([1, 2, 3], dtype=np.uint64)
    x = torch.randn(b, steps, cfg.d_in)
    x[1, 4:6] = float("nan")
    x[2, 7, 0] = float("nan")
    observed = ~torch.isnan(x[..., : cfg.target_dim]).any(-1)
    resampler = get_resampler("systematic")

    def base(t: int) -> torch.Tensor:
        step_nums = np.repeat(np.arange(t + 1, t - n_lag, -1)[None], b, axis=0)
        return torch.from_numpy(layout.base_rows(seeds, step_nums, noise.shape[0]))

    season = torch.tensor([0, 2, 3]) if cfg.lag_inputs else None  # none, both lags, one
    with torch.no_grad():
        hd = cfg.n_heads
        eps_qkv = step_noise(noise, base(0)[:, 0], p, hd).eps_qkv
        state = filter_init(model, x[:, 0], p, eps_qkv, season)
        x_hist = torch.zeros(b, n_lag, cfg.d_in)
        x_hist[:, 0] = x[:, 0]
        valid = torch.zeros(b, n_lag, dtype=torch.bool)
        valid[:, 0] = True
        lineage = torch.zeros(b, p, n_lag, dtype=torch.long)
        lineage[:, :, 0] = torch.arange(p)
        compact = CompactState(x_hist, valid, lineage, torch.zeros(b, p), season)
        for t in range(1, steps):
            rebuilt = materialize(model, noise, base(t), compact)
            # the lags attended (with a layer under: those whose K inputs the window holds)
            lags = model.attended(compact.valid)[:, None, :, None, None]
            torch.testing.assert_close(rebuilt.window * lags, state.window * lags)
            torch.testing.assert_close(rebuilt.query, state.query)
            _check_rollout_layout(model, noise, base(t), compact, rebuilt)
            state, ref = filter_step(
                model,
                state,
                x[:, t],
                observed[:, t],
                step_noise(noise, base(t)[:, 0], p, hd),
                resampler,
                threshold,
            )
            compact, got = compact_step(
                model, noise, base(t), compact, x[:, t], observed[:, t], resampler, threshold
            )
            assert torch.equal(got.ancestors, ref.ancestors)
            assert torch.equal(got.resampled, ref.resampled)
            assert torch.equal(compact.valid, state.valid)
            for a, r in (
                (got.pred, ref.pred),
                (compact.logw, state.logw),
                (got.ess, ref.ess),
                (got.loglik, ref.loglik),
                (got.logw_pred, ref.logw_pred),
                (got.log_evidence, ref.log_evidence),
            ):
                torch.testing.assert_close(a, r, rtol=1e-5, atol=2e-5)
            # the absorbed input (X_t, or its imputed mean) is at lag 1 of the new state
            torch.testing.assert_close(
                compact.x_hist[:, 0], state.x_prev[:, 0], rtol=1e-5, atol=2e-5
            )


def test_a_window_never_shares_noise_blocks() -> None:
    """The L + 1 blocks one update reads are distinct, and a table too small is refused."""
    layout = NoiseLayout(100, 32, 1)
    rows = (1 << 23) // 32
    check_table(rows, layout, window=24)
    seeds = np.array([0, 2**63 + 5, 123456789], dtype=np.uint64)
    steps = np.arange(1000, 1000 - 25, -1)[None].repeat(3, axis=0)
    base = layout.base_rows(seeds, steps, rows)
    assert all(len(set(row)) == 25 for row in base.tolist())
    assert (base % layout.block_rows == 0).all() and (base + layout.block_rows <= rows).all()
    with pytest.raises(ValueError, match="noise table holds"):
        check_table(rows, NoiseLayout(20_000, 32, 1), window=24)
