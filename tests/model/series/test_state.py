"""The series state: bytes round trip, size, exact results after a round trip, bad bytes."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import numpy as np
import pytest

from model.runtime.runtime import Runtime, UpdateResult
from model.series.state import SeriesState
from model.series.state_bytes import StateFormatError
from model.series.trend import ERROR_STEPS, Trend


def _equal_results(a: list[UpdateResult], b: list[UpdateResult]) -> bool:
    def flat(r: UpdateResult) -> list[Any]:
        out: list[Any] = []
        for f in dataclasses.fields(r):
            v = getattr(r, f.name)
            if isinstance(v, dict):
                v = sorted((k, np.asarray(x).tolist()) for k, x in v.items())
            elif isinstance(v, np.ndarray):
                v = v.tolist()
            out.append(v)
        return out

    return [flat(r) for r in a] == [flat(r) for r in b]


def test_round_trip_is_exact_and_small(rt_torch: Runtime, ar_series: Any) -> None:
    """P = 100, window 24, one feature: a few kB (the float32 K/V window is 600 kB at d = 32)."""
    rt = Runtime.load(rt_torch.artifact.path, backend="torch", particles=100)
    (state,) = rt.create(ar_series(1, 40))
    blob = state.to_bytes()
    assert len(blob) <= 16 * 1024
    # header, scaling, x, observed mask (24 bits), lineage, w, then the sections of the fields
    # it has (a section's head: tag, dtype, ndim, its shape): the spread factor (O = 1), its
    # weight, the series' own law (O = 1, 12 fields), the growth of its errors (O = 1, 6), crc
    assert len(blob) == (
        64 + 16 + 24 * 4 + 3 + 100 * 23 + 100 * 4 + (5 + 4) + (3 + 4) + (7 + 96) + (7 + 24) + 4
    )
    back = SeriesState.from_bytes(blob)
    assert back == state and back.to_bytes() == blob
    assert (back.model_id, back.t, back.n_particles, back.ess) == (
        state.model_id,
        40,
        100,
        state.ess,
    )


def test_wide_ancestor_indices_and_short_histories(rt_torch: Runtime, ar_series: Any) -> None:
    rt = Runtime.load(rt_torch.artifact.path, backend="torch", particles=300)
    states = rt.create([ar_series(1, 5)[0], ar_series(1, 2, seed=1)[0]])
    for s in states:
        assert SeriesState.from_bytes(s.to_bytes()) == s
    assert len(states[0].to_bytes()) == (
        # the spread factor's weight still the prior's (its value of none): not written
        64 + 16 + 5 * 4 + 1 + 300 * 4 * 2 + 300 * 4 + (5 + 4) + (7 + 96) + 4
    )


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_update_after_a_round_trip_is_identical(
    backend: str, rt_torch: Runtime, rt_onnx: Runtime, ar_series: Any
) -> None:
    rt = rt_torch if backend == "torch" else rt_onnx
    states = rt.create(ar_series(3, 30))
    observations = [np.array([[0.5], [np.nan], [-0.2]]), np.array([[1.0]]), np.zeros((0, 1))]
    direct = rt.update(states, observations, [0.8, 0.95])
    restored = [SeriesState.from_bytes(s.to_bytes()) for s in states]
    again = rt.update(restored, observations, [0.8, 0.95])
    for (s1, r1), (s2, r2) in zip(direct, again, strict=True):
        assert s1 == s2 and s1.to_bytes() == s2.to_bytes()
        assert _equal_results(r1, r2)
    f1 = rt.forecast([s for s, _ in direct], 4, [0.9], 50, return_samples=True)
    f2 = rt.forecast([s for s, _ in again], 4, [0.9], 50, return_samples=True)
    assert all(np.array_equal(a.samples, b.samples) for a, b in zip(f1, f2, strict=True))


def test_states_are_immutable(rt_torch: Runtime, ar_series: Any) -> None:
    (state,) = rt_torch.create(ar_series(1, 10))
    with pytest.raises(ValueError):
        state.logw[0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.t = 3  # type: ignore[misc]


def test_bad_bytes_raise_state_format_error(rt_torch: Runtime, ar_series: Any) -> None:
    (state,) = rt_torch.create(ar_series(1, 10))
    blob = state.to_bytes()
    flipped = bytearray(blob)
    flipped[100] ^= 0x40
    newer = blob[:4] + struct.pack("<H", SeriesState.FORMAT_VERSION + 1) + blob[6:]
    cases = {
        "too short": blob[:10],
        "bad magic": b"XXXX" + blob[4:],
        "version": newer,
        "has .* bytes, its header implies": blob[:120],  # cut inside the particles
        "checksum": bytes(flipped),
        "checksum mismatch": blob + b"\0",
    }
    for message, data in cases.items():
        with pytest.raises(StateFormatError, match=message):
            SeriesState.from_bytes(data)
    assert issubclass(StateFormatError, ValueError)


def _sections(state: SeriesState) -> SeriesState:
    """`state` without the fields added since the last format before sections (version 11):
    the growth of its errors."""
    return dataclasses.replace(state, error_growth=np.zeros((0, len(ERROR_STEPS)), np.float32))


def _bare(state: SeriesState) -> SeriesState:
    """`state` without its weighted moments (written as version 5: no odds, trend or moments)."""
    return dataclasses.replace(_sections(state), marginal=np.zeros(0))


def _older(state: SeriesState, version: int) -> SeriesState:
    """`state` written in an older format: 4 has no correction of the mean, 3 no season either,
    2 no adaptation block either, 1 no observed mask either (none has the moments)."""
    import zlib

    from model.series.state_bytes import HEAD
    from tests.model.series import old_states

    blob = old_states.encode(_bare(state))
    n, f = min(state.t, state.window), state.n_features
    adaptation = 6 + 4 * len(state.spread_factor) + 8 * len(state.cover_levels)
    o, j = state.mean_coef.shape
    mean = 2 + 4 * o * (j + j * (j + 1) // 2 + 1) + 3 + 4 * state.profile.size
    body = bytearray(blob[: -4 - mean - (2 if version < 4 else 0) - (
        adaptation if version < 3 else 0
    )])
    struct.pack_into("<H", body, 4, version)
    if version == 1:
        cut = HEAD.size + 16 * f + 4 * n * f  # header, loc, scale, x_hist: then the mask
        body = body[:cut] + body[cut + (n * f + 7) // 8 :]
    return SeriesState.from_bytes(bytes(body) + struct.pack("<I", zlib.crc32(body)))


def test_older_states_are_still_read_version_3(rt_torch: Runtime, ar_series: Any) -> None:
    """A version 3 state (no season) reads as the same state with no season (and so no
    seasonal profile), a version 4 one (no correction of the mean, no profile) as the same
    state without its profile."""
    (state,) = rt_torch.create(ar_series(1, 40), levels=[0.8], seasons=[12])
    # an AR series has no season to speak of (its profile shrinks to none): give it one
    state = dataclasses.replace(state, profile=np.linspace(-1.0, 1.0, 12)[:, None])
    assert state.season == 12 and SeriesState.from_bytes(state.to_bytes()) == state
    none = np.zeros((0, 0), np.float32)
    assert _older(state, 3) == dataclasses.replace(_bare(state), season=0, profile=none)
    assert _older(state, 4) == dataclasses.replace(_bare(state), profile=none)


@pytest.mark.parametrize("version", [1, 2])
def test_older_states_are_still_read(version: int, rt_torch: Runtime, ar_series: Any) -> None:
    """States stored by older formats (in Redis across an upgrade) are read: version 1 with
    every valid lag observed, both with no adaptation yet (the trained Sigma_obs, no level
    monitored); they take updates and are written in the current format."""
    (state,) = rt_torch.create(ar_series(1, 40), levels=[0.8])
    old = _older(state, version)
    assert old.observed.all()  # this history had no missing value
    assert len(old.spread_factor) == 0 and len(old.cover_levels) == 0
    assert dataclasses.replace(
        old, spread_factor=state.spread_factor, spread_weight=state.spread_weight,
        cover_levels=state.cover_levels, cover_alpha=state.cover_alpha,
    ) == _bare(state)
    ((new, _),) = rt_torch.update([old], [np.array([[0.2]])], [0.8])
    assert new.t == 41 and SeriesState.from_bytes(new.to_bytes()) == new
    assert len(new.spread_factor) == 1 and new.cover_levels.tolist() == [np.float32(0.8)]


def test_an_observed_mask_of_the_wrong_shape_is_refused(rt_torch: Runtime, ar_series: Any) -> None:
    (state,) = rt_torch.create(ar_series(1, 10))
    names = ("model_id", "seed", "t", "x_hist", "lineage", "logw", "loc", "scale",
             "spread_factor", "spread_weight", "marginal")
    fields = {f: getattr(state, f) for f in names}
    with pytest.raises(ValueError, match="inconsistent state shapes"):
        SeriesState(**fields, observed=np.ones((state.window, 2), bool))
    assert SeriesState(**fields, observed=state.observed) == state


def _every_field(rt_torch: Runtime, ar_series: Any) -> SeriesState:
    """A state holding every field of the per-series layer."""
    (state,) = rt_torch.create(ar_series(1, 40), levels=[0.8, 0.95], seasons=[4])
    return dataclasses.replace(
        state, profile=np.linspace(-1.0, 1.0, 4)[:, None], pending=3,
        trend=Trend(*np.array([[0.9], [0.1], [0.25], [2.0]])).record(),
        mean_coef=np.ones((1, 2), np.float32),
        mean_cov=np.eye(2, dtype=np.float32)[None], mean_noise=np.ones(1, np.float32),
        mean_odds=np.full(1, 0.5, np.float32), spread_weight=3.5,
    )


def test_every_field_of_the_layer_is_a_section_and_reads_back(
    rt_torch: Runtime, ar_series: Any
) -> None:
    """Each field of the per-series layer that a state has is a tagged section; one at its
    value of none is not written and reads as none; the last format before sections reads as
    the same state, which is then written in sections."""
    from model.series import state_fields
    from tests.model.series import old_states

    state = _every_field(rt_torch, ar_series)
    blob = state.to_bytes()
    assert struct.unpack_from("<H", blob, 4)[0] == SeriesState.FORMAT_VERSION == 12
    assert SeriesState.from_bytes(blob) == state
    none = dataclasses.replace(state, pending=0, trend=np.zeros(0))
    assert len(none.to_bytes()) == len(blob) - (3 + 2) - (3 + 4 + 32)  # pending, trend
    assert SeriesState.from_bytes(none.to_bytes()) == none
    last = old_states.encode(state)  # version 11
    assert struct.unpack_from("<H", last, 4)[0] == 11
    assert SeriesState.from_bytes(last) == _sections(state)
    assert SeriesState.from_bytes(SeriesState.from_bytes(last).to_bytes()) == _sections(state)
    declared = {f.name for f in (*state_fields.PARTICLES, *state_fields.LAYER)}
    assert declared | {"model_id", "seed", "t"} == {f.name for f in dataclasses.fields(state)}
    # the state declares no field of its own: each is one line of the table
    assert dataclasses.fields(SeriesState) == dataclasses.fields(state_fields.StateFields)
    assert len(state_fields.BY_TAG) == len(state_fields.LAYER)  # a tag a field


def test_a_section_of_a_newer_field_is_skipped_and_a_cut_one_refused(
    rt_torch: Runtime, ar_series: Any
) -> None:
    """A reader skips a section whose tag it does not know (a field added since: no new
    version), and refuses a section cut short."""
    import zlib

    state = _every_field(rt_torch, ar_series)
    body = state.to_bytes()[:-4] + struct.pack("<BBBHH", 250, 2, 2, 1, 3) + bytes(24)
    newer = body + struct.pack("<I", zlib.crc32(body))
    assert SeriesState.from_bytes(newer) == state
    cut = body[:-8]
    with pytest.raises(StateFormatError, match="cut short"):
        SeriesState.from_bytes(cut + struct.pack("<I", zlib.crc32(cut)))


def test_a_batch_stacks_and_unstacks_every_field_by_the_table(
    rt_torch: Runtime, ar_series: Any
) -> None:
    """StateBatch has one field a table row (and the seed and step); a state with every field
    and one with none of them stack together (the one without takes each field's fill: ones
    for the spread, the model's prior for the mean's correction, NaN past its levels, zeros
    past its season) and come back from the batch as they went in."""
    from model.series import state_fields
    from model.series.state import StateBatch

    full = _every_field(rt_torch, ar_series)
    (plain,) = rt_torch.create(ar_series(1, 40))
    bare = dataclasses.replace(
        plain, spread_factor=np.zeros(0), cover_levels=np.zeros(0), cover_alpha=np.zeros(0),
        mean_coef=np.zeros(0), mean_cov=np.zeros(0), mean_noise=np.zeros(0),
        mean_odds=np.zeros(0), trend=np.zeros(0), marginal=np.zeros(0),
        error_growth=np.zeros((0, len(ERROR_STEPS)), np.float32),
    )
    names = list(StateBatch.COLUMNS)
    declared = [f.name for f in (*state_fields.ARRAY_FIELDS, *state_fields.SCALAR_FIELDS)]
    assert sorted(names) == sorted(["seed", "t", *declared])
    batch = StateBatch.of([full, bare], 1, 2)
    assert batch.profile.shape == (2, 4, 1) and not batch.profile[1].any()
    assert np.isnan(batch.cover_levels[1]).all() and batch.spread_factor[1].tolist() == [1.0]
    assert batch.mean_cov[1].any() and not batch.trend[1]["phi"].any()  # the prior; none
    assert full.error_growth.any() and not batch.error_growth[1].any()  # none: no floor
    assert batch.state(0, full.model_id) == full
    back = batch.state(1, bare.model_id)
    # a series' spread factors and the mean's prior, once stacked, are its own
    assert back == dataclasses.replace(
        bare, spread_factor=np.ones(1), mean_coef=batch.mean_coef[1],
        mean_cov=batch.mean_cov[1], mean_noise=batch.mean_noise[1], mean_odds=np.zeros(1),
    )


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("trend", np.zeros((1, 4)), r"trend must be \(O\)"),  # a packed row: no record
        ("trend", np.zeros(2, Trend(*np.zeros((4, 1))).record().dtype), r"trend must be \(O\)"),
        ("mean_odds", np.zeros(2, np.float32), r"mean_odds must be \(O\)"),
        ("profile", np.zeros(4), r"profile must be \(M O\)"),
        ("cover_alpha", np.zeros(1), r"cover_alpha must be \(K\)"),
        ("cover_alpha", np.zeros(0), "two vectors of one length"),
        ("mean_noise", np.zeros(0), "the mean's correction"),
        ("error_growth", np.zeros((1, 5), np.float32), r"error_growth must be \(O 6\)"),
    ],
)
def test_a_field_off_its_declared_shape_is_refused(
    rt_torch: Runtime, ar_series: Any, field: str, value: np.ndarray, message: str
) -> None:
    """Each array has its row's axes, a letter one size across the fields a series has (O:
    the targets), within the bytes' limits; the mean's correction's arrays come together."""
    state = _every_field(rt_torch, ar_series)
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(state, **{field: value})
    (plain,) = rt_torch.create(ar_series(1, 40))
    with pytest.raises(ValueError, match="O is at most 255"):  # the older formats' u8 count
        dataclasses.replace(plain, spread_factor=np.ones(256), marginal=np.zeros(0),
                            error_growth=np.zeros((0, len(ERROR_STEPS)), np.float32))
