"""The two steps the service runs, as modules on explicit tensors: the torch backend
(model/runtime/backends/) calls them, and model/artifacts/export.py exports them to the ONNX
graphs the onnx backend runs.

    filter_step   model/filtering/compact.compact_step: noise, base, x_hist, valid, lineage, logw,
                  x, observed -> x_hist_out, lineage_out, logw_out, ancestors, resampled, ess,
                  logw_pred, pred, loglik: the model/filtering/filter.CompactState before and after
                  the step flattened to its tensors (after it, less its valid mask, which follows
                  from the step count the runtime keeps), then model/filtering/filter.StepStats.
                  All randomness comes from the noise table input, so the graph is
                  deterministic given its inputs. Resampling is `systematic` (cumsum +
                  scatter-add): searchsorted and multinomial do not export with a dynamic
                  particle count.
    forecast_step model/filtering/filter.forecast_step: window, query, x_prev, valid, eps_z, eps_x,
                  eps_qkv [, covariates] -> window_out, query_out, x_prev_out, valid_out, x_t.
A model with lag inputs also takes each series' season and correction of the mean in both
steps, and its forecast paths carry their input windows (LAGGED_FORECAST_INPUTS).
Shapes: B batch, P particles, N paths, L window, D d_model, F inputs, O targets.
"""

from __future__ import annotations

from torch import Tensor, nn

from model.filtering.compact import compact_step
from model.filtering.filter import CompactState, FilterState, forecast_step
from model.filtering.resampling import get_resampler
from model.network.smc_transformer import SMCTransformer

MIN_PARTICLES = 3  # every backend's least: the exported filter_step assumes P - 1 != 1
UPDATE_INPUTS = ("noise", "base", "x_hist", "valid", "lineage", "logw", "x", "observed")
UPDATE_OUTPUTS = (
    "x_hist_out",
    "lineage_out",
    "logw_out",
    "ancestors",
    "resampled",
    "ess",
    "logw_pred",
    "pred",
    "loglik",
)
FORECAST_INPUTS = ("window", "query", "x_prev", "valid", "eps_z", "eps_x", "eps_qkv", "covariates")
FORECAST_OUTPUTS = ("window_out", "query_out", "x_prev_out", "valid_out", "x_t")
# a model with ModelConfig.lag_inputs: each series' season length enters both steps, and the
# forecast paths carry their input windows
SEASON = "season"
# and each series' own correction of the mean (model/series/mean.py), zeros for none
MEAN_COEF = "mean_coef"
LAGGED_FORECAST_INPUTS = (
    *FORECAST_INPUTS[:4], "inputs", SEASON, MEAN_COEF, *FORECAST_INPUTS[4:]
)
LAGGED_FORECAST_OUTPUTS = (*FORECAST_OUTPUTS[:4], "inputs_out", "x_t")


def update_inputs(model: SMCTransformer) -> tuple[str, ...]:
    """Input names of the filter_step graph of `model`."""
    return (*UPDATE_INPUTS, SEASON, MEAN_COEF) if model.cfg.lag_inputs else UPDATE_INPUTS


def forecast_io(model: SMCTransformer) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Input and output names of the forecast_step graph of `model` (covariates last)."""
    if model.cfg.lag_inputs:
        return LAGGED_FORECAST_INPUTS, LAGGED_FORECAST_OUTPUTS
    return FORECAST_INPUTS, FORECAST_OUTPUTS


class UpdateGraph(nn.Module):
    """compact_step with its resampling scheme and threshold fixed, as a module to export."""

    def __init__(self, model: SMCTransformer, threshold: float = 1.0) -> None:
        super().__init__()
        self.model = model
        self.threshold = threshold

    def forward(
        self,
        noise: Tensor,
        base: Tensor,
        x_hist: Tensor,
        valid: Tensor,
        lineage: Tensor,
        logw: Tensor,
        x: Tensor,
        observed: Tensor,
        season: Tensor | None = None,
        mean_coef: Tensor | None = None,
    ) -> tuple[Tensor, ...]:
        new, s = compact_step(
            self.model,
            noise,
            base,
            CompactState(x_hist, valid, lineage, logw, season, mean_coef),
            x,
            observed,
            get_resampler("systematic"),
            self.threshold,
        )
        return (
            new.x_hist,
            new.lineage,
            new.logw,
            s.ancestors,
            s.resampled,
            s.ess,
            s.logw_pred,
            s.pred,
            s.loglik,
        )


class ForecastGraph(nn.Module):
    """forecast_step on explicit tensors (N paths of equal weight)."""

    def __init__(self, model: SMCTransformer) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        window: Tensor,
        query: Tensor,
        x_prev: Tensor,
        valid: Tensor,
        eps_z: Tensor,
        eps_x: Tensor,
        eps_qkv: Tensor,
        covariates: Tensor | None = None,
    ) -> tuple[Tensor, ...]:
        paths = FilterState(window, query, x_prev, valid, logw=query[..., 0] * 0.0)
        new, x_t = forecast_step(self.model, paths, eps_z, eps_x, eps_qkv, covariates)
        return new.window, new.query, new.x_prev, new.valid, x_t


class LaggedForecastGraph(ForecastGraph):
    """forecast_step of a model with lag_inputs: the paths' input windows (B, 1 or N, L, F),
    the series' season lengths (B,) and mean corrections (B, K + 1, O) go in, the windows
    after the step come out."""

    def forward(  # type: ignore[override]
        self,
        window: Tensor,
        query: Tensor,
        x_prev: Tensor,
        valid: Tensor,
        inputs: Tensor,
        season: Tensor,
        mean_coef: Tensor,
        eps_z: Tensor,
        eps_x: Tensor,
        eps_qkv: Tensor,
        covariates: Tensor | None = None,
    ) -> tuple[Tensor, ...]:
        logw = query[..., 0] * 0.0
        paths = FilterState(window, query, x_prev, valid, logw, inputs, season, mean_coef)
        new, x_t = forecast_step(self.model, paths, eps_z, eps_x, eps_qkv, covariates)
        assert new.inputs is not None
        return new.window, new.query, new.x_prev, new.valid, new.inputs, x_t


def forecast_graph(model: SMCTransformer) -> nn.Module:
    """The forecast_step module of `model`, as exported."""
    return LaggedForecastGraph(model) if model.cfg.lag_inputs else ForecastGraph(model)
