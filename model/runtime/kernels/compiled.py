"""The forecast rollout of the torch backend on the CPU: N sample paths moved step by step as
model/filtering/filter.forecast_step moves them (section 3.3), by kernels laid out for serving.

The paths hold the numbers of a FilterState of N paths, laid out otherwise:
  - columns are paths: every per-path array has the paths on its last axis, so that each
    step's three compiled loops (the attention, model/runtime/kernels/attention.py; the
    readout, readout.py; the absorption of the values drawn, kernels.py) run
    over all paths along contiguous rows, and the steps after the first run in one compiled
    call (kernels.steps);
  - the key/value window is a ring buffer: a step writes k(t), v(t) into one slot, the one
    lag L leaves, instead of shifting the window. After c steps slot j holds lag
    (j + c) mod L + 1; the relative-lag embeddings and the mask of the lags not held yet are
    rotated instead (tables of L x L numbers), and so are the lagged targets' slots;
  - the query is kept divided by sqrt(R).
The first step attends over the P particles the paths descend from, each path then takes its
particle's mean (model/filtering/paths.LazyPaths.first_step); the paths take their particles'
windows as the first sampled inputs enter them. The arithmetic is the float32 arithmetic of
forecast_step in another order, so the samples are its samples to float32 rounding
(tests/model/runtime/test_rollout.py).

Shapes: B batch, P particles, N paths (M: P at the first step, then N), L window, Hd heads,
R head width, D = Hd R, F inputs, O targets, J lag terms, T 1 or N.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from model.filtering.filter import FilterState
from model.network.smc_transformer import N_LAG_TERMS
from model.runtime.kernels.attention import attend
from model.runtime.kernels.readout import readout
from model.runtime.kernels.steps import no_lags, steps, take
from model.runtime.kernels.weights import RolloutWeights


class Rollout:
    """Forecast paths of a batch of series; `run` moves them in place and returns their X_t."""

    def __init__(
        self,
        w: RolloutWeights,
        particles: FilterState,
        ancestors: Tensor,
        windows: tuple[Tensor, Tensor],
    ) -> None:
        """Paths drawn from the particles (B, P, ...) of model/filtering/compact.materialize,
        their windows as compact.rollout_windows lays them out (keys (B, Hd, R, L, P), values
        (B, Hd, L, R, P)): path i descends from particle ancestors[:, i] (B, N)."""
        self.keys, self.values = windows  # (B, Hd, R, L, M), (B, Hd, L, R, M)
        b, hd, r, n_lag, p = self.keys.shape
        n = ancestors.shape[1]
        self.w = w
        query = (particles.query / math.sqrt(r)).view(b, p, hd, r)
        self.query = query.permute(0, 2, 3, 1).contiguous()  # (B, Hd, R, M)
        self.pick: Picks | None = Picks(ancestors)  # each path's particle, until they part
        x_last = particles.x_prev[:, :1].transpose(1, 2).numpy()  # (B, F, 1)
        self.x_prev = np.repeat(x_last, n, axis=2)  # (B, F, N) X_{t-1}
        self.count = 0  # steps taken: slot j holds lag (j + count) mod L + 1
        # the q, k, v noise (B, N, 3D) of the last X_t (x_prev), absorbed when the next step
        # starts: the last step's is never needed (a horizon-1 forecast takes no windows at all)
        self.pending: np.ndarray | None = None
        self.held = particles.valid.cpu().numpy().copy()  # (B, L) which slots hold a lag
        self.mean_coef = particles.mean_coef  # (B, J + 1, O) or None
        self.targets: np.ndarray | None = None  # (B, L, O, T) the targets of the window
        if w.lag_inputs:
            assert particles.inputs is not None and particles.season is not None
            targets = particles.inputs[:, 0, :, : w.n_targets].unsqueeze(-1)
            self.targets = np.ascontiguousarray(targets.numpy())
            self.lags = LagSlots(particles.season.cpu().numpy(), n_lag)

    @torch.inference_mode()
    def run(
        self,
        eps_z: Tensor,
        eps_x: Tensor,
        eps_qkv: Tensor,
        covariates: Tensor | None,
        mean_coef: Tensor | None,
        ends: bool,
    ) -> np.ndarray:
        """S steps of every path: eps_z (S, B, N, D), eps_x (S, B, N, O), eps_qkv (S, B, N, 3,
        D) (the last step's not read where the forecast `ends` with these steps: no step
        follows), covariates (S, B, F - O) the known inputs, mean_coef (S, B, J + 1, O) the
        correction of the mean at each step (None: the one the paths started with). Returns
        X (S, B, N, O)."""
        s, b, n, _ = eps_x.shape
        o, d = self.w.n_targets, eps_z.shape[-1]
        out = np.empty((s, b, o, n), np.float32)
        coef = self._mean_coefs(s, b, mean_coef)
        cov = np.zeros((s, b, 0), np.float32) if covariates is None else _array(covariates)
        qkv = _array(eps_qkv).reshape(s, b, n, 3 * d)
        done = 0
        if self.pick is not None:  # the first step: from the particles
            out[0] = self._first_step(_array(eps_z[0]), _array(eps_x[0]), coef[0])
            done = 1
            if s == 1 and ends:  # a one-step forecast: no windows taken
                return out.transpose(0, 1, 3, 2)
            self._own_windows(n)
            self.x_prev = np.concatenate([out[0], _known(cov[0], n)], axis=1)
            self.pending = qkv[0]
        if done < s:
            assert self.pending is not None
            ring = (self.query.numpy(), self.keys.numpy(), self.values.numpy(), self.held,
                    self.targets if self.targets is not None else _placeholder(),
                    np.empty((self.w.window + 3, n), np.float32))
            steps(
                self.w.kernel, ring, self._lag_tables(), self.count, self.x_prev,
                (self.pending, qkv[done : s - 1], _array(eps_z[done:]), _array(eps_x[done:])),
                cov[done:], coef[done:], out[done:],
            )
            self.count += s - done
        self.pending = None if ends else qkv[s - 1].copy()
        return out.transpose(0, 1, 3, 2)

    def _first_step(self, eps_z: np.ndarray, eps_x: np.ndarray, coef: np.ndarray) -> np.ndarray:
        """X_t (B, O, N) of the first step: the paths attend over their particles' windows
        and each takes its particle's mean."""
        b, hd, r, n_lag, p = self.keys.shape
        mu = torch.empty(b, hd * r, p)
        attend(
            self.keys.numpy(), self.values.numpy(), self.query.numpy(),
            self.w.lag_keys[0], self.w.lag_values[0], self.held,
            np.empty((n_lag + 3, p), np.float32), mu.numpy(),
        )
        assert self.pick is not None
        mu = self.pick.take(mu)  # (B, D, N) each path its particle's
        x_t = np.empty((b, self.w.n_targets, mu.shape[-1]), np.float32)
        lags = no_lags()
        if self.targets is not None:
            lags = (self.targets, *self.lags.at(0, self.held))
        readout(
            self.w.kernel, mu.numpy(), eps_z, self.x_prev, lags, coef, eps_x, x_t
        )
        return x_t

    def _own_windows(self, n: int) -> None:
        """The paths take their particles' windows (and targets), the query a row per path."""
        assert self.pick is not None
        self.keys = self.pick.take(self.keys)
        self.values = self.pick.take(self.values)
        self.pick = None
        if self.targets is not None:
            self.targets = np.repeat(self.targets, n, axis=3)
        b, hd, r, _, _ = self.keys.shape
        self.query = torch.empty(b, hd, r, n, dtype=self.keys.dtype)

    def _lag_tables(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The lag keys and values of the ring's rotations, each series' lag indices and the
        lags its window can hold (placeholders without lag inputs)."""
        w = self.w
        if self.targets is None:
            index = np.zeros((1, N_LAG_TERMS + 1), np.int64)
            return w.lag_keys, w.lag_values, index, np.zeros((1, N_LAG_TERMS), np.bool_)
        return w.lag_keys, w.lag_values, self.lags.lag_index, self.lags.within

    def _mean_coefs(self, s: int, b: int, mean_coef: Tensor | None) -> np.ndarray:
        """The series' correction of the mean at each step (S, B, J + 1, O): the one the paths
        started with where none is given, zeros where there is none."""
        if mean_coef is not None:
            return _array(mean_coef)
        shape = (s, b, N_LAG_TERMS + 1, self.w.n_targets)
        if self.mean_coef is None:
            return np.zeros(shape, np.float32)
        return np.ascontiguousarray(np.broadcast_to(_array(self.mean_coef), shape))


def _array(x: Tensor) -> np.ndarray:
    """x as the kernels take it: a C-contiguous float32 array (itself, as a rule)."""
    return x.to(torch.float32).contiguous().numpy()


def _known(cov: np.ndarray, n: int) -> np.ndarray:
    """The known inputs (B, F - O) of every path, (B, F - O, N)."""
    return np.broadcast_to(cov[:, :, None], (*cov.shape, n))


def _placeholder() -> np.ndarray:
    return no_lags()[0]


class LagSlots:
    """Where the ring holds the lags of SMCTransformer.lag_terms: l = 2, L, m, 2 m (m each
    series' season length, `season` (B,)) and lag 1."""

    def __init__(self, season: np.ndarray, n_lag: int) -> None:
        m = season[:, None]
        lags = np.concatenate([np.full_like(m, 2), np.full_like(m, n_lag), m, 2 * m], axis=1)
        self.n_lag = n_lag
        self.lag_index = np.concatenate([np.clip(lags - 1, 0, n_lag - 1), 0 * m], axis=1)
        self.within = (lags <= n_lag) & (lags >= 2)  # (B, J) lags the window can hold
        self.rows = np.arange(len(season))[:, None]

    def at(self, count: int, held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The slots of the lags, then of lag 1, after `count` steps (B, J + 1) int64, and
        which of the lags are held (B, J), given which slots are (held (B, L))."""
        slots = ((self.lag_index - count) % self.n_lag).astype(np.int64)
        return slots, held[self.rows, slots[:, :N_LAG_TERMS]] & self.within


class Picks:
    """The particle each path descends from, ancestors (B, N): each path's columns copied from
    its particle's by one compiled gather (kernels.take)."""

    def __init__(self, ancestors: Tensor) -> None:
        self.ancestors = np.ascontiguousarray(ancestors.cpu().numpy(), dtype=np.int64)

    def take(self, x: Tensor) -> Tensor:
        """x (B, ..., P) at each path's particle -> (B, ..., N) (copies: the same numbers)."""
        b, n = self.ancestors.shape
        out = torch.empty(*x.shape[:-1], n, dtype=torch.float32)
        take(_array(x).reshape(b, -1, x.shape[-1]), self.ancestors, out.numpy().reshape(b, -1, n))
        return out
