"""The SMC Transformer network: stochastic self-attention and the observation model.

Paper: seeds/001 section 3.1 (one head), seeds/000 section 3.1 (multi-head form).
Shapes: B batch, P particles, L window (Delta), D d_model, Hd heads, R head width, F input
features, O targets (or classes).

For every particle, at step t (predicting X_t from X_{t-L:t-1}):
    q(s) = W^q X_s + Sigma_q^1/2 eps_q(s),  k(s) = ..., v(s) = ...          (3.1)
    pi(t) = softmax(q(t-1)^T K(t) / sqrt(R))                                 (3.1)
    z(t) = sum_s pi_s(t) v(t-s) + Sigma_z^1/2 eps_z(t)                        (3)
    X_t = G_obs(r(t)) + eps_t,  r(t) = LN(z(t) + W^e X_{t-1})  (residual, seed 000)
The network holds the means (weights) and the diagonal covariances (buffers, updated by EM,
appendix A); this module has no randomness of its own: all noise is passed in.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from model.network.config import ModelConfig
from model.network.input_layer import InputLayer, windows_of

LOG_2PI = math.log(2 * math.pi)
#: the lagged-target terms of ModelConfig.lag_inputs: lags 2 and L, one and two seasons back
N_LAG_TERMS = 4
#: the index of the long slope X_{t-L} - X_{t-1} among them (L the window)
LONG_SLOPE = 1
#: the terms of a series' own mean correction (model/series/mean.py): the lag terms and a
#: constant
N_MEAN_TERMS = N_LAG_TERMS + 1
#: bound of the log-scale s of ModelConfig.obs_scale: a particle's sd is within e^+-3 of
#: Sigma_obs^1/2 (s = 3 tanh(a / 3) of the linear output a)
OBS_SCALE_BOUND = 3.0


class FeedForwardHead(nn.Module):
    """G_obs: point-wise feed-forward with residual and layer norm, then a linear output."""

    def __init__(self, d_model: int, d_ff: int, d_out: int) -> None:
        super().__init__()
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, d_out)

    def forward(self, r: Tensor) -> Tensor:  # (..., D) -> (..., O)
        return self.out(self.norm(r + self.ff(r)))


class GaussianObservation(nn.Module):
    """X_t = G(r_t) + eps_t, eps_t ~ N(0, diag(sigma_obs)); sigma_obs holds variances.

    With ModelConfig.obs_scale each particle's variance is sigma_obs exp(2 s(r_t)): a
    prediction `pred` (what the readout gives, the filter weighs and the paths sample) is then
    the mean and s side by side, (..., 2 O); `mean` and `variance` read it either way."""

    kind = "gaussian"

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.d_out = cfg.d_out
        self.head: nn.Module
        if cfg.head == "ffn":
            self.head = FeedForwardHead(cfg.d_model, cfg.d_ff, cfg.d_out)
        else:
            self.head = nn.Linear(cfg.d_model, cfg.d_out)
        self.scaled = cfg.obs_scale
        if cfg.obs_scale:  # the log-scale s(r), zero: Sigma_obs for every particle
            self.log_scale = nn.Linear(cfg.d_model, cfg.d_out)
            nn.init.zeros_(self.log_scale.weight)
            nn.init.zeros_(self.log_scale.bias)
        self.register_buffer("sigma_obs", torch.full((cfg.d_out,), cfg.sigma_obs_init))
        self.sigma_obs: Tensor

    def forward(self, r: Tensor) -> Tensor:  # (B, P, D) -> mean (B, P, O)
        return self.head(r)

    def scale_of(self, r: Tensor) -> Tensor:  # (B, P, D) -> s (B, P, O), |s| < OBS_SCALE_BOUND
        return OBS_SCALE_BOUND * torch.tanh(self.log_scale(r) / OBS_SCALE_BOUND)

    def target(self, x: Tensor) -> Tensor:  # (..., F) -> (..., O)
        return x[..., : self.d_out]

    def mean(self, pred: Tensor) -> Tensor:  # (..., O or 2 O) -> (..., O)
        return pred[..., : self.d_out]

    def variance(self, pred: Tensor) -> Tensor:
        """Each component's variance (..., O) (Sigma_obs (O,) for every one without obs_scale)."""
        if not self.scaled:
            return self.sigma_obs
        return self.sigma_obs * torch.exp(2.0 * pred[..., self.d_out :])

    def log_prob(self, y: Tensor, pred: Tensor) -> Tensor:
        """Eq. (5): log N(y; mean, Sigma_obs^m); y (B, O), pred (B, P, O or 2 O) -> (B, P)."""
        var = self.variance(pred)
        sq = (y.unsqueeze(1) - self.mean(pred)) ** 2 / var  # (B, P, O)
        return -0.5 * (sq + torch.log(var) + LOG_2PI).sum(-1)

    def sample(self, pred: Tensor, eps: Tensor) -> Tensor:  # (B, P, O or 2 O), eps (B, P, O)
        return self.mean(pred) + torch.sqrt(self.variance(pred)) * eps

    def as_input(self, y: Tensor) -> Tensor:  # sampled targets (B, P, O) -> input part
        return y


class CategoricalObservation(nn.Module):
    """Classification (seed 000 section 3.1): weight = probability of the observed class.

    Inputs are one-hot class vectors (F = number of classes = O); `target` gives the index.
    """

    kind = "categorical"

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.d_out = cfg.d_out
        self.head = FeedForwardHead(cfg.d_model, cfg.d_ff, cfg.d_out)

    def forward(self, r: Tensor) -> Tensor:  # (B, P, D) -> logits (B, P, O)
        return self.head(r)

    def mean(self, pred: Tensor) -> Tensor:  # the logits are the prediction
        return pred

    def target(self, x: Tensor) -> Tensor:  # one-hot (..., O) -> class index (...)
        return x.argmax(-1)

    def log_prob(self, y: Tensor, logits: Tensor) -> Tensor:  # y (B,), logits (B, P, O)
        logp = torch.log_softmax(logits, dim=-1)
        idx = y.long().view(-1, 1, 1).expand(-1, logits.shape[1], 1)
        return logp.gather(-1, idx).squeeze(-1)  # (B, P)

    def sample(self, logits: Tensor, eps: Tensor) -> Tensor:
        """Gumbel-max with uniforms `eps` in (0, 1) of shape (B, P, O): class index (B, P)."""
        gumbel = -torch.log(-torch.log(eps.clamp(1e-12, 1 - 1e-7)))
        return (logits + gumbel).argmax(-1)

    def as_input(self, y: Tensor) -> Tensor:  # class index (B, P) -> one-hot (B, P, O)
        return nn.functional.one_hot(y.long(), self.d_out).to(torch.float32)


class SMCTransformer(nn.Module):
    """One stochastic self-attention layer and an observation model (paper section 3.1)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.w_qkv = nn.Linear(cfg.d_in, 3 * d)  # W^q, W^k, W^v stacked
        if cfg.residual:
            self.w_e = nn.Linear(cfg.d_in, d)
            self.norm = nn.LayerNorm(d)
        self.obs: GaussianObservation | CategoricalObservation = (
            GaussianObservation(cfg) if cfg.obs == "gaussian" else CategoricalObservation(cfg)
        )
        # diagonal variances: Sigma_q, Sigma_k, Sigma_v stacked (3, D), and Sigma_z (D,)
        if cfg.lags:  # relative-lag embeddings (lag s at index s - 1), zero: the paper's model
            self.lag_key = nn.Parameter(torch.zeros(cfg.window, d))
            self.lag_value = nn.Parameter(torch.zeros(cfg.window, d))
            self.lag_bias = nn.Parameter(torch.zeros(cfg.n_heads, cfg.window))
        if cfg.skip:  # the last target value's weight in the observation mean
            self.skip = nn.Parameter(torch.ones(cfg.d_out))
        if cfg.lag_inputs:  # coefficients of the lagged differences, zero: no lag terms
            self.lag_coef = nn.Linear(d, N_LAG_TERMS * cfg.d_out)
            nn.init.zeros_(self.lag_coef.weight)
            nn.init.zeros_(self.lag_coef.bias)
        if cfg.det_context:  # the deterministic layer under this one, adding nothing at first
            self.under = InputLayer(cfg)
        self.register_buffer("sigma_qkv", torch.full((3, d), cfg.sigma_init))
        self.register_buffer("sigma_z", torch.full((d,), cfg.sigma_init))
        self.sigma_qkv: Tensor
        self.sigma_z: Tensor

    def encode(
        self, x: Tensor, eps: Tensor, inputs: Tensor | None = None, valid: Tensor | None = None
    ) -> Tensor:
        """Eq. (3.1): noisy query, key and value of an input.

        x (B, P or 1, F), eps (B, P, 3, D) -> qkv (B, P, 3, D) (q, k, v on axis 2). With
        det_context, inputs (B, P or 1, L, F) the input window that x has just entered (at
        index 0) and valid (B, L) its lags held: the deterministic layer's addition.
        """
        b, p = eps.shape[:2]
        mean = self.w_qkv(x)  # (B, P|1, 3D)
        if self.cfg.det_context:
            assert inputs is not None and valid is not None, "det_context needs the inputs"
            k = self.cfg.det_context
            mean = mean + self.under(inputs[:, :, :k], valid[:, :k])
        mean = mean.view(b, mean.shape[1], 3, self.cfg.d_model)
        return mean + torch.sqrt(self.sigma_qkv) * eps

    def window_means(self, x_hist: Tensor, valid: Tensor) -> Tensor:
        """The q, k, v means of every input of a window, eq. (3.1) without its noise: x_hist
        (B, L, F) X_{t-s} at index s - 1, valid (B, L) -> (B, L, 3 D)."""
        means = self.w_qkv(x_hist)
        if self.cfg.det_context:
            inputs, held = windows_of(x_hist, valid, self.cfg.det_context)
            means = means + self.under(inputs, held)
        return means

    def attended(self, valid: Tensor) -> Tensor:
        """The lags (B, L) the stochastic attention reads: those held, up to
        ModelConfig.attended."""
        if not self.cfg.det_context:
            return valid
        lags = torch.arange(valid.shape[-1], device=valid.device)
        return valid & (lags < self.cfg.attended)

    def attend(self, q: Tensor, window: Tensor, valid: Tensor) -> Tensor:
        """Mean mu(t) of z(t), eq. (3): attention of q(t-1) over the window.

        q (B, P, D); window (B, P, L, 2, D) keys [..., 0, :] and values [..., 1, :] of lag s
        at index s-1; valid (B, L) bool -> mu (B, P, D).
        """
        b, p, n_lag, _, d = window.shape
        hd, r = self.cfg.n_heads, self.cfg.head_dim
        qh = q.view(b, p, hd, 1, r)  # (B, P, Hd, 1, R)
        kh = window[:, :, :, 0].reshape(b, p, n_lag, hd, r).transpose(2, 3)  # (B, P, Hd, L, R)
        vh = window[:, :, :, 1].reshape(b, p, n_lag, hd, r).transpose(2, 3)  # (B, P, Hd, L, R)
        # batched products, not broadcast-and-sum: no (B, P, Hd, L, R) temporary (2x faster at
        # D = 32 for P = 100 or N = 1000 paths; the same at D = 16)
        scores = (qh @ kh.transpose(-1, -2)).squeeze(-2) / math.sqrt(r)  # (B, P, Hd, L)
        if self.cfg.lags:
            scores = scores + self.lag_scores(q, n_lag)
        mask = self.attended(valid).view(b, 1, 1, n_lag)
        scores = scores.masked_fill(~mask, float("-inf"))
        pi = torch.softmax(scores, dim=-1)  # (B, P, Hd, L)
        mu = (pi.unsqueeze(-2) @ vh).squeeze(-2)  # (B, P, Hd, R)
        if self.cfg.lags:
            mu = mu + self.lag_values(pi)
        return mu.reshape(b, p, d)

    def lag_scores(self, q: Tensor, n_lag: int) -> Tensor:
        """The positional part of eq. (3)'s scores, q . E^k_s / sqrt(R) + b_s per head for lags
        s = 1..n_lag: q (B, P, D) -> (B, P, Hd, L)."""
        b, p, _ = q.shape
        hd, r = self.cfg.n_heads, self.cfg.head_dim
        keys = self.lag_key[:n_lag].view(n_lag, hd, r).permute(1, 2, 0)  # (Hd, R, L)
        qh = q.view(b, p, hd, 1, r)
        return (qh @ keys).squeeze(-2) / math.sqrt(r) + self.lag_bias[:, :n_lag]

    def lag_values(self, pi: Tensor) -> Tensor:
        """The positional part of the attention's output, sum_s pi_s E^v_s per head: pi
        (B, P, Hd, L) -> (B, P, Hd, R)."""
        n_lag = pi.shape[-1]
        hd, r = self.cfg.n_heads, self.cfg.head_dim
        values = self.lag_value[:n_lag].view(n_lag, hd, r).transpose(0, 1)  # (Hd, L, R)
        return (pi.unsqueeze(-2) @ values).squeeze(-2)

    def readout(
        self,
        z: Tensor,
        x_prev: Tensor,
        lagged: Tensor | None = None,
        mean_coef: Tensor | None = None,
    ) -> Tensor:
        """G_obs(r(t)) with r(t) = LN(z(t) + W^e X_{t-1}), plus a X_{t-1} of the targets with
        `skip` and sum_j c_j(r(t)) lagged_j with `lag_inputs`; z (B, P, D), x_prev (B, P, F)
        or (B, 1, F) when every particle has the same X_{t-1}; lagged (B, P or 1, K, O) from
        `lag_terms`. mean_coef (B, K + 1, O), a served series' own correction of the mean
        (model/series/mean.py), adds sum_j a_j lagged_j + a_K; None (training): none. With
        `obs_scale`, the mean and each particle's log-scale s(r(t)) side by side (B, P, 2 O)
        (GaussianObservation)."""
        r = self.norm(z + self.w_e(x_prev)) if self.cfg.residual else z
        mean = self.obs(r)  # (B, P, O)
        if self.cfg.skip:
            mean = mean + self.skip * x_prev[..., : self.cfg.d_out]
        if self.cfg.lag_inputs:
            assert lagged is not None, "a model with lag_inputs needs the lagged targets"
            coef = self.lag_coef(r).view(*r.shape[:-1], N_LAG_TERMS, self.cfg.d_out)
            mean = mean + (coef * lagged).sum(-2)
            if mean_coef is not None:
                a = mean_coef.unsqueeze(1)  # (B, 1, K + 1, O)
                mean = mean + (a[:, :, :N_LAG_TERMS] * lagged).sum(-2) + a[:, :, N_LAG_TERMS]
        if self.cfg.obs_scale:
            assert isinstance(self.obs, GaussianObservation)
            scale = self.obs.scale_of(r).expand_as(mean)
            return torch.cat([mean, scale], dim=-1)
        return mean

    def lag_terms(self, inputs: Tensor, valid: Tensor, season: Tensor) -> Tensor:
        """The lagged differences X_{t-l} - X_{t-1} of the targets for l = 2, L, m, 2 m (m the
        series' season length), 0 where the window does not hold lag l or m = 0.

        inputs (B, N or 1, L, F) X_{t-s} at index s - 1, valid (B, L) which lags are held,
        season (B,) int64 -> (B, N or 1, K, O)."""
        b, n, n_lag, _ = inputs.shape
        o = self.cfg.d_out
        m = season.view(b, 1)
        lags = torch.cat([torch.full_like(m, 2), torch.full_like(m, n_lag), m, 2 * m], dim=1)
        idx = (lags - 1).clamp(0, n_lag - 1)  # (B, K)
        held = valid.gather(1, idx) & (lags <= n_lag) & (lags >= 2)  # (B, K)
        targets = inputs[..., :o]  # (B, N, L, O)
        at = targets.gather(2, idx.view(b, 1, -1, 1).expand(b, n, N_LAG_TERMS, o))
        diff = at - targets[:, :, :1]  # (B, N, K, O)
        return torch.where(held.view(b, 1, N_LAG_TERMS, 1), diff, torch.zeros_like(diff))

    def latent_log_prob(self, eps: Tensor, var: Tensor) -> Tensor:
        """log N(var^1/2 eps; 0, var) of reparameterised noise eps (..., K), var (K,) -> (...)."""
        return -0.5 * (eps**2 + torch.log(var) + LOG_2PI).sum(-1)


def random_walk(cfg: ModelConfig, sigma_obs: float, seed: int = 0) -> SMCTransformer:
    """A network of configuration `cfg` that forecasts the last value: the readout G_obs and
    the lag and log-scale terms 0, the skip a = 1 and Sigma_obs = sigma_obs, so that
    X_t ~ N(X_{t-1}, Sigma_obs) whatever the attention holds (a random walk in the units it is
    fed); `cfg` must have `skip`. The other weights are drawn as at initialisation, from
    `seed` (they do not change what it forecasts)."""
    if not cfg.skip or cfg.obs != "gaussian":
        raise ValueError("a random walk needs a gaussian model with skip")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = SMCTransformer(cfg).eval()
    assert isinstance(model.obs, GaussianObservation)
    head = model.obs.head
    readout = head.out if isinstance(head, FeedForwardHead) else head
    with torch.no_grad():
        assert isinstance(readout, nn.Linear)
        readout.weight.zero_()
        readout.bias.zero_()
        model.skip.fill_(1.0)
        if cfg.lag_inputs:
            model.lag_coef.weight.zero_()
            model.lag_coef.bias.zero_()
        if cfg.obs_scale:
            model.obs.log_scale.weight.zero_()
            model.obs.log_scale.bias.zero_()
        model.obs.sigma_obs.fill_(sigma_obs)
    return model
