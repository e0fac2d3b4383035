"""The counter-based normals of the forecast paths (model/runtime/kernels/normals.py): Philox4x32-10
against the reference distribution's known answers, the transform against the inverse normal
CDF at every uniform it can produce, the streams' law and independence, and the forecast's
draws as functions of (series, step) alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import ndtri

from model.runtime.kernels import normals
from model.runtime.kernels.normals import draw_noise

# Random123's known-answer vectors for Philox4x32-10 (its tests/kat_vectors): counter, key, out
KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize(("counter", "key", "want"), KAT)
def test_philox_gives_the_reference_known_answers(
    counter: tuple[int, ...], key: tuple[int, ...], want: tuple[int, ...]
) -> None:
    got = normals.philox_block(np.array(counter, np.uint32), np.array(key, np.uint32))
    assert tuple(int(v) for v in got) == want


def test_every_uniform_maps_to_the_inverse_normal_cdf_to_float32_precision() -> None:
    """All 2^23 values of a word's top bits: z = Phi^-1((w + 1/2) 2^-23) within 5e-7 max(1,
    |z|) (the log and Giles' polynomial are a few float32 roundings, 6e-8 each, from exact),
    symmetric about 0, and bounded by the extreme uniforms' quantiles (+-5.29)."""
    k = np.arange(2**23, dtype=np.uint32)
    z = normals.normals_of((k << np.uint32(9)) | np.uint32(0x1FF)).astype(np.float64)
    want = ndtri((k + 0.5) / 2**23)
    assert np.all(np.abs(z - want) <= 5e-7 * np.maximum(1.0, np.abs(want)))
    np.testing.assert_array_equal(z, -z[::-1])
    assert np.abs(z).max() == pytest.approx(-ndtri(0.5 / 2**23), rel=1e-6)


def test_a_stream_is_standard_normal_and_streams_are_uncorrelated() -> None:
    """Two million draws of one stream: mean and variance within 4 standard errors of 0 and 1,
    a Kolmogorov-Smirnov test at 0.001; streams of other keys, steps and parts (and the same
    stream's neighbouring numbers) correlate by less than 4 / sqrt(n)."""
    n = 2_000_000
    streams = {}
    for key, step, part in ((7, 0, 0), (8, 0, 0), (7, 1, 0), (7, 0, 2)):
        out = np.empty(n, np.float32)
        normals.fill(np.uint64(key), step, part, out)
        streams[key, step, part] = out.astype(np.float64)
    z = streams[7, 0, 0]
    assert abs(z.mean()) < 4 / np.sqrt(n)
    assert abs(z.var() - 1.0) < 4 * np.sqrt(2 / n)
    assert stats.kstest(z, "norm").pvalue > 1e-3
    for other in [*list(streams.values())[1:], np.roll(z, 1), np.roll(z, normals.CHUNK)]:
        assert abs(np.corrcoef(z, other)[0, 1]) < 4 / np.sqrt(n)


def test_a_forecast_step_draws_the_same_noise_whatever_is_drawn_with_it() -> None:
    """draw_noise: the noise of (series, step) is a function of the series' key and the step
    alone (blocks of steps, the batch, the horizon beyond), and the last step's q, k, v, never
    read, are left zero."""
    keys = np.array([11, 12], np.uint64)
    n, d, o = 50, 4, 1
    whole = draw_noise(keys, range(0, 4), 4, n, d, o)
    parts = [draw_noise(keys, range(0, 2), 4, n, d, o), draw_noise(keys, range(2, 4), 4, n, d, o)]
    for a, b in zip(whole, zip(*parts, strict=True), strict=True):
        assert torch.equal(a, torch.cat(b))
    alone = draw_noise(keys[1:], range(0, 4), 6, n, d, o)
    for a, b in zip(whole, alone, strict=True):
        assert torch.equal(a[:3, 1:], b[:3])
    assert not torch.equal(whole[0][:, 0], alone[0][:, 0])
    assert not whole[2][3].any() and alone[2][3].abs().sum() > 0
