"""The readout of the forecast rollout (model/runtime/kernels/compiled.py), section 3.3 from mu(t)
to X_t for every path at once, compiled (model/runtime/kernels/jit.py): z(t), r(t) = LN(z(t) + W^e
X_{t-1}), the head G_obs, the skip, the lag terms (read off the ring's targets at the slots of the
lags) with the series' correction of the mean, the scale of each path and the draw of X_t, in one
pass with the paths innermost.

Shapes: B batch, M paths, L window, D width, F inputs, O targets, J lag terms, C d_ff, K the
rows of `reads` (C or O, + J O, + O), T 1 (every path the same targets, before the paths take
their own windows) or M.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from model.runtime.kernels.attention import exp_of
from model.runtime.kernels.jit import inline, kernel


class KernelWeights(NamedTuple):
    """The network's weights as numpy arrays (model/runtime/kernels/weights.RolloutWeights),
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


@kernel
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
    work = np.empty((4, n_paths), np.float32)
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
            _mean_and_draw(w, b, o, read, x_prev, lags, mean_coef, eps_x, means[o], work)


@inline
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


@inline
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


@inline
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
    work: np.ndarray,
) -> None:
    """Target o of series b: the skip and the lag terms added to the head's mean (M,), then
    the draw X_t = mean + sd eps (the path's own sd with obs_scale), in place; work (4, M) a
    buffer."""
    n_paths, n_out = mean.shape[0], eps_x.shape[2]
    if w.flags[2]:  # skip
        a, xo = w.skip[o], x_prev[b, o]
        for m in range(n_paths):
            mean[m] += a * xo[m]
    if w.flags[3]:
        _lag_terms(w, b, o, read, lags, mean_coef, mean)
    sd, eo = w.obs_sd[o], eps_x[b, :, o]
    if w.flags[4]:  # obs_scale: sd e^{3 tanh(a / 3)}, the rows' division by 3 in reads_w
        scales = work[0]
        _scales(read[read.shape[0] - n_out + o], w.bound, work)
        c = sd * math.exp(w.bound)
        for m in range(n_paths):
            mean[m] += c * scales[m] * eo[m]
    else:
        for m in range(n_paths):
            mean[m] += sd * eo[m]


@inline
def _scales(s: np.ndarray, bound: float, work: np.ndarray) -> None:
    """exp(bound tanh(s) - bound) (M,) into work[0]; work (4, M) a buffer. Both exponentials
    of arguments <= 0 by attention.exp_of (vectorized): tanh(s) = sign(s) (1 - e) /
    (1 + e), e = exp(-2 |s|), whose absolute error (what the exponent feels) is float32's."""
    e, zero, total, bits = work[0], work[1], work[2], work[3]
    for m in range(s.shape[0]):
        e[m], zero[m] = np.float32(-2.0) * abs(s[m]), 0.0
    exp_of(e, zero, bits, total)
    for m in range(s.shape[0]):
        t = (np.float32(1.0) - e[m]) / (np.float32(1.0) + e[m])
        e[m] = bound * (t if s[m] >= 0 else -t) - bound
    exp_of(e, zero, bits, total)


@inline
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


@inline
def _linear(weight: np.ndarray, bias: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
    """out (K, M) = W x + b: weight (K, I), bias (K,), x (I, M). Eight columns of W a pass, so
    that each row of out is read and written an eighth as often."""
    rows, width = weight.shape
    n_paths = x.shape[1]
    for k in range(rows):
        ok, wk = out[k], weight[k]
        for m in range(n_paths):
            ok[m] = bias[k]
        i = 0
        while i + 8 <= width:
            x0, x1, x2, x3 = x[i], x[i + 1], x[i + 2], x[i + 3]
            x4, x5, x6, x7 = x[i + 4], x[i + 5], x[i + 6], x[i + 7]
            w0, w1, w2, w3 = wk[i], wk[i + 1], wk[i + 2], wk[i + 3]
            w4, w5, w6, w7 = wk[i + 4], wk[i + 5], wk[i + 6], wk[i + 7]
            for m in range(n_paths):
                ok[m] += ((w0 * x0[m] + w1 * x1[m]) + (w2 * x2[m] + w3 * x3[m])) + (
                    (w4 * x4[m] + w5 * x5[m]) + (w6 * x6[m] + w7 * x7[m]))
            i += 8
        while i < width:
            wi, xi = wk[i], x[i]
            for m in range(n_paths):
                ok[m] += wi * xi[m]
            i += 1


@inline
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
