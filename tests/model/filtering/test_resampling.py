"""Resampling schemes draw ancestors with the right law (chi-square tests, fixed seeds)."""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from model.filtering.resampling import RESAMPLERS, ess, get_resampler

WEIGHTS = torch.tensor([0.05, 0.1, 0.15, 0.2, 0.5])


def _counts(fn, logw: torch.Tensor, draws: int, n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(draws, n, generator=gen)
    anc = fn(logw.expand(draws, -1), u)  # (draws, n)
    return torch.bincount(anc.flatten(), minlength=logw.shape[-1]).double()


@pytest.mark.parametrize("name", sorted(RESAMPLERS))
def test_ancestor_frequencies_follow_the_weights(name: str) -> None:
    # 20000 draws of 5 ancestors: under the right law the chi-square p-value is uniform, so
    # p > 1e-3 fails a correct scheme with probability 1e-3 (fixed seed: deterministic).
    # Systematic and stratified have lower variance than multinomial, so the test is
    # conservative for them; the exact-count test below covers their stronger property.
    counts = _counts(RESAMPLERS[name], WEIGHTS.log(), 20000, 5, seed=1)
    expected = WEIGHTS.double() * counts.sum()
    p_value = stats.chisquare(counts.numpy(), expected.numpy()).pvalue
    assert p_value > 1e-3, (name, counts / counts.sum())


def test_chi_square_rejects_the_authors_sampler_bug() -> None:
    # The TF code fed normalised weights where logits were expected: ancestors ~ softmax(w).
    def buggy(logw: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return RESAMPLERS["multinomial"](torch.softmax(logw, -1), u)

    counts = _counts(buggy, WEIGHTS.log(), 20000, 5, seed=1)
    expected = WEIGHTS.double() * counts.sum()
    assert stats.chisquare(counts.numpy(), expected.numpy()).pvalue < 1e-12


@pytest.mark.parametrize("name", ["systematic", "stratified"])
def test_low_variance_schemes_keep_counts_near_expectation(name: str) -> None:
    gen = torch.Generator().manual_seed(2)
    logw = torch.randn(200, 50, generator=gen)
    anc = RESAMPLERS[name](logw, torch.rand(200, 50, generator=gen))
    counts = torch.stack([torch.bincount(a, minlength=50) for a in anc]).double()
    expected = torch.softmax(logw, -1).double() * 50
    bound = 1.0 if name == "systematic" else 2.0  # systematic: floor or ceil of P w_j
    assert (counts - expected).abs().max() < bound + 1e-9


def test_systematic_draws_more_paths_than_particles() -> None:
    logw = WEIGHTS.log().expand(1, -1)
    anc = get_resampler("systematic")(logw, torch.full((1, 1000), 0.3))
    counts = torch.bincount(anc[0], minlength=5).double()
    assert anc.shape == (1, 1000)
    assert torch.allclose(counts / 1000, WEIGHTS.double(), atol=1e-3)


def test_unknown_scheme_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="multinomial, stratified, systematic"):
        get_resampler("residual")


def test_ess_bounds() -> None:
    assert ess(torch.zeros(1, 10)).item() == pytest.approx(10.0)
    assert ess(torch.tensor([[0.0, -1e9, -1e9]])).item() == pytest.approx(1.0)
