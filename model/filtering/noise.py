"""The keyed noise table: where the noise of every filter update comes from.

A series state does not store the noise of its particles; it stores a 64-bit seed, and the
noise of step s is a fixed block of a table of standard normals, chosen by (seed, s). The
table ships inside the artifact (noise.f32, with a checksum), so the key/value windows are
rebuilt bit for bit on any machine, and drawing the noise of a step costs an index, not a
random number generator (the technique of the "shared noise table" of Salimans et al. 2017,
Evolution Strategies).

Layout: the table is viewed as rows of R = d_model / n_heads floats. One block per step holds,
in rows, eps_k and eps_v interleaved (P, Hd, 2) (one gather fetches both), eps_q (P, Hd),
eps_z (P, Hd) and (P, Hd) rows whose first normal u0 gives the resampling uniform Phi(u0) of
each particle; the block length is even. The table holds K = floor(rows / block) blocks, and
step s of a series uses block (seed + s) mod K. So the L + 1 steps one filter update touches
never share a block (check_table), and a series meets the same noise again only after K steps
(K >= MIN_BLOCKS at the particle count of the export; 524 at P = 100, d_model 32). Two series
may use the same blocks at the same time; each series' own noise is what must be independent.

The noise of a step is read by name: `eps_q`, `eps_z`, `eps_kv` (along lineages), `uniforms`,
or all of it at once as a `StepNoise` (`step_noise`), the argument of
model/filtering/filter.filter_step.
Shapes: B batch, P particles, N some of them, L window, Hd heads, R head width, D = Hd R.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

DEFAULT_SIZE = 1 << 23  # 32 MiB of float32: K = 524 blocks at P = 100, d_model = 32
MIN_BLOCKS = 64
TABLE_SEED = 20260111
GENERATOR = "pcg64-box-muller"  # make_table, as the manifests name it


@dataclass(frozen=True)
class StepNoise:
    """All randomness of one filter step, drawn by the caller
    (model/filtering/filter.filter_step)."""

    u: Tensor  # (B, P) uniforms for resampling
    eps_z: Tensor  # (B, P, D) eq. (3)
    eps_qkv: Tensor  # (B, P, 3, D) eq. (3.1), q, k, v on axis 2

    @staticmethod
    def draw(b: int, p: int, d: int, gen: torch.Generator | None = None) -> StepNoise:
        return StepNoise(
            u=torch.rand(b, p, generator=gen),
            eps_z=torch.randn(b, p, d, generator=gen),
            eps_qkv=torch.randn(b, p, 3, d, generator=gen),
        )


def make_table(size: int = DEFAULT_SIZE, seed: int = TABLE_SEED) -> np.ndarray:
    """`size` standard normals (float32) by Box-Muller from PCG64's raw 64-bit stream."""
    raw = np.random.PCG64(seed).random_raw((size + 1) // 2)  # (size/2,) uint64
    u1 = ((raw >> np.uint64(32)).astype(np.float64) + 0.5) / 2.0**32  # (0, 1)
    u2 = (raw & np.uint64(0xFFFFFFFF)).astype(np.float64) / 2.0**32  # [0, 1)
    radius = np.sqrt(-2.0 * np.log(u1))
    out = np.empty(2 * raw.shape[0], dtype=np.float32)
    out[0::2] = radius * np.cos(2.0 * math.pi * u2)
    out[1::2] = radius * np.sin(2.0 * math.pi * u2)
    return out[:size]


def table_size_for(n_particles: int, d_model: int, n_heads: int) -> int:
    """Smallest power of two (>= DEFAULT_SIZE) holding MIN_BLOCKS blocks of P particles."""
    width = d_model // n_heads
    need = MIN_BLOCKS * NoiseLayout(n_particles, d_model, n_heads).block_rows * width
    return max(DEFAULT_SIZE, 1 << max(0, need - 1).bit_length())


@dataclass(frozen=True)
class NoiseLayout:
    """Where the noise of one step lies in the table viewed as rows of R floats."""

    n_particles: int
    d_model: int
    n_heads: int

    @property
    def width(self) -> int:  # R
        return self.d_model // self.n_heads

    @property
    def block_rows(self) -> int:
        n = 5 * self.n_particles * self.n_heads
        return n + n % 2

    def n_blocks(self, table_rows: int) -> int:
        return table_rows // self.block_rows

    def base_rows(self, seeds: np.ndarray, steps: np.ndarray, table_rows: int) -> np.ndarray:
        """First table row of the block of each (seed, step); seeds (B,) uint64, steps (B, K)."""
        k = self.n_blocks(table_rows)
        start = (np.asarray(seeds, dtype=np.uint64) % np.uint64(k)).astype(np.int64)  # (B,)
        return ((start[:, None] + steps) % k) * self.block_rows  # (B, K) int64


def check_table(table_rows: int, layout: NoiseLayout, window: int) -> None:
    """A filter update reads window + 1 blocks: they must be distinct."""
    k = layout.n_blocks(table_rows)
    if k < window + 2:
        raise ValueError(
            f"the noise table holds {k} blocks of {layout.n_particles} particles, a filter "
            f"update needs {window + 2}; use fewer particles or export a larger table"
        )


def noise_rows(table: np.ndarray | Tensor, layout: NoiseLayout) -> Tensor:
    """The table as (rows, R) float32, the view every step gathers from."""
    flat = torch.as_tensor(table)
    r = layout.width
    return flat[: flat.numel() // r * r].view(-1, r)


# ---------------------------------------------------------------- the noise of a step, by name
# Parts of a step's block, in units of P Hd rows: eps_k and eps_v interleaved (two parts), then
# eps_q, eps_z and the rows of the resampling uniforms. base (B,) is the block's first row.
_Q, _Z, _U = 2, 3, 4


def _rows(table: Tensor, idx: Tensor) -> Tensor:
    """Table rows: table (rows, R), idx (...) int64 -> (..., R)."""
    return table.index_select(0, idx.reshape(-1)).view(idx.shape + (table.shape[-1],))


def _part(
    table: Tensor, base: Tensor, part: int, particles: Tensor, n_particles: int, n_heads: int
) -> Tensor:
    """Rows of one part of a step's block for some particles: base (B,), particles (B, N)
    (or (N,), the same for every row) -> (B, N, Hd R)."""
    heads = torch.arange(n_heads, device=particles.device)
    rows = (base + part * n_particles * n_heads).view(-1, 1, 1)
    return _rows(table, rows + particles.unsqueeze(-1) * n_heads + heads).flatten(-2)


def eps_q(table: Tensor, base: Tensor, particles: Tensor, n_particles: int, n_heads: int) -> Tensor:
    """eps_q of eq. (3.1) of some particles of the step whose block starts at base (B,):
    particles (B, N) (or (N,)) indices among n_particles -> (B, N, D)."""
    return _part(table, base, _Q, particles, n_particles, n_heads)


def eps_z(table: Tensor, base: Tensor, particles: Tensor, n_particles: int, n_heads: int) -> Tensor:
    """eps_z of eq. (3) of some particles of the step whose block starts at base (B,):
    particles (B, N) (or (N,)) -> (B, N, D)."""
    return _part(table, base, _Z, particles, n_particles, n_heads)


def uniforms(table: Tensor, base: Tensor, n_particles: int, n_heads: int) -> Tensor:
    """Resampling uniforms u (B, P) of the step whose block starts at base (B,): Phi of the
    first normal of each particle's row of the uniforms part, kept in [0, 1)."""
    r, step = table.shape[-1], n_heads
    own = torch.arange(0, n_particles * step, step, device=base.device)  # (P,) first rows
    rows = (base + _U * n_particles * n_heads).unsqueeze(-1) + own  # (B, P)
    u0 = table.reshape(-1).index_select(0, (rows * r).reshape(-1)).view(rows.shape)  # normals
    return (0.5 * (1.0 + torch.erf(u0 * (1.0 / math.sqrt(2.0))))).clamp(0.0, 1.0 - 2.0**-24)


def eps_kv(table: Tensor, base: Tensor, lineage: Tensor, n_heads: int) -> tuple[Tensor, Tensor]:
    """eps_k and eps_v of eq. (3.1) along lineages, gathered apart: base (B, L) the blocks of
    the steps of lags 1..L, lineage (B, N, L) -> two (B, N, Hd, L, R) (lag s at index s-1).
    The attention dots the first with the queries and averages the second, so neither
    multiplies the other's half by zero."""
    b, n, n_lag = lineage.shape
    two_heads = torch.arange(0, 2 * n_heads, 2, device=lineage.device).view(n_heads, 1)
    # row of eps_k of (particle, head): base + 2 (particle Hd + head), eps_v the next one
    # (blocks start on even rows: no division, which exports as 8 ops); indices laid out
    # (B, N, Hd, L): the gather writes the attention's layout, no transpose
    k_rows = base.view(b, 1, 1, n_lag) + (lineage.unsqueeze(2) * (2 * n_heads) + two_heads)
    return _rows(table, k_rows), _rows(table, k_rows + 1)


def _kv_pairs(table: Tensor, base: Tensor, particles: Tensor, n_heads: int) -> Tensor:
    """[eps_k | eps_v] rows, interleaved in the block so that one gather fetches both: base
    (even first rows) broadcastable to particles (B, ...) -> (B, ..., Hd, 2R)."""
    pairs = table.view(-1, 2 * table.shape[-1])  # (rows / 2, 2R)
    heads = torch.arange(n_heads, device=particles.device)
    return _rows(pairs, (base // 2 + particles * n_heads).unsqueeze(-1) + heads)


def eps_kv_pairs(table: Tensor, base: Tensor, lineage: Tensor, n_heads: int) -> Tensor:
    """[eps_k | eps_v] along lineages in one gather: base (B, L) the blocks of lags 1..L,
    lineage (B, N, L) -> (B, N, Hd, L, 2R) (lag s at index s-1)."""
    b, n, n_lag = lineage.shape
    pairs = table.view(-1, 2 * table.shape[-1])  # (rows / 2, 2R)
    heads = torch.arange(n_heads, device=lineage.device).view(n_heads, 1)
    idx = (base.view(b, 1, 1, n_lag) // 2 + lineage.unsqueeze(2) * n_heads) + heads
    return _rows(pairs, idx)  # (B, N, Hd, L, 2R)


def step_noise(table: Tensor, base: Tensor, n_particles: int, n_heads: int) -> StepNoise:
    """All the noise of the step whose block starts at base (B,), as the filter of
    model/filtering/filter.py takes it: u (B, P), eps_z (B, P, D), eps_qkv (B, P, 3, D)."""
    b, p, r = base.shape[0], n_particles, table.shape[-1]
    own = torch.arange(p, device=base.device).expand(b, p)
    kv = _kv_pairs(table, base.unsqueeze(-1), own, n_heads)  # (B, P, Hd, 2R)
    k, v = kv[..., :r].reshape(b, p, -1), kv[..., r:].reshape(b, p, -1)
    q = eps_q(table, base, own, p, n_heads)
    return StepNoise(
        u=uniforms(table, base, p, n_heads),
        eps_z=eps_z(table, base, own, p, n_heads),
        eps_qkv=torch.stack([q, k, v], dim=2),
    )
