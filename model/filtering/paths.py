"""Forecast paths drawn from the particles of a compact state (model/filtering/filter.CompactState).

Paths are drawn from P particles (N >> P in the service: 100 samples from 10 particles), so
the windows are rebuilt once per particle and gathered into the paths (model/filtering/filter.
expand_paths); the torch backend goes further and keeps the paths as particles plus ancestors
(`LazyPaths`) through the first step, whose attention is then computed once per particle: a
one-step forecast never builds the N windows. Gathering copies values, so the numbers are
those of the paths built one by one.

Shapes: B batch, P particles, N paths, L window, D d_model, F inputs, O targets.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from torch import Tensor

from model.filtering.compact import materialize
from model.filtering.filter import (
    CompactState,
    FilterState,
    draw_next,
    enter,
    expand_paths,
    gather,
    mutate,
    one_more_lag,
    push_inputs,
)
from model.filtering.resampling import get_resampler
from model.network.smc_transformer import SMCTransformer


def draw_paths(logw: Tensor, u: Tensor) -> Tensor:
    """Particle of each of N equally weighted paths, drawn by weight (systematic, uniforms
    u (B, N)), section 3.3: logw (B, P) -> ancestors (B, N)."""
    return get_resampler("systematic")(logw, u)


def start_paths(
    model: SMCTransformer, table: Tensor, base: Tensor, state: CompactState, u: Tensor
) -> FilterState:
    """N equally weighted paths drawn by weight (uniforms u (B, N)) from the particles of a
    compact state, as a FilterState (B, N, ...): the P particles' windows, gathered."""
    return LazyPaths.start(model, table, base, state, u).expand()


@dataclass(frozen=True)
class LazyPaths:
    """N forecast paths held as the P particles they descend from and each path's particle
    (ancestors (B, N)), and, once a step has moved them, what that step fed each path: its
    query, key and value (B, N, 3, D) and input (B, N, F). `expand` builds the FilterState of
    the N paths, which later steps move with model/filtering/filter.forecast_step."""

    particles: FilterState  # (B, P, ...) with zero log-weights
    ancestors: Tensor  # (B, N)
    qkv: Tensor | None = None  # (B, N, 3, D)
    x_prev: Tensor | None = None  # (B, N, F)

    @classmethod
    def start(
        cls, model: SMCTransformer, table: Tensor, base: Tensor, state: CompactState, u: Tensor
    ) -> LazyPaths:
        return cls(materialize(model, table, base, state), draw_paths(state.logw, u))

    def last_inputs(self) -> Tensor:
        """X_t of every path (B, N, F): the same for all particles (compact.materialize), as
        the same stride-0 view that materialize makes (a linear layer rounds it alike)."""
        x_prev = self.particles.x_prev
        return x_prev[:, :1].expand(x_prev.shape[0], self.ancestors.shape[1], x_prev.shape[2])

    def expand(self) -> FilterState:
        paths = expand_paths(self.particles, self.ancestors)  # (B, N, ...)
        if self.qkv is None:
            return replace(paths, x_prev=self.last_inputs())
        assert self.x_prev is not None
        return enter(paths, self.qkv, self.x_prev)  # the absorption the first step deferred

    def first_step(
        self,
        model: SMCTransformer,
        eps_z: Tensor,
        eps_x: Tensor,
        eps_qkv: Tensor,
        covariates: Tensor | None,
    ) -> tuple[LazyPaths, Tensor]:
        """model/filtering/filter.forecast_step on the paths, with the attention of eq. (3) computed
        once per particle (a path's window and query are its particle's), and the absorption
        of the sampled inputs deferred to `expand`. -> (paths, x_t)."""
        parts = self.particles
        mu = gather(model.attend(parts.query, parts.window, parts.valid), self.ancestors)
        pred = mutate(
            model, mu, eps_z, self.last_inputs(), parts.lagged(model), parts.mean_coef
        )  # (B, N, O)
        x_t, x_in = draw_next(model, pred, eps_x, covariates)  # (B, N, O), (B, N, F)
        inputs = valid = None
        if model.cfg.det_context:  # the paths' windows after x_in, for the layer under
            assert parts.inputs is not None
            inputs, valid = push_inputs(parts.inputs, x_in), one_more_lag(parts.valid)
        qkv = model.encode(x_in, eps_qkv, inputs, valid)  # (B, N, 3, D), eq. (3.1)
        return replace(self, qkv=qkv, x_prev=x_in), x_t
