"""The forecast noise of model/runtime/kernels/normals.py drawn by torch, on whatever device the
paths are: the same streams (Philox4x32-10 under each series' key, counter (block, step, part, 0)),
the same layout and the same float32 transform (Giles' erfinv, Cephes' logarithm), so that a GPU's
paths read the numbers a CPU's read without copying them from the host.

The 32-bit words are computed in int64 tensors: a product of two 32-bit words wraps past 2^63
as the unsigned one would, bit for bit, and a right shift masked to 32 bits reads its high
word. The words equal normals.py's exactly; the normals equal them up to the float rounding
of a fused multiply-add (the compiled kernels may fuse, torch's elementwise kernels do not),
a few units in the last place.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from model.runtime.kernels import normals as host

_LOW = 0xFFFFFFFF
_M0, _M1 = int(host._M0), int(host._M1)
_W0, _W1 = int(host._W0), int(host._W1)
_F32 = torch.float32
_ULP, _SQRT_HALF = float(host._ULP), float(host._SQRT_HALF)
_LN2, _SQRT2 = float(host._LN2), float(host._SQRT2)


def philox(c0: Tensor, c1: Tensor, c2: Tensor, c3: Tensor, k0: Tensor, k1: Tensor
           ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Philox4x32-10 of counters under keys, int64 tensors holding 32-bit words (broadcast)."""
    for _ in range(10):
        p0, p1 = c0 * _M0, c2 * _M1  # wrap past 2^63 as uint64 would
        c0, c1, c2, c3 = (
            ((p1 >> 32) & _LOW) ^ c1 ^ k0, p1 & _LOW, ((p0 >> 32) & _LOW) ^ c3 ^ k1, p0 & _LOW
        )
        k0, k1 = (k0 + _W0) & _LOW, (k1 + _W1) & _LOW
    return c0, c1, c2, c3


def transform(words: Tensor) -> Tensor:
    """Standard normals (float32) of 32-bit words (int64), as normals._normals computes them."""
    u = ((words >> 9).to(_F32) + 0.5) * _ULP
    t = 4.0 * u * (1.0 - u)
    x = 2.0 * u - 1.0
    bits = t.view(torch.int32)
    m = ((bits & 0x7FFFFF) | 0x3F000000).view(_F32)
    e = ((bits >> 23) - 126).to(_F32)
    small = m < _SQRT_HALF
    f = torch.where(small, m + m - 1.0, m - 1.0)
    e = torch.where(small, e - 1.0, e)
    f2 = f * f
    p = _horner(host._P, f)
    w = -(f + (f * f2 * p - 0.5 * f2) + e * _LN2)
    z = _SQRT2 * _horner(host._A, w - 2.5) * x
    tail = _SQRT2 * _horner(host._B, torch.sqrt(w) - 3.0) * x
    return torch.where(w >= 5.0, tail, z)


def _horner(coefs: list, v: Tensor) -> Tensor:
    """((c0 v + c1) v + ...) v + c8, in float32 as the host kernel orders it."""
    p = float(coefs[0]) * v + float(coefs[1])
    for c in coefs[2:]:
        p = p * v + float(c)
    return p


def fill(keys: Tensor, steps: Tensor, part: int, n: int) -> Tensor:
    """The n normals of the stream (key, step, part) of every key (B,) and step (S,): (S, B, n),
    laid out as normals.fill lays them (chunks of 4 CHUNK numbers, number i of a chunk word
    i // CHUNK of the chunk's block i % CHUNK)."""
    chunk = host.CHUNK
    chunks = math.ceil(n / (4 * chunk))
    device = keys.device
    block = torch.arange(chunks * chunk, device=device, dtype=torch.int64).view(1, 1, -1)
    k0 = (keys & _LOW).view(1, -1, 1)
    k1 = (keys >> 32).view(1, -1, 1)
    step = steps.view(-1, 1, 1)
    part_t = torch.full((), part, dtype=torch.int64, device=device)
    zero = torch.zeros((), dtype=torch.int64, device=device)
    words = torch.stack(philox(block, step, part_t, zero, k0, k1), dim=-2)  # (S, B, 4, blocks)
    s, b = words.shape[0], words.shape[1]
    words = words.view(s, b, 4, chunks, chunk).transpose(2, 3).reshape(s, b, -1)
    return transform(words[..., :n])


def draw(keys: Tensor, steps: Tensor, total: int | Tensor, n: int, d: int, o: int
         ) -> tuple[Tensor, Tensor, Tensor]:
    """model/runtime/kernels/normals.draw_noise on the keys' device: keys (B,) int64 (the uint64
    keys below 2^63), steps (S,) int64, total an int or a tensor of one -> eps_z (S, B, N, D),
    eps_x (S, B, N, O), eps_qkv (S, B, N, 3, D), the q, k, v of the forecast's last step
    zeros."""
    s, b = steps.shape[0], keys.shape[0]
    z = fill(keys, steps, 0, n * d).view(s, b, n, d)
    x = fill(keys, steps, 1, n * o).view(s, b, n, o)
    qkv = fill(keys, steps, 2, n * 3 * d)
    qkv = torch.where((steps + 1 < total).view(-1, 1, 1), qkv, torch.zeros((), device=qkv.device))
    return z, x, qkv.view(s, b, n, 3, d)
