"""The compiled kernels of the rollout (model/runtime/kernels/attention.py, readout.py,
steps.py) on cases with a known answer; tests/model/runtime/test_rollout.py checks
them inside the rollout against the forecast graph for every option of the model."""

from __future__ import annotations

import numpy as np

from model.network.smc_transformer import N_LAG_TERMS
from model.runtime.kernels import attention, readout, steps

RNG = np.random.default_rng(0)
B, HD, R, L, M = 2, 2, 3, 5, 7


def _normal(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape).astype(np.float32)


def _attend(query: np.ndarray, held: np.ndarray, lag_keys: np.ndarray) -> tuple[np.ndarray, ...]:
    keys, values, lag_values = _normal(B, HD, R, L, M), _normal(B, HD, L, R, M), _normal(HD, R, L)
    out = np.empty((B, HD * R, M), np.float32)
    attention.attend(
        keys, values, query, lag_keys, lag_values, held, np.empty((L + 3, M), np.float32), out
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


def _weights(d: int, f: int, o: int, flags: list[bool], first: int) -> readout.KernelWeights:
    """Random weights of a model without residual and head (zeros there)."""
    z = np.zeros
    n_reads = first + (N_LAG_TERMS * o if flags[3] else 0)
    return readout.KernelWeights(
        qkv_w=_normal(3 * d, f), qkv_b=_normal(3 * d), qkv_sd=np.abs(_normal(3 * d)),
        z_sd=np.abs(_normal(d)), embed_w=z((d, f), np.float32), embed_b=z(d, np.float32),
        norm_w=z(d, np.float32), norm_b=z(d, np.float32), reads_w=_normal(n_reads, d),
        reads_b=_normal(n_reads), second_w=z((d, 0), np.float32), second_b=z(d, np.float32),
        out_w=z((o, d), np.float32), out_b=z(o, np.float32), skip=_normal(o),
        obs_sd=np.abs(_normal(o)), eps=z(2, np.float32), flags=np.array(flags), first=first,
        bound=3.0,
    )


def _readout(
    w: readout.KernelWeights,
    lags: tuple[np.ndarray, np.ndarray, np.ndarray],
    mean_coef: np.ndarray,
    f: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X_t of the kernel, the affine map, skip and noise it should equal without lag terms
    (float64), and x_prev."""
    d, o = w.z_sd.shape[0], w.obs_sd.shape[0]
    mu, eps_z, x_prev = _normal(B, d, M), _normal(B, M, d), _normal(B, f, M)
    eps_x = _normal(B, M, o)  # as drawn: paths, then their noise
    out = np.empty((B, o, M), np.float32)
    readout.readout(w, mu, eps_z, x_prev, lags, mean_coef, eps_x, out)
    eps_z, eps_x = eps_z.transpose(0, 2, 1), eps_x.transpose(0, 2, 1)
    latent = mu.astype(np.float64) + w.z_sd[:, None] * eps_z
    want = (
        np.einsum("od,bdm->bom", w.reads_w[:o], latent) + w.reads_b[:o, None]
        + w.skip[:, None] * x_prev[:, :o] + w.obs_sd[:, None] * eps_x
    )
    return out, want, latent


def test_a_linear_readout_is_its_affine_map_plus_the_skip_and_noise() -> None:
    """Without residual, head, lags and scale: X_t = W (mu + sd_z eps_z) + b + a X_{t-1} +
    sd eps_x, computed here in float64."""
    o = 2
    w = _weights(4, 2, o, [False, False, True, False, False], first=o)
    out, want, _ = _readout(w, steps.no_lags(), np.zeros((B, N_LAG_TERMS + 1, o), np.float32), 2)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_the_lag_terms_are_read_off_the_ring_at_their_slots() -> None:
    """With lag inputs: + sum_j (c_j(r) + a_j) (X at slot s_j - X at the slot of lag 1) + a_J
    over the lags held, for targets shared by every path (T = 1) and each path's own."""
    d, o = 4, 1
    w = _weights(d, 1, o, [False, False, True, True, False], first=o)
    slots = np.array([[1, 4, 2, 3, 0], [3, 2, 0, 1, 4]], np.int64)
    held = np.array([[True, True, False, True], [True, False, True, True]])
    mean_coef = _normal(B, N_LAG_TERMS + 1, o)
    for t in (1, M):
        targets = _normal(B, L, o, t)
        out, want, latent = _readout(w, (targets, slots, held), mean_coef, 1)
        coef = np.einsum("kd,bdm->bkm", w.reads_w[o:], latent) + w.reads_b[o:, None]
        for b in range(B):
            last = targets[b, slots[b, N_LAG_TERMS], 0]
            for j in np.flatnonzero(held[b]):
                lag = targets[b, slots[b, j], 0] - last
                want[b, 0] += (coef[b, j] + mean_coef[b, j, 0]) * lag
            want[b, 0] += mean_coef[b, N_LAG_TERMS, 0]
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)


def test_the_values_drawn_enter_the_query_and_the_ring_slot() -> None:
    """q, k, v = W X + b + sd eps: the query rows, the keys and values at the slot, and the
    targets there; every other slot untouched."""
    d, f, o, slot = HD * R, 2, 1, 3
    w = _weights(d, f, o, [False, False, False, True, False], first=o)
    x_in, noise = _normal(B, f, M), _normal(B, M, 3 * d)
    query, keys, values = _normal(B, HD, R, M), _normal(B, HD, R, L, M), _normal(B, HD, L, R, M)
    targets = _normal(B, L, o, M)
    before = keys.copy(), values.copy(), targets.copy()
    steps.absorb(w, x_in, noise, slot, query, keys, values, targets)
    qkv = (np.einsum("kf,bfm->bkm", w.qkv_w, x_in.astype(np.float64)) + w.qkv_b[:, None]
           + w.qkv_sd[:, None] * noise.transpose(0, 2, 1)).reshape(B, 3, HD, R, M)
    np.testing.assert_allclose(query, qkv[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(keys[:, :, :, slot], qkv[:, 1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values[:, :, slot], qkv[:, 2], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(targets[:, slot], x_in[:, :o])
    others = np.arange(L) != slot
    np.testing.assert_array_equal(keys[:, :, :, others], before[0][:, :, :, others])
    np.testing.assert_array_equal(values[:, :, others], before[1][:, :, others])
    np.testing.assert_array_equal(targets[:, others], before[2][:, others])


def test_the_softmax_exponentials_are_exp_to_float32_precision() -> None:
    """exp(x - top) as 2^n p(r) over the range the softmax meets, [-87, 0], and at its ends
    and the points where n steps: within 4e-7 of exp relative (two float32 roundings); below
    the range it stays at exp(-87) (a weight of 1e-38, not 0, for scores 87 below the top).
    Each is added to the running totals it is given."""
    x = np.concatenate([-np.linspace(0.0, 87.0, 100_001), -np.log(2.0) * (np.arange(125) + 0.5)])
    got = x.astype(np.float32)
    total = np.full_like(got, 2.0)
    attention.exp_of(got, np.zeros_like(got), np.empty_like(got), total)
    want = np.exp(x.astype(np.float32).astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=4e-7, atol=0)
    np.testing.assert_array_equal(total, np.float32(2.0) + got)
    low = np.array([-100.0, -1e30], np.float32)
    attention.exp_of(low, np.zeros_like(low), np.empty_like(low), np.zeros_like(low))
    np.testing.assert_allclose(low, np.exp(-87.0), rtol=4e-7)
