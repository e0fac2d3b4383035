"""The generated series of known law (training/quality/known_law.py): the true h-step law each
states, against the values its own simulation gives after a point."""

from __future__ import annotations

import numpy as np
import pytest

from training.quality import known_law
from training.quality.known_law import LAWS, Law

SERIES, ORIGIN, H = 4000, 30, 24


@pytest.mark.parametrize("law", LAWS, ids=lambda law: law.name)
def test_the_true_law_is_the_simulations(law: Law) -> None:
    """Over 4,000 series the errors of the values h = 1..24 steps after a point, less the true
    mean there, have mean 0 (within 4 standard errors) and the true standard deviation (within
    5 %; its standard error is about 1.1 %): the damped trend's, the local linear trend's and the
    seasonal random walk's variance formulas among them."""
    y, means = law.simulate(np.random.default_rng(1), SERIES, ORIGIN + H + 1, H)
    sd = law.sds(y, H)[0, ORIGIN]  # (H,): the same for every series after a point
    errors = y[:, ORIGIN + 1 : ORIGIN + H + 1] - means[:, ORIGIN]  # (S, H)
    assert np.all(np.abs(errors.mean(axis=0)) < 4.0 * sd / np.sqrt(SERIES))
    np.testing.assert_allclose(errors.std(axis=0), sd, rtol=0.05)


def test_the_damped_variance_grows_as_its_weights() -> None:
    """sd_1 = 1, sd_2^2 = 1 + (alpha + beta phi)^2, and the weights tend to alpha + beta phi /
    (1 - phi): 1.4 for (0.5, 0.1, 0.9)."""
    alpha, beta, phi = known_law.DAMPED
    sd = known_law.damped_sd(400)
    assert sd[0] == 1.0
    assert sd[1] ** 2 == pytest.approx(1.0 + (alpha + beta * phi) ** 2)
    assert sd[-1] ** 2 - sd[-2] ** 2 == pytest.approx((alpha + beta * phi / (1 - phi)) ** 2)
