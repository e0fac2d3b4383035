"""Standard normals of a forecast's paths from counter-based streams, compiled
(model/runtime/kernels/jit.py): every number is a function of (key, counter) alone, so the noise of
a series' step does not depend on which steps are drawn with it, on the horizon or on the series it
is batched with, and drawing it costs a fraction of a sequential generator's.

The uniforms are Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as
easy as 1, 2, 3", SC 2011; the generator of cuRAND and of PyTorch on CUDA): four 32-bit words
from a 128-bit counter (c, step, part, 0) under a 64-bit key, where c numbers the blocks of
four. The normals are the inverse of the normal CDF at u = (w + 1/2) 2^-23 (w the word's top 23
bits, so that u, 1 - u and 2 u - 1 are exact in float32): sqrt(2) erfinv(2 u - 1), by M. Giles'
single-precision approximation ("Approximating the erfinv function", GPU Computing Gems,
2011), its logarithm w = -log(4 u (1 - u)) evaluated as Cephes' logf does (the exponent and
mantissa of the float's bits, a polynomial of degree 9), all in float32 loops that vectorize.
The normals lie within +-5.33 (u's resolution), where the probability beyond is 1e-7.

Layout: an array of n normals is filled chunk by chunk, CHUNK blocks (4 CHUNK numbers) a chunk;
number i of a chunk is word i // CHUNK of the chunk's block i % CHUNK.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from model.runtime.kernels.jit import inline, kernel

CHUNK = 256  # blocks of four numbers a chunk: the chunk's buffers stay in the first cache
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)  # Philox4x32's multipliers
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)  # and its key increments (Weyl)
_LOW, _SHIFT = np.uint64(0xFFFFFFFF), np.uint64(32)
_F = np.float32
_SQRT_HALF, _LN2, _SQRT2 = _F(math.sqrt(0.5)), _F(math.log(2.0)), _F(math.sqrt(2.0))
_ULP = _F(2.0**-23)
# log(1 + f) = f - f^2 / 2 + f^3 P(f), |f| <= sqrt(2) - 1 (Cephes' logf)
_P = [_F(c) for c in (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
                      1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1,
                      3.3333331174e-1)]
# erfinv(x) = x A(w - 2.5) for w < 5, x B(sqrt(w) - 3) beyond (Giles)
_A = [_F(c) for c in (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                      0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)]
_B = [_F(c) for c in (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                      0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)]
_P0, _P1, _P2, _P3, _P4, _P5, _P6, _P7, _P8 = _P
_A0, _A1, _A2, _A3, _A4, _A5, _A6, _A7, _A8 = _A
_B0, _B1, _B2, _B3, _B4, _B5, _B6, _B7, _B8 = _B


@inline
def philox(
    c0: np.uint64, c1: np.uint64, c2: np.uint64, c3: np.uint64, k0: np.uint64, k1: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64]:
    """Philox4x32-10 of the counter (c0, c1, c2, c3) under the key (k0, k1): 32-bit words held
    in 64-bit integers (their products are the 32 x 32 -> 64 bit multiplications)."""
    for _ in range(10):
        p0, p1 = _M0 * c0, _M1 * c2
        c0, c1, c2, c3 = (p1 >> _SHIFT) ^ c1 ^ k0, p1 & _LOW, (p0 >> _SHIFT) ^ c3 ^ k1, p0 & _LOW
        k0, k1 = (k0 + _W0) & _LOW, (k1 + _W1) & _LOW
    return c0, c1, c2, c3


@kernel
def philox_block(counter: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Philox4x32-10 of one counter (4,) under one key (2,), as uint32 (4,)."""
    w = philox(np.uint64(counter[0]), np.uint64(counter[1]), np.uint64(counter[2]),
               np.uint64(counter[3]), np.uint64(key[0]), np.uint64(key[1]))
    out = np.empty(4, np.uint32)
    for i in range(4):
        out[i] = w[i]
    return out


@kernel
def fill(key: np.uint64, step: int, part: int, out: np.ndarray) -> None:
    """Standard normals into out (n,) float32 from the stream (key, step, part)."""
    n = out.shape[0]
    words = np.empty(4 * CHUNK, np.uint32)
    bufs = np.empty((3, 4 * CHUNK), np.float32)
    k0, k1 = np.uint64(key) & _LOW, np.uint64(key) >> _SHIFT
    d1, d2 = np.uint64(step), np.uint64(part)
    start = 0
    while start * 4 < n:
        for j in range(CHUNK):
            w0, w1, w2, w3 = philox(np.uint64(start + j), d1, d2, np.uint64(0), k0, k1)
            words[j], words[CHUNK + j], words[2 * CHUNK + j], words[3 * CHUNK + j] = w0, w1, w2, w3
        _normals(words, bufs)
        base, z = 4 * start, bufs[0]
        for i in range(min(4 * CHUNK, n - base)):
            out[base + i] = z[i]
        start += CHUNK


@kernel
def normals_of(words: np.ndarray) -> np.ndarray:
    """The normals of 32-bit words (m,), m a multiple of 4 CHUNK (the transform alone)."""
    out = np.empty(words.shape[0], np.float32)
    bufs = np.empty((3, 4 * CHUNK), np.float32)
    for lo in range(0, words.shape[0], 4 * CHUNK):
        _normals(words[lo : lo + 4 * CHUNK], bufs)
        out[lo : lo + 4 * CHUNK] = bufs[0]
    return out


@inline
def _normals(words: np.ndarray, bufs: np.ndarray) -> None:
    """The normals of words (4 CHUNK,) into bufs[0]; bufs (3, 4 CHUNK) float32 buffers: the
    uniforms' 4 u (1 - u), then its mantissa and exponent, then w = -log(4 u (1 - u))."""
    z, t, x = bufs[0], bufs[1], bufs[2]
    t_bits, z_bits = t.view(np.int32), z.view(np.int32)
    for i in range(words.shape[0]):
        u = (_F(np.int32(words[i] >> np.uint32(9))) + _F(0.5)) * _ULP
        t[i] = _F(4.0) * u * (_F(1.0) - u)
        x[i] = _F(2.0) * u - _F(1.0)
    for i in range(words.shape[0]):  # 4 u (1 - u) = m 2^e, m in [1/2, 1)
        b = t_bits[i]
        z_bits[i] = (b & 0x7FFFFF) | 0x3F000000
        t[i] = _F((b >> 23) - 126)
    for i in range(words.shape[0]):
        m, e = z[i], t[i]
        small = m < _SQRT_HALF
        f = (m + m - _F(1.0)) if small else (m - _F(1.0))
        e = (e - _F(1.0)) if small else e
        f2 = f * f
        p = (((((((_P0 * f + _P1) * f + _P2) * f + _P3) * f + _P4) * f + _P5) * f + _P6) * f
             + _P7) * f + _P8
        w = -(f + (f * f2 * p - _F(0.5) * f2) + e * _LN2)
        t[i] = w
        a = w - _F(2.5)
        p = (((((((_A0 * a + _A1) * a + _A2) * a + _A3) * a + _A4) * a + _A5) * a + _A6) * a
             + _A7) * a + _A8
        z[i] = _SQRT2 * p * x[i]
    for i in range(words.shape[0]):  # the tails, |z| > 2.9: 1 in 270
        w = t[i]
        if w >= _F(5.0):
            b = math.sqrt(w) - _F(3.0)
            p = (((((((_B0 * b + _B1) * b + _B2) * b + _B3) * b + _B4) * b + _B5) * b + _B6)
                 * b + _B7) * b + _B8
            z[i] = _SQRT2 * p * x[i]


@kernel
def draw(keys: np.ndarray, steps: np.ndarray, total: int, z: np.ndarray, x: np.ndarray,
         qkv: np.ndarray) -> None:
    """The noise of `steps` (S,) of a forecast of `total` steps, each series b from the streams
    of its key (B,) uint64: z (S, B, N D) part 0, x (S, B, N O) part 1, qkv (S, B, 3 N D) part
    2, but for the last step's q, k, v (never read: left as they are)."""
    for j in range(steps.shape[0]):
        k = steps[j]
        for b in range(keys.shape[0]):
            fill(keys[b], k, 0, z[j, b])
            fill(keys[b], k, 1, x[j, b])
            if k + 1 < total:
                fill(keys[b], k, 2, qkv[j, b])


def warm() -> None:
    """Compile `draw` (or load it from numba's cache) for the arrays a forecast passes."""
    z = np.zeros((1, 1, 4), np.float32)
    draw(np.zeros(1, np.uint64), np.zeros(1, np.int64), 2, z, z.copy(), z.copy())


# the noise drawn at once on the host (floats, 64 MB): the steps of a forecast are drawn and
# moved in blocks of at most this much noise
NOISE_FLOATS = 1 << 24


def draw_noise(
    keys: np.ndarray, steps: range, total: int, n: int, d: int, o: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The noise of `steps` of a forecast of `total` steps, each series from the streams of its
    key (B,) (`draw`): eps_z (S, B, N, D), eps_x (S, B, N, O) and eps_qkv
    (S, B, N, 3, D), but for the q, k, v of the forecast's last step, which no step reads
    (zeros). Each step's numbers are its own, whatever the steps drawn with it."""
    s, b = len(steps), len(keys)
    z, eps = np.empty((s, b, n * d), np.float32), np.empty((s, b, n * o), np.float32)
    qkv = np.zeros((s, b, n * 3 * d), np.float32)
    draw(keys, np.asarray(steps, np.int64), total, z, eps, qkv)
    return (
        torch.from_numpy(z).view(s, b, n, d),
        torch.from_numpy(eps).view(s, b, n, o),
        torch.from_numpy(qkv).view(s, b, n, 3, d),
    )
