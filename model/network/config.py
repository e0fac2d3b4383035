"""Model configuration: a small dataclass that travels inside every checkpoint and artifact."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal

ObsKind = Literal["gaussian", "categorical"]
HeadKind = Literal["ffn", "linear"]
CovKind = Literal["diag", "scalar"]


@dataclass(frozen=True)
class ModelConfig:
    """Hyperparameters of the SMC Transformer (paper section 3.1, seed 000 section 3.1).

    d_in: input features per step (targets first, then covariates).
    d_out: target features (regression) or number of classes (categorical).
    d_model: width D of q, k, v and z; split into n_heads heads of D / n_heads.
    window: attention window Delta over past steps.
    head: "ffn" = point-wise feed-forward with layer norm and residual, then a linear output
        (the paper's G_obs); "linear" = a single linear map (makes the model an AR(1) when
        window == 1, used to check the filter against an exact answer).
    residual: add the embedded previous input to z before G_obs (transformer residual).
    cov: "diag" covariances, or "scalar" (one variance per latent, shared over dimensions).
    lags: positional information in the attention, beyond the paper (whose window is a set of
        values): relative-lag embeddings of keys and values and a bias per lag and head
        (Shaw et al. 2018), so that the model can tell lag s from lag s + 1 (a season, a trend).
    skip: a learned multiple of the last target value added to the observation mean, beyond
        the paper: G_obs(r) + a X_{t-1} (a random walk is a = 1, G_obs = 0); the layer norm
        of the paper's readout keeps the direction of X_{t-1}'s embedding, not its size.
    lag_inputs: lagged targets in the observation mean, beyond the paper (DeepAR and Lag-Llama
        feed the target at lags chosen from the frequency): the differences X_{t-l} - X_{t-1}
        for l = 2 and L (a short and a long slope) and l = m and 2 m, one and two seasons of
        the series' season length m back (where the window holds them), each weighted by a
        coefficient read linearly from the particle's r(t), so that each particle says how much
        of the season and of the trend to carry on; the seasonal-naive forecast is G = 0 with
        the coefficient of lag m at 1. A series without a season (m = 0) gets the slopes only.
    obs_scale: observation noise that follows the series, beyond the paper: each particle's
        variance is Sigma_obs exp(2 s(r(t))), s linear in the particle's r(t) (bounded to
        +-OBS_SCALE_BOUND), so that the predictive mixture narrows where the particles see a
        smooth stretch and widens where they see a volatile one.
    det_context: K > 0 puts a deterministic layer under the stochastic one, beyond the paper
        (a hierarchical SMC Transformer): causal self-attention over each step's last K inputs
        (model/network/input_layer.py) whose output adds to the means of that step's q, k, v,
        so that the particle filter runs on the top layer only. The stochastic attention then
        reads lags 1..L - K + 1, whose K inputs the window holds; 0: none (the paper's).
    """

    d_in: int = 1
    d_out: int = 1
    d_model: int = 32
    n_heads: int = 1
    window: int = 24
    d_ff: int = 32
    head: HeadKind = "ffn"
    residual: bool = True
    obs: ObsKind = "gaussian"
    cov: CovKind = "diag"
    sigma_init: float = 0.1
    sigma_obs_init: float = 0.5
    lags: bool = False
    skip: bool = False
    lag_inputs: bool = False
    obs_scale: bool = False
    det_context: int = 0

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window}")
        if (self.skip or self.lag_inputs or self.obs_scale) and self.obs != "gaussian":
            raise ValueError("skip, lag_inputs and obs_scale need a gaussian observation model")
        if self.obs == "gaussian" and self.d_out > self.d_in:
            raise ValueError(f"d_out={self.d_out} targets cannot exceed d_in={self.d_in} inputs")

        if self.det_context and not (self.lag_inputs and self.det_context <= self.window):
            raise ValueError(
                f"det_context={self.det_context} needs lag_inputs and at most window="
                f"{self.window} inputs"
            )

    @property
    def attended(self) -> int:
        """How many lags the stochastic attention reads: the window, less the inputs the
        deterministic layer under it reads before the oldest (det_context)."""
        return self.window - max(self.det_context - 1, 0)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def target_dim(self) -> int:
        """Number of input features that are targets (the first ones)."""
        return self.d_out if self.obs == "gaussian" else self.d_in

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown model config keys {sorted(unknown)}")
        return cls(**d)
