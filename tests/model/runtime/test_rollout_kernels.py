"""The compiled kernels of the rollout (model/runtime/rollout_kernels.py) on cases with a known
answer; tests/model/runtime/test_rollout.py checks them inside the rollout against the
forecast graph for every option of the model."""

from __future__ import annotations

import numpy as np

from model.network.smc_transformer import N_LAG_TERMS
from model.runtime import rollout_kernels as kernels

RNG = np.random.default_rng(0)
B, HD, R, L, M = 2, 2, 3, 5, 7


def _normal(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape).astype(np.float32)


def _attend(query: np.ndarray, held: np.ndarray, lag_keys: np.ndarray) -> tuple[np.ndarray, ...]:
    keys, values, lag_values = _normal(B, HD, R, L, M), _normal(B, HD, L, R, M), _normal(HD, R, L)
    out = np.empty((B, HD * R, M), np.float32)
    kernels.attend(
        keys, values, query, lag_keys, lag_values, held, np.empty((L + 2, M), np.float32), out
    )
    return out.reshape(B, HD, R, M), values, lag_values


def test_equal_scores_average_the_held_values() -> None:
    """A query of zeros and no lag keys: every held slot weighs the same, so mu is the mean of
    their values plus the lag values' embeddings; the slots not held weigh nothing."""
    held = np.ones((B, L), np.bool_)
    held[1, 3:] = False
    mu, values, lag_values = _attend(
        np.zeros((B, HD, R, M), np.float32), held, np.zeros((HD, L, R + 1), np.float32)
    )
    for b in range(B):
        slots = np.flatnonzero(held[b])
        want = (values[b][:, slots] + lag_values[:, :, slots].transpose(0, 2, 1)[..., None])
        np.testing.assert_allclose(mu[b], want.mean(axis=1), rtol=1e-5, atol=1e-6)


def test_a_dominant_lag_bias_picks_its_slot() -> None:
    """A lag bias of 50 on slot 2 over 0 elsewhere: its weight is 1 to float32 precision."""
    lag_keys = np.zeros((HD, L, R + 1), np.float32)
    lag_keys[:, 2, R] = 50.0
    mu, values, lag_values = _attend(
        0.01 * _normal(B, HD, R, M), np.ones((B, L), np.bool_), lag_keys
    )
    np.testing.assert_allclose(
        mu, values[:, :, 2] + lag_values[None, :, :, 2, None], rtol=1e-5, atol=1e-5
    )


def test_a_linear_readout_is_its_affine_map_plus_the_skip_and_noise() -> None:
    """Without residual, head, lags and scale: X_t = W (mu + sd_z eps_z) + b + a X_{t-1} +
    sd eps_x, computed here in float64."""
    d, f, o = 4, 2, 2
    z = np.zeros
    w = kernels.ReadoutWeights(
        z_sd=np.abs(_normal(d)), embed_w=z((d, f), np.float32), embed_b=z(d, np.float32),
        norm_w=z(d, np.float32), norm_b=z(d, np.float32), reads_w=_normal(o, d),
        reads_b=_normal(o), second_w=z((d, 0), np.float32), second_b=z(d, np.float32),
        out_w=z((o, d), np.float32), out_b=z(o, np.float32), skip=_normal(o),
        obs_sd=np.abs(_normal(o)), eps=z(2, np.float32),
        flags=np.array([False, False, True, False, False]), first=o, bound=3.0,
    )
    mu, eps_z, x_prev = _normal(B, d, M), _normal(B, d, M), _normal(B, f, M)
    eps_x = _normal(B, o, M)
    out = np.empty((B, o, M), np.float32)
    kernels.readout(
        w, mu, eps_z, x_prev, z((1, 1, 1, 1), np.float32),
        z((B, N_LAG_TERMS + 1, o), np.float32), eps_x, out,
    )
    latent = mu.astype(np.float64) + w.z_sd[:, None] * eps_z
    want = (
        np.einsum("od,bdm->bom", w.reads_w, latent) + w.reads_b[:, None]
        + w.skip[:, None] * x_prev[:, :o] + w.obs_sd[:, None] * eps_x
    )
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
