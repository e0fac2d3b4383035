"""The attention of the forecast rollout (model/runtime/kernels/compiled.py), eq. (3) for every path
at once, compiled (model/runtime/kernels/jit.py): the scores of each path's query against the keys
of its ring buffer (plus the relative-lag embeddings and biases of the ring's rotation), their
softmax over the window, and the mean mu(t) = pi . (v + E^v). Each key and value is read once, and
the scores of one head, a window of every path's (L, M), stay in cache between the three phases; the
loops run over the paths innermost, along contiguous rows, which the compiler vectorizes.

Shapes: B batch, M paths, L window, Hd heads, R head width, D = Hd R.
"""

from __future__ import annotations

import math

import numpy as np

from model.runtime.kernels.jit import inline, kernel


@kernel
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
    slots = np.empty(n_lag, np.int64)
    for b in range(n_batch):
        n_held = 0
        for j in range(n_lag):
            if held[b, j]:
                slots[n_held] = j
                n_held += 1
        for h in range(n_heads):
            pi = scores[:n_lag]
            _scores(keys[b, h], query[b, h], lag_keys[h], held[b], pi)
            _softmax(pi, held[b], scores[n_lag:])
            _weighted(values[b, h], pi, lag_values[h], slots[:n_held], scores[n_lag],
                      out[b, h * width : (h + 1) * width])


@inline
def _weighted(
    values: np.ndarray, pi: np.ndarray, lag_values: np.ndarray, slots: np.ndarray,
    scale: np.ndarray, out: np.ndarray,
) -> None:
    """One head's mu(t), scale sum_j pi_j (v_j + E^v_j) over the held slots, into out (R, M):
    values (L, R, M), pi (L, M) the softmax's numerators, lag_values (R, L), scale (M,) the
    inverse of their sum. Four slots a pass over the head's rows, so that each row is read
    and written a quarter as often and the four slots' weights stay in cache."""
    width, n_paths = out.shape
    out[:, :] = 0.0
    i = 0
    while i + 4 <= slots.shape[0]:
        j0, j1, j2, j3 = slots[i], slots[i + 1], slots[i + 2], slots[i + 3]
        w0, w1, w2, w3 = pi[j0], pi[j1], pi[j2], pi[j3]
        for r in range(width):
            row, e = out[r], lag_values[r]
            v0, v1, v2, v3 = values[j0, r], values[j1, r], values[j2, r], values[j3, r]
            e0, e1, e2, e3 = e[j0], e[j1], e[j2], e[j3]
            for m in range(n_paths):
                row[m] += (w0[m] * (v0[m] + e0) + w1[m] * (v1[m] + e1)) + (
                    w2[m] * (v2[m] + e2) + w3[m] * (v3[m] + e3))
        i += 4
    for j in slots[i:]:
        w = pi[j]
        for r in range(width):
            row, v, e = out[r], values[j, r], lag_values[r, j]
            for m in range(n_paths):
                row[m] += w[m] * (v[m] + e)
    for r in range(width):
        row = out[r]
        for m in range(n_paths):
            row[m] *= scale[m]


@inline
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
        r = 0
        while r + 4 <= width:  # four rows of the head a pass: s read and written a quarter as often
            k0, q0, e0 = keys[r, j], query[r], lag_keys[j, r]
            k1, q1, e1 = keys[r + 1, j], query[r + 1], lag_keys[j, r + 1]
            k2, q2, e2 = keys[r + 2, j], query[r + 2], lag_keys[j, r + 2]
            k3, q3, e3 = keys[r + 3, j], query[r + 3], lag_keys[j, r + 3]
            for m in range(n_paths):
                s[m] += ((k0[m] + e0) * q0[m] + (k1[m] + e1) * q1[m]) + (
                    (k2[m] + e2) * q2[m] + (k3[m] + e3) * q3[m])
            r += 4
        while r < width:
            k, q, e = keys[r, j], query[r], lag_keys[j, r]
            for m in range(n_paths):
                s[m] += (k[m] + e) * q[m]
            r += 1


@inline
def _softmax(scores: np.ndarray, held: np.ndarray, work: np.ndarray) -> None:
    """The softmax's numerators over the held slots (axis 0) of scores (L, M), in place (0 at
    the others), the inverse of their sum into work[0]; work (3, M) a buffer. (The division
    is left to the weighted values: R rows of them against L of scores.)"""
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
        exp_of(s, top, bits, total)
    for m in range(n_paths):
        top[m] = 1.0 / total[m]


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


@inline
def exp_of(x: np.ndarray, top: np.ndarray, bits: np.ndarray, total: np.ndarray) -> None:
    """x (M,) := exp(x - top) in place (x - top <= 0), added to total (M,); bits (M,) a
    float32 buffer. n = round(y / ln 2) as the truncation of y / ln 2 - 1/2 (y <= 0), which
    vectorizes where floor does not."""
    n_paths = x.shape[0]
    powers = bits.view(np.int32)
    for m in range(n_paths):
        y = max(x[m] - top[m], _EXP_MIN)
        n = np.int32(y * _LOG2E - np.float32(0.5))
        nf = np.float32(n)
        r = (y - nf * _LN2_HI) - nf * _LN2_LO
        x[m] = np.float32(1.0) + r * (np.float32(1.0) + r * (_C2 + r * (_C3 + r * (
            _C4 + r * (_C5 + r * _C6)))))
        powers[m] = (n + 127) << 23
    for m in range(n_paths):
        x[m] *= bits[m]
        total[m] += x[m]
