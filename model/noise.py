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
