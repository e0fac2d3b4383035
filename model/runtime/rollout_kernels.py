"""Compiled kernels of the forecast rollout (model/runtime/rollout.py): the attention in one pass
over the window, the readout of each step's values and the absorption of the values drawn,
each in one pass over the paths.

`attend`, eq. (3) for every path at once: the scores of each path's query against the keys of its
ring buffer (plus the relative-lag embeddings and biases of the ring's rotation), their
softmax over the window, and the mean mu(t) = pi . (v + E^v). Written as torch operations
these are three passes over the keys and three over the values, each through a buffer the
size of the window; here each key and value is read once, and the scores of one head, a
window of every path's (L, M), stay in cache between the three phases. The loops run over the
paths innermost, along contiguous rows, which the compiler vectorizes.

`readout`, section 3.3 from mu(t) to X_t: z(t), r(t) = LN(z(t) + W^e X_{t-1}), the head G_obs,
the skip, the lag terms with the series' correction of the mean, the scale of each path and
the draw of X_t: some twenty small products and elementwise passes, each a torch call whose
overhead is more than its arithmetic at a thousand paths, here one pass with the paths
innermost. The lag terms are read off the ring's targets at the slots of the lags.

`absorb`, eq. (3.1): q(t), k(t), v(t) of every path from X_t, written into the query and the
ring's slot of lag L (which leaves) with X_t's targets.

Compiled by numba on first use (a few seconds; `warm` compiles them ahead of a forecast).

Shapes: B batch, M paths, L window, Hd heads, R head width, D = Hd R, F inputs, O targets,
J lag terms, C d_ff, K the rows of `reads` (C or O, + J O, + O), T 1 (every path the same
targets, before the paths take their own windows) or M.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numba
import numpy as np

from model.network.smc_transformer import N_LAG_TERMS

# float32 loops that vectorize (fastmath), release the GIL, never check bounds, divide as numpy
# does (no exception); compiled once into numba's cache (NUMBA_CACHE_DIR where the package's
# folder is read-only)
_kernel = numba.njit(
    fastmath=True, nogil=True, cache=True, boundscheck=False, error_model="numpy"
)
_inline = numba.njit(
    fastmath=True, nogil=True, cache=True, boundscheck=False, error_model="numpy",
    inline="always",
)


@_kernel
def attend(
    keys: np.ndarray,
    values: np.ndarray,
    query: np.ndarray,
    lag_keys: np.ndarray,
    lag_values: np.ndarray,
    held: np.ndarray,
    scores: np.ndarray,
    out: np.ndarray,
) -> None:
    """mu(t) of eq. (3) into out (B, D, M). keys (B, Hd, R, L, M), values (B, Hd, L, R, M),
    query (B, Hd, R, M) (divided by sqrt(R)), lag_keys (Hd, L, R + 1)
    the embeddings E^k (/ sqrt(R) by the query) then the lag bias, lag_values (Hd, R, L), both
    in the ring's rotation, held (B, L) the slots that hold a lag (the others get no weight),
    scores (L + 3, M) a buffer."""
    n_batch, n_heads, width, n_lag, n_paths = keys.shape
    for b in range(n_batch):
        for h in range(n_heads):
            pi = scores[:n_lag]
            _scores(keys[b, h], query[b, h], lag_keys[h], held[b], pi)
            _softmax(pi, held[b], scores[n_lag:])
            for r in range(width):
                row = out[b, h * width + r]
                for m in range(n_paths):
                    row[m] = 0.0
                for j in range(n_lag):
                    if not held[b, j]:
                        continue
                    v, w, e = values[b, h, j, r], pi[j], lag_values[h, r, j]
                    for m in range(n_paths):
                        row[m] += w[m] * (v[m] + e)


@_inline
def _scores(
    keys: np.ndarray, query: np.ndarray, lag_keys: np.ndarray, held: np.ndarray, out: np.ndarray
) -> None:
    """q(t-1) . (k(t-s) + E^k_s) + b_s over the slots (L, M) of one head: keys (R, L, M),
    query (R, M), lag_keys (L, R + 1); -inf at the slots that hold no lag."""
    width, n_lag, n_paths = keys.shape
    for j in range(n_lag):
        s = out[j]
        if not held[j]:
            for m in range(n_paths):
                s[m] = -np.inf
            continue
        bias = lag_keys[j, width]
        for m in range(n_paths):
            s[m] = bias
        for r in range(width):
            k, q, e = keys[r, j], query[r], lag_keys[j, r]
            for m in range(n_paths):
                s[m] += (k[m] + e) * q[m]


@_inline
def _softmax(scores: np.ndarray, held: np.ndarray, work: np.ndarray) -> None:
    """The softmax over the held slots (axis 0) of scores (L, M), in place (0 at the others);
    work (3, M) a buffer."""
    n_lag, n_paths = scores.shape
    top, total, bits = work[0], work[1], work[2]
    for m in range(n_paths):
        top[m], total[m] = -np.inf, 0.0
    for j in range(n_lag):
        s = scores[j]
        for m in range(n_paths):
            top[m] = max(top[m], s[m])
    for j in range(n_lag):
        s = scores[j]
        if not held[j]:
            s[:] = 0.0
            continue
        _exp_of(s, top, bits)
        for m in range(n_paths):
            total[m] += s[m]
    for m in range(n_paths):
        top[m] = 1.0 / total[m]
    for j in range(n_lag):
        s = scores[j]
        for m in range(n_paths):
            s[m] *= top[m]


# exp(x) for x in [EXP_MIN, 0] as 2^n p(r): n = round(x / ln 2), r = x - n ln 2 (ln 2 split
# in two, as Cody and Waite do, so that n ln 2 is exact to float32), p the Taylor polynomial
# of degree 6 (relative error under 4e-8 for |r| <= ln 2 / 2) and 2^n built from its bits.
# The element-by-element calls of libm's expf (what math.exp compiles to) do not vectorize and
# cost the attention most of its time.
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI, _LN2_LO = np.float32(0.693145751953125), np.float32(1.4286068203094173e-06)
_EXP_MIN = np.float32(-87.0)  # 2^n stays a normal float32
_C = [np.float32(1.0 / math.factorial(k)) for k in range(7)]
_C2, _C3, _C4, _C5, _C6 = _C[2], _C[3], _C[4], _C[5], _C[6]


@_inline
def _exp_of(x: np.ndarray, top: np.ndarray, bits: np.ndarray) -> None:
    """x (M,) := exp(x - top) in place (x - top <= 0); bits (M,) a float32 buffer."""
    n_paths = x.shape[0]
    powers = bits.view(np.int32)
    for m in range(n_paths):
        y = max(x[m] - top[m], _EXP_MIN)
        n = math.floor(y * _LOG2E + np.float32(0.5))
        r = (y - n * _LN2_HI) - n * _LN2_LO
        x[m] = np.float32(1.0) + r * (np.float32(1.0) + r * (_C2 + r * (_C3 + r * (
            _C4 + r * (_C5 + r * _C6)))))
        powers[m] = (np.int32(n) + 127) << 23
    for m in range(n_paths):
        x[m] *= bits[m]


class KernelWeights(NamedTuple):
    """The network's weights as numpy arrays (model/runtime/rollout_weights.RolloutWeights),
    zeros for the parts a model lacks (its flags say which it has)."""

    qkv_w: np.ndarray  # (3D, F), the query's rows / sqrt(R)
    qkv_b: np.ndarray  # (3D,)
    qkv_sd: np.ndarray  # (3D,) Sigma_qkv^1/2
    z_sd: np.ndarray  # (D,)
    embed_w: np.ndarray  # (D, F)
    embed_b: np.ndarray  # (D,)
    norm_w: np.ndarray  # (D,)
    norm_b: np.ndarray  # (D,)
    reads_w: np.ndarray  # (K, D)
    reads_b: np.ndarray  # (K,)
    second_w: np.ndarray  # (D, C)
    second_b: np.ndarray  # (D,)
    out_w: np.ndarray  # (O, D), the head's norm folded in
    out_b: np.ndarray  # (O,)
    skip: np.ndarray  # (O,)
    obs_sd: np.ndarray  # (O,)
    eps: np.ndarray  # (2,) the layer norms' epsilons: r(t)'s, the head's
    flags: np.ndarray  # (5,) residual, head, skip, lag_inputs, obs_scale
    first: int  # rows of `reads` before the lag coefficients (C, or O for a linear head)
    bound: float  # OBS_SCALE_BOUND


@_kernel
def readout(
    w: KernelWeights,
    mu: np.ndarray,
    eps_z: np.ndarray,
    x_prev: np.ndarray,
    lags: tuple[np.ndarray, np.ndarray, np.ndarray],
    mean_coef: np.ndarray,
    eps_x: np.ndarray,
    out: np.ndarray,
) -> None:
    """X_t (B, O, M) into out from mu (B, D, M), eps_z (B, M, D), x_prev (B, F, M), lags: the
    ring's targets (B, L, O, T), the slots of the lags and of lag 1 (B, J + 1) and which lags
    are held (B, J) (the lag terms X_{t-l} - X_{t-1}); mean_coef (B, J + 1, O) the series'
    correction of the mean, eps_x (B, M, O) (SMCTransformer.readout, GaussianObservation): the
    noise as drawn, read across its rows."""
    n_batch, d, n_paths = mu.shape
    n_out = out.shape[1]
    r = np.empty((d, n_paths), np.float32)
    read = np.empty((w.reads_w.shape[0], n_paths), np.float32)
    resid = np.empty((d, n_paths), np.float32)
    stats = np.empty((2, n_paths), np.float32)
    for b in range(n_batch):
        _latent(w, mu[b], eps_z[b], x_prev[b], r, stats)
        _linear(w.reads_w, w.reads_b, r, read)
        means = out[b]  # (O, M): the means, then X_t
        if w.flags[1]:
            _head(w, read, r, resid, stats, means)
        else:
            for o in range(n_out):
                means[o, :] = read[o]
        for o in range(n_out):
            _mean_and_draw(w, b, o, read, x_prev, lags, mean_coef, eps_x, means[o])


@_inline
def _latent(
    w: KernelWeights,
    mu: np.ndarray,
    eps_z: np.ndarray,
    x_prev: np.ndarray,
    r: np.ndarray,
    stats: np.ndarray,
) -> None:
    """r(t) (D, M) into r: z(t) = mu(t) + Sigma_z^1/2 eps (eq. (3)) from mu (D, M), eps_z (M, D),
    then, with ModelConfig.residual, LN(z(t) + W^e X_{t-1}) (x_prev (F, M))."""
    d, n_paths = r.shape
    for i in range(d):
        zi, mi, ei, sd = r[i], mu[i], eps_z[:, i], w.z_sd[i]
        for m in range(n_paths):
            zi[m] = mi[m] + sd * ei[m]
    if not w.flags[0]:
        return
    for i in range(d):
        ri, bias = r[i], w.embed_b[i]
        for m in range(n_paths):
            ri[m] += bias
        for f in range(x_prev.shape[0]):
            wf, xf = w.embed_w[i, f], x_prev[f]
            for m in range(n_paths):
                ri[m] += wf * xf[m]
    _standardize(r, stats, w.eps[0])
    for i in range(d):
        ri, g, c = r[i], w.norm_w[i], w.norm_b[i]
        for m in range(n_paths):
            ri[m] = ri[m] * g + c


@_inline
def _head(
    w: KernelWeights,
    read: np.ndarray,
    r: np.ndarray,
    resid: np.ndarray,
    stats: np.ndarray,
    means: np.ndarray,
) -> None:
    """The feed-forward head's means (O, M) into means: LN(r + W_2 relu(W_1 r + b_1) + b_2)
    through its output layer, W_1 r + b_1 the first rows of read (K, M) (made relu in place),
    resid (D, M) and stats (2, M) buffers."""
    d, n_paths = r.shape
    n_ff = w.second_w.shape[1]
    for c in range(n_ff):
        rc = read[c]
        for m in range(n_paths):
            rc[m] = max(rc[m], 0.0)
    _linear(w.second_w, w.second_b, read[:n_ff], resid)
    for i in range(d):
        si, ri = resid[i], r[i]
        for m in range(n_paths):
            si[m] += ri[m]
    _standardize(resid, stats, w.eps[1])
    _linear(w.out_w, w.out_b, resid, means)


@_inline
def _mean_and_draw(
    w: KernelWeights,
    b: int,
    o: int,
    read: np.ndarray,
    x_prev: np.ndarray,
    lags: tuple[np.ndarray, np.ndarray, np.ndarray],
    mean_coef: np.ndarray,
    eps_x: np.ndarray,
    mean: np.ndarray,
) -> None:
    """Target o of series b: the skip and the lag terms added to the head's mean (M,), then
    the draw X_t = mean + sd eps (the path's own sd with obs_scale), in place."""
    n_paths, n_out = mean.shape[0], eps_x.shape[2]
    if w.flags[2]:  # skip
        a, xo = w.skip[o], x_prev[b, o]
        for m in range(n_paths):
            mean[m] += a * xo[m]
    if w.flags[3]:
        _lag_terms(w, b, o, read, lags, mean_coef, mean)
    sd, eo = w.obs_sd[o], eps_x[b, :, o]
    if w.flags[4]:  # obs_scale: sd e^{3 tanh(a / 3)}, the rows' division by 3 in reads_w
        s = read[read.shape[0] - n_out + o]
        for m in range(n_paths):
            mean[m] += math.exp(math.tanh(s[m]) * w.bound) * sd * eo[m]
    else:
        for m in range(n_paths):
            mean[m] += sd * eo[m]


@_inline
def _lag_terms(
    w: KernelWeights,
    b: int,
    o: int,
    read: np.ndarray,
    lags: tuple[np.ndarray, np.ndarray, np.ndarray],
    mean_coef: np.ndarray,
    mean: np.ndarray,
) -> None:
    """sum_j (c_j(r) + a_j) (X_{t-l_j} - X_{t-1}) + a_J added to the mean (M,) of target o of
    series b, over the lags held (`readout`'s lags); c_j(r) rows of read (K, M)."""
    targets, slots, held = lags
    n_terms, n_out, n_paths = held.shape[1], mean_coef.shape[2], mean.shape[0]
    last = targets[b, slots[b, n_terms], o]  # (T,) X_{t-1}
    for j in range(n_terms):
        if not held[b, j]:
            continue
        c, extra = read[w.first + j * n_out + o], mean_coef[b, j, o]
        lag = targets[b, slots[b, j], o]  # (T,) X_{t-l_j}
        if lag.shape[0] == 1:  # every path the same targets
            diff = lag[0] - last[0]
            for m in range(n_paths):
                mean[m] += (c[m] + extra) * diff
        else:
            for m in range(n_paths):
                mean[m] += (c[m] + extra) * (lag[m] - last[m])
    base = mean_coef[b, n_terms, o]
    for m in range(n_paths):
        mean[m] += base


@_inline
def _linear(weight: np.ndarray, bias: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    """out (K, M) = W x + b: weight (K, I), bias (K,), x (I, M). Four columns of W a pass, so
    that each row of out is read and written a quarter as often."""
    rows, width = weight.shape
    n_paths = x.shape[1]
    for k in range(rows):
        ok, wk = out[k], weight[k]
        for m in range(n_paths):
            ok[m] = bias[k]
        i = 0
        while i + 4 <= width:
            x0, x1, x2, x3 = x[i], x[i + 1], x[i + 2], x[i + 3]
            w0, w1, w2, w3 = wk[i], wk[i + 1], wk[i + 2], wk[i + 3]
            for m in range(n_paths):
                ok[m] += w0 * x0[m] + w1 * x1[m] + w2 * x2[m] + w3 * x3[m]
            i += 4
        while i < width:
            wi, xi = wk[i], x[i]
            for m in range(n_paths):
                ok[m] += wi * xi[m]
            i += 1


@_inline
def _standardize(x: np.ndarray, stats: np.ndarray, eps: float) -> None:
    """(x - mean) / sqrt(var + eps) over axis 0 of x (D, M), in place; stats (2, M) a
    buffer."""
    d, n_paths = x.shape
    mean, scale = stats[0], stats[1]
    for m in range(n_paths):
        mean[m], scale[m] = 0.0, 0.0
    for i in range(d):
        xi = x[i]
        for m in range(n_paths):
            mean[m] += xi[m]
    for m in range(n_paths):
        mean[m] /= d
    for i in range(d):
        xi = x[i]
        for m in range(n_paths):
            xi[m] -= mean[m]
            scale[m] += xi[m] * xi[m]
    for m in range(n_paths):
        scale[m] = 1.0 / math.sqrt(scale[m] / d + eps)
    for i in range(d):
        xi = x[i]
        for m in range(n_paths):
            xi[m] *= scale[m]


@_kernel
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


@_kernel
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
    indices (B, J + 1) and which lags its window can hold (B, J) (rollout.LagSlots);
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


@_inline
def _lag_slots(
    lag_index: np.ndarray,
    within: np.ndarray,
    held: np.ndarray,
    count: int,
    slots: np.ndarray,
    keep: np.ndarray,
) -> None:
    """The slots of the lags and of lag 1 after `count` steps (B, J + 1) into slots, which of
    the lags are held (B, J) into keep (rollout.LagSlots.at)."""
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


def no_lags() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lags `readout` takes for a model without lag inputs (never read)."""
    return (
        _f32(1, 1, 1, 1),
        np.zeros((1, N_LAG_TERMS + 1), np.int64),
        np.zeros((1, N_LAG_TERMS), np.bool_),
    )


def _f32(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.float32)
