"""The compiled steps of the forecast rollout (model/runtime/kernels/compiled.py): `absorb`, eq.
(3.1), q(t), k(t), v(t) of every path from X_t written into the query and the ring's slot of lag L
(which leaves) with X_t's targets; `steps`, the loop of a forecast's steps after its first (absorb,
attend, read out), in one call (model/runtime/kernels/jit.py); `take`, the paths' columns from their
particles'.

Shapes: B batch, M paths, L window, Hd heads, R head width, D = Hd R, F inputs, O targets,
J lag terms.
"""

from __future__ import annotations

import numpy as np

from model.network.smc_transformer import N_LAG_TERMS
from model.runtime.kernels.attention import attend
from model.runtime.kernels.jit import inline, kernel
from model.runtime.kernels.readout import KernelWeights, readout


@kernel
def absorb(
    w: KernelWeights,
    x_in: np.ndarray,
    noise: np.ndarray,
    slot: int,
    query: np.ndarray,
    keys: np.ndarray,
    values: np.ndarray,
    targets: np.ndarray,
) -> None:
    """q(t), k(t), v(t) = W X_t + b + Sigma_qkv^1/2 eps (eq. (3.1)) of x_in (B, F, M) and noise
    (B, M, 3D) as drawn: q(t) into query (B, Hd, R, M), k(t) and v(t) into the ring's `slot`
    of keys (B, Hd, R, L, M) and values (B, Hd, L, R, M), with lag inputs X_t's targets into
    targets (B, L, O, M) (otherwise a placeholder, not written)."""
    n_batch, n_heads, width, _, n_paths = keys.shape
    d = n_heads * width
    for b in range(n_batch):
        for k in range(3 * d):
            part, h, r = k // d, (k % d) // width, k % width
            if part == 0:
                row = query[b, h, r]
            elif part == 1:
                row = keys[b, h, r, slot]
            else:
                row = values[b, h, slot, r]
            bias, sd, eps = w.qkv_b[k], w.qkv_sd[k], noise[b, :, k]
            for m in range(n_paths):
                row[m] = bias + sd * eps[m]
            for f in range(x_in.shape[1]):
                wkf, xf = w.qkv_w[k, f], x_in[b, f]
                for m in range(n_paths):
                    row[m] += wkf * xf[m]
        if w.flags[3]:
            for o in range(targets.shape[2]):
                targets[b, slot, o, :] = x_in[b, o]


@kernel
def steps(
    w: KernelWeights,
    ring: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    lag_tables: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    count: int,
    x_in: np.ndarray,
    noise: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    cov: np.ndarray,
    mean_coef: np.ndarray,
    out: np.ndarray,
) -> None:
    """S steps of every path, each absorbing the values drawn before it (eq. (3.1)), then
    attending (eq. (3)) and drawing X_t (section 3.3) into out (S, B, O, M). ring: query
    (B, Hd, R, M), keys (B, Hd, R, L, M), values (B, Hd, L, R, M), held (B, L), targets
    (B, L, O, M) (a placeholder without lag inputs), and a (L + 3, M) buffer; lag_tables:
    the rotations' lag keys (L, Hd, L, R + 1) and values (L, Hd, R, L), each series' lag
    indices (B, J + 1) and which lags its window can hold (B, J) (compiled.LagSlots);
    `count` the steps absorbed so far; x_in (B, F, M) the values drawn last (in: those the
    first step absorbs; out: the last step's); noise: eps_qkv of the first absorption
    (B, M, 3D), then of the others (S - 1, B, M, 3D), eps_z (S, B, M, D), eps_x (S, B, M, O);
    cov (S, B, F - O) the known inputs beside each step's X_t; mean_coef (S, B, J + 1, O).
    The ring, held and targets are updated in place."""
    query, keys, values, held, targets, scores = ring
    lag_keys, lag_values, lag_index, within = lag_tables
    first_noise, eps_qkv, eps_z, eps_x = noise
    n_batch, n_out, n_paths = out.shape[1], out.shape[2], out.shape[3]
    n_lag, n_terms = keys.shape[3], within.shape[1]
    mu = np.empty((n_batch, keys.shape[1] * keys.shape[2], n_paths), np.float32)
    slots = np.zeros((lag_index.shape[0], n_terms + 1), np.int64)
    keep = np.zeros((lag_index.shape[0], n_terms), np.bool_)
    for s in range(out.shape[0]):
        slot = n_lag - 1 - count % n_lag
        absorb(w, x_in, first_noise if s == 0 else eps_qkv[s - 1], slot, query, keys, values,
               targets)
        held[:, slot] = True
        count += 1
        turn = count % n_lag
        attend(keys, values, query, lag_keys[turn], lag_values[turn], held, scores, mu)
        if w.flags[3]:
            _lag_slots(lag_index, within, held, count, slots, keep)
        readout(w, mu, eps_z[s], x_in, (targets, slots, keep), mean_coef[s], eps_x[s], out[s])
        x_in[:, :n_out] = out[s]
        for b in range(n_batch):
            for c in range(cov.shape[2]):
                x_in[b, n_out + c, :] = cov[s, b, c]


@kernel
def take(x: np.ndarray, ancestors: np.ndarray, out: np.ndarray) -> None:
    """out[b, k, i] = x[b, k, ancestors[b, i]]: x (B, K, P), ancestors (B, N), out (B, K, N)."""
    for b in range(x.shape[0]):
        row = ancestors[b]
        for k in range(x.shape[1]):
            src, dst = x[b, k], out[b, k]
            for i in range(row.shape[0]):
                dst[i] = src[row[i]]


@inline
def _lag_slots(
    lag_index: np.ndarray,
    within: np.ndarray,
    held: np.ndarray,
    count: int,
    slots: np.ndarray,
    keep: np.ndarray,
) -> None:
    """The slots of the lags and of lag 1 after `count` steps (B, J + 1) into slots, which of
    the lags are held (B, J) into keep (compiled.LagSlots.at)."""
    n_lag = held.shape[1]
    for b in range(lag_index.shape[0]):
        for j in range(lag_index.shape[1]):
            slots[b, j] = (lag_index[b, j] - count) % n_lag
        for j in range(within.shape[1]):
            keep[b, j] = held[b, slots[b, j]] and within[b, j]


def warm(w: KernelWeights) -> None:
    """Compile the kernels (or load them from numba's cache) for the arrays the rollout
    passes, on arrays of one path."""
    d, f, o = w.z_sd.shape[0], w.qkv_w.shape[1], w.obs_sd.shape[0]
    keys, values = _f32(1, 1, d, 2, 1), _f32(1, 1, 2, d, 1)
    attend(
        keys, values, _f32(1, 1, d, 1), _f32(1, 2, d + 1), _f32(1, d, 2),
        np.ones((1, 2), np.bool_), _f32(5, 1), _f32(1, d, 1),
    )
    readout(
        w, _f32(1, d, 1), _f32(1, 1, d), _f32(1, f, 1), no_lags(), _f32(1, N_LAG_TERMS + 1, o),
        _f32(1, 1, o), _f32(1, o, 1),
    )
    absorb(w, _f32(1, f, 1), _f32(1, 1, 3 * d), 0, _f32(1, 1, d, 1), keys, values,
           _f32(1, 2, o, 1))
    take(_f32(1, 1, 1), np.zeros((1, 1), np.int64), _f32(1, 1, 1))


def no_lags() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lags `readout` takes for a model without lag inputs (never read)."""
    return (
        _f32(1, 1, 1, 1),
        np.zeros((1, N_LAG_TERMS + 1), np.int64),
        np.zeros((1, N_LAG_TERMS), np.bool_),
    )


def _f32(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.float32)
