"""The served default model's multistep intervals on series of known law
(training/quality/known_law.py), as `bench/bench_known_law.py` measures them on 500 series a
law: here the laws whose 80 % and 95 % intervals hold within 0.03 of nominal at steps 1, 6, 12
and 24 there (docs/quality.md, "Coverage on series of known law"), on fewer series, as a guard
that they keep doing so. The laws that do not yet are in docs/quality.md."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.special import ndtr

from model.runtime.runtime import Runtime
from training.quality.known_law import LAWS, Law

DEFAULT = Path(__file__).resolve().parents[3] / "artifacts" / "default"
SERIES, HISTORY, H, SAMPLES = 150, 320, 24, 500
LEVELS = [0.8, 0.95]
STEPS = np.array([1, 6, 12, 24])
# the bench's target, 0.03 from nominal, and 0.01 more: 150 series give a mean of the true
# probabilities (not of hits) whose standard error is about 0.01 at 80 % (the bench's 500
# about 0.005); the laws below measured within 0.03 of nominal on 500 series, white noise, the
# trend and the damped trend within 0.01 of that target at some step (the local linear trend
# holds there too, but its series' coverage at step 24 varies too much for 150 to tell)
TOLERANCE = 0.04
HOLDING = ("white noise", "AR(1)", "trend", "damped trend", "random walk")
# the random walk covers 0.84-0.85 at step 6 on 500 series (docs/quality.md: the floor of the
# spread lifts the narrow walks and leaves the wide), 0.858 here: guarded against widening more
LOOSER = {"random walk": 0.065}


@pytest.fixture(scope="module")
def runtime() -> Runtime:
    torch.set_num_threads(1)
    return Runtime.load(DEFAULT, backend="torch", device="cpu")


@pytest.mark.parametrize("law", [law for law in LAWS if law.name in HOLDING], ids=lambda x: x.name)
def test_intervals_hold_on_a_known_law(runtime: Runtime, law: Law) -> None:
    """Offline (from the history, as a stateless request) and online (after 24 updates), the
    mean probability the true law gives the 80 % and 95 % intervals at steps 1, 6, 12 and 24
    is within TOLERANCE of nominal (LOOSER's for the random walk; each series declared without
    a season)."""
    seed = LAWS.index(law)
    y, means = law.simulate(np.random.default_rng(seed), SERIES, HISTORY + 2 * H, H)
    sds = law.sds(y, H)
    states = runtime.create([v[:HISTORY, None] for v in y], levels=LEVELS, seasons=[0] * SERIES)
    for origin in (HISTORY, HISTORY + H):
        if origin > HISTORY:
            answered = runtime.update(states, [v[HISTORY:origin, None] for v in y], LEVELS)
            states = [s for s, _ in answered]
        forecasts = runtime.forecast(states, H, LEVELS, SAMPLES, seed=0)
        mean, sd = means[:, origin - 1][:, STEPS - 1], sds[:, origin - 1][:, STEPS - 1]
        for level in LEVELS:
            lo = np.stack([fc.intervals[level][0][STEPS - 1, 0] for fc in forecasts])
            hi = np.stack([fc.intervals[level][1][STEPS - 1, 0] for fc in forecasts])
            cover = (ndtr((hi - mean) / sd) - ndtr((lo - mean) / sd)).mean(axis=0)
            where = "offline" if origin == HISTORY else "online"
            assert np.abs(cover - level).max() <= LOOSER.get(law.name, TOLERANCE), (
                where, level, cover)
