"""The particle filter against cases with a known answer."""

from __future__ import annotations

import ast
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from model.filtering.filter import StepNoise, filter_init, filter_step, push, select
from model.filtering.inference import FilterRun, genealogy, run_filter, unistep_samples
from model.network.config import ModelConfig
from model.network.smc_transformer import SMCTransformer

A, B_OUT, W_V, B_V = 0.8, -0.05, 0.9, 0.1
SIG_LATENT, SIG_OBS = 0.2, 0.3  # variances


def ar1_model() -> SMCTransformer:
    """Window 1, one head, linear output, no residual: X_t = A (W_V X_{t-1} + B_V + e_v + e_z)
    + B_OUT + e_obs, an AR(1) with Gaussian noise of variance A^2 (2 SIG_LATENT) + SIG_OBS."""
    cfg = ModelConfig(
        d_in=1,
        d_out=1,
        d_model=1,
        window=1,
        head="linear",
        residual=False,
        sigma_init=SIG_LATENT,
        sigma_obs_init=SIG_OBS,
    )
    m = SMCTransformer(cfg)
    with torch.no_grad():
        m.w_qkv.weight.fill_(W_V)
        m.w_qkv.bias.fill_(B_V)
        m.obs.head.weight.fill_(A)
        m.obs.head.bias.fill_(B_OUT)
    return m


def ar1_exact(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Exact predictive means (B, T-1), total log-likelihood (B,) and variance."""
    mean = A * (W_V * x[:, :-1, 0] + B_V) + B_OUT
    var = A * A * 2 * SIG_LATENT + SIG_OBS
    ll = -0.5 * ((x[:, 1:, 0] - mean) ** 2 / var + math.log(2 * math.pi * var))
    return mean, ll.sum(1), var


def ar1_data(n: int, t: int, seed: int) -> torch.Tensor:
    _, _, var = ar1_exact(torch.zeros(1, 2, 1))
    gen = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, t, 1)
    x[:, 0, 0] = torch.randn(n, generator=gen)
    for i in range(1, t):
        mean = A * (W_V * x[:, i - 1, 0] + B_V) + B_OUT
        x[:, i, 0] = mean + math.sqrt(var) * torch.randn(n, generator=gen)
    return x


@pytest.mark.parametrize("scheme", ["multinomial", "systematic", "stratified"])
def test_log_likelihood_matches_the_exact_ar1(scheme: str) -> None:
    # log p_hat is consistent; at P=4000 over 29 steps its sd is ~0.05 (measured over seeds),
    # so 0.25 is a 5-sd bound on a fixed seed.
    model = ar1_model()
    x = ar1_data(4, 30, seed=0)
    _, exact, _ = ar1_exact(x)
    with torch.no_grad():
        run = run_filter(
            model, x, 4000, resampling=scheme, generator=torch.Generator().manual_seed(1)
        )
    assert torch.allclose(run.log_evidence.sum(1), exact, atol=0.25), (
        run.log_evidence.sum(1),
        exact,
    )


def test_unistep_predictive_matches_the_exact_law() -> None:
    model = ar1_model()
    x = ar1_data(2, 10, seed=3)
    mean, _, var = ar1_exact(x)
    gen = torch.Generator().manual_seed(4)
    with torch.no_grad():
        run = run_filter(model, x, 2000, generator=gen)
        samples = unistep_samples(model, run, 20000, gen)[..., 0]  # (B, T-1, N)
    # sd of a mean of 20000 draws of variance ~0.56 is 0.005; of the variance ~0.006
    assert torch.allclose(samples.mean(-1), mean, atol=0.03)
    assert torch.allclose(samples.var(-1), torch.full_like(mean, var), atol=0.05)


def test_unistep_samples_pick_particles_by_weight() -> None:
    # the authors' code picked particles uniformly: the mean would be 5, not 1
    model = ar1_model()
    model.obs.sigma_obs.fill_(1e-6)
    pred = torch.tensor([0.0, 10.0]).view(1, 1, 2, 1)
    logw = torch.log(torch.tensor([[[0.9, 0.1]]]))
    run = FilterRun(
        state=None,
        ancestors=None,
        logw_pred=logw,
        pred=pred,
        loglik=None,  # type: ignore[arg-type]
        log_evidence=None,
        ess=None,
        resampled=None,
        eps_z=None,
        eps_qkv=None,  # type: ignore[arg-type]
    )
    samples = unistep_samples(model, run, 20000, torch.Generator().manual_seed(0))
    assert samples.mean().item() == pytest.approx(1.0, abs=0.1)


def _state(b: int, p: int, cfg: ModelConfig, model: SMCTransformer, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, cfg.d_in, generator=gen)
    state = filter_init(model, x, p, torch.randn(b, p, 3, cfg.d_model, generator=gen))
    for _ in range(3):
        noise = StepNoise.draw(b, p, cfg.d_model, gen)
        state, _ = filter_step(
            model,
            state,
            torch.randn(b, cfg.d_in, generator=gen),
            torch.ones(b, dtype=torch.bool),
            noise,
            lambda lw, u: torch.arange(p).expand(b, p),
        )
    return state


def test_selection_carries_each_ancestors_whole_past() -> None:
    cfg = ModelConfig(d_in=2, d_out=1, d_model=4, window=5)
    model = SMCTransformer(cfg)
    state = _state(2, 4, cfg, model)
    fixed = torch.tensor([[3, 3, 0, 1], [2, 2, 2, 2]])
    selected, anc, resampled, _ = select(state, torch.zeros(2, 4), lambda lw, u: fixed, 1.0)
    assert torch.equal(anc, fixed) and bool(resampled.all())
    for b in range(2):
        for m in range(4):
            assert torch.equal(selected.window[b, m], state.window[b, fixed[b, m]])
            assert torch.equal(selected.query[b, m], state.query[b, fixed[b, m]])
    assert torch.allclose(selected.logw.exp(), torch.full((2, 4), 0.25))


def test_ess_threshold_skips_resampling_when_weights_are_even() -> None:
    cfg = ModelConfig(d_in=1, d_out=1, d_model=4, window=3)
    model = SMCTransformer(cfg)
    state = _state(1, 6, cfg, model)
    even = replace(state, logw=torch.zeros(1, 6))
    _, anc, resampled, _ = select(
        even, torch.rand(1, 6), lambda lw, u: torch.zeros(1, 6).long(), 0.5
    )
    assert not resampled.item() and torch.equal(anc, torch.arange(6).view(1, 6))
    skewed = replace(state, logw=torch.tensor([[0.0, -50, -50, -50, -50, -50]]))
    _, anc, resampled, _ = select(
        skewed, torch.rand(1, 6), lambda lw, u: torch.zeros(1, 6).long(), 0.5
    )
    assert resampled.item() and torch.equal(anc, torch.zeros(1, 6).long())


def test_missing_observation_advances_without_reweighting() -> None:
    cfg = ModelConfig(d_in=1, d_out=1, d_model=4, window=3)
    model = SMCTransformer(cfg)
    state = _state(1, 5, cfg, model)
    state = replace(state, logw=torch.tensor([[0.0, -1.0, -2.0, -3.0, -4.0]]))
    noise = StepNoise.draw(1, 5, 4, torch.Generator().manual_seed(9))
    keep = lambda lw, u: torch.arange(5).view(1, 5)  # noqa: E731
    new, stats = filter_step(
        model, state, torch.tensor([[float("nan")]]), torch.tensor([False]), noise, keep, 0.0
    )
    assert torch.equal(stats.loglik, torch.zeros(1, 5))
    assert stats.log_evidence.item() == pytest.approx(0.0, abs=1e-6)
    assert torch.allclose(torch.softmax(new.logw, -1), torch.softmax(state.logw, -1))
    mixture_mean = (torch.softmax(stats.logw_pred, -1).unsqueeze(-1) * stats.pred).sum(1)
    assert torch.allclose(new.x_prev[0, 0], mixture_mean[0])  # the imputed input
    assert bool(new.valid[0, :2].all())


def test_genealogy_traces_ancestors_back() -> None:
    # Figure 5 of the paper, 0-based: N=3, steps 1..4
    anc = torch.tensor([[[2, 2, 2], [1, 0, 1], [1, 2, 1], [2, 1, 2]]])  # (1, 4, 3)
    idx = genealogy(anc)  # (1, 5, 3)
    assert idx[0, -1].tolist() == [0, 1, 2]
    for t in range(4, 0, -1):
        assert idx[0, t - 1].tolist() == [anc[0, t - 1, m].item() for m in idx[0, t].tolist()]


def test_push_shifts_the_window_one_lag_back() -> None:
    window = torch.arange(12).view(1, 2, 3, 2)  # (B, P, L, 2)
    new = torch.tensor([[[-1, -2], [-3, -4]]])  # (B, P, 2)
    out = push(window, new, 2)
    assert torch.equal(out[:, :, 0], new) and torch.equal(out[:, :, 1:], window[:, :, :-1])


MODEL = Path(__file__).resolve().parents[3] / "model"
# the callers of the filter step: none may write a phase of it again
CALLERS = (
    "filtering/compact.py", "runtime/backends/base.py", "runtime/backends/torch_backend.py",
    "runtime/backends/onnx_backend.py", "filtering/paths.py", "artifacts/graphs.py",
    "artifacts/export.py", "runtime/runtime.py", "runtime/rollout/forecaster.py",
    "series/scoring.py", "series/scaling.py", "series/layer/layer.py", "filtering/inference.py",
)


def _tree(name: str) -> ast.Module:
    return ast.parse((MODEL / name).read_text())


def _attributes(node: ast.AST, attr: str) -> int:
    return sum(isinstance(n, ast.Attribute) and n.attr == attr for n in ast.walk(node))


def _calls(node: ast.AST) -> set[str]:
    """Names of the functions and methods a node calls."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            out.add(f.id if isinstance(f, ast.Name) else getattr(f, "attr", ""))
    return out


def _drops_last_lag(node: ast.AST) -> list[str]:
    """What is sliced `[..., :-1]` under `node` (the window shift drops the oldest lag), and
    `slice(None, -1)` where a slice is built."""
    out = []
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "slice"
            and [ast.unparse(a) for a in n.args] == ["None", "-1"]
        ):
            out.append("slice(None, -1)")
        if not isinstance(n, ast.Subscript):
            continue
        parts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
        for part in parts:
            if (
                isinstance(part, ast.Slice)
                and part.lower is None
                and part.step is None
                and isinstance(part.upper, ast.UnaryOp)
                and isinstance(part.upper.op, ast.USub)
                and isinstance(part.upper.operand, ast.Constant)
                and part.upper.operand.value == 1
            ):
                out.append(ast.unparse(n.value))
    return out


def _function(tree: ast.AST, name: str, within: str | None = None) -> ast.FunctionDef:
    """The one function `name` of a module (a method of class `within`)."""
    if within is not None:
        tree = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == within)
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, name
    return found[0]


def test_the_filter_step_is_written_once() -> None:
    """The mutation of eq. (3), the weighting of eq. (5) and the window shift are written in
    model/filtering/filter.py only (mutate, weight, push), and every form of the step calls them."""
    filt = _tree("filtering/filter.py")
    assert _attributes(filt, "sigma_z") == _attributes(_function(filt, "mutate"), "sigma_z") == 1
    assert _attributes(filt, "readout") == _attributes(_function(filt, "mutate"), "readout")
    assert _attributes(filt, "log_prob") == _attributes(_function(filt, "weight"), "log_prob")
    push_ = _function(filt, "push")
    assert _drops_last_lag(filt) == _drops_last_lag(push_) == ["slice(None, -1)"]
    for name in CALLERS:
        tree = _tree(name)
        for attr in ("sigma_z", "readout", "log_prob"):
            assert _attributes(tree, attr) == 0, f"{name} uses {attr}"
        # the runtime shifts the observed mask of the per-series scaling, not the filter state
        allowed = ["sub.observed"] if name == "runtime/runtime.py" else []
        assert _drops_last_lag(tree) == allowed, name
    phases = {"select", "mutate", "weight", "impute"}
    assert phases | {"absorb"} <= _calls(_function(filt, "filter_step"))
    assert {"mutate", "draw_next", "absorb"} <= _calls(_function(filt, "forecast_step"))
    compact = _function(_tree("filtering/compact.py"), "compact_step")
    assert phases | {"absorb_inputs"} <= _calls(compact)
    first_step = _function(_tree("filtering/paths.py"), "first_step")
    assert {"mutate", "draw_next"} <= _calls(first_step)
    assert "enter" in _calls(_function(_tree("filtering/paths.py"), "expand"))
    graphs = _tree("artifacts/graphs.py")
    assert "compact_step" in _calls(_function(graphs, "forward", within="UpdateGraph"))
    assert "forecast_step" in _calls(_function(graphs, "forward", within="ForecastGraph"))
