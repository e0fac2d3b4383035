"""Entity tags of the forecasts of stored series (GET /v1/series/{id}/forecast): a client that
sends an answer's tag back in If-None-Match gets 304 Not Modified, no path drawn, until the
series changes (RFC 9110, section 13.1.2)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from service.inputs import ForecastParams
from service.settings import Settings
from service.store import Loaded


def forecast_etag(
    series_id: str, rec: Loaded, model_version: str, params: ForecastParams, covariates: Any,
    settings: Settings,
) -> str:
    """The entity tag of a forecast: the series' state (its version, creation and seq), the
    model, the forecast's parameters and the settings that shape it (the per-series layer's)."""
    meta = rec.meta
    parts = (series_id, meta.version, meta.created_at, meta.seq, model_version,
             params.horizon, params.levels, params.n_samples, params.return_samples,
             repr(settings.adaptation),
             None if covariates is None else np.asarray(covariates, np.float64).tobytes())
    return '"' + hashlib.sha256(repr(parts).encode()).hexdigest()[:32] + '"'


def matches(header: str | None, tag: str) -> bool:
    """Whether an If-None-Match header (None: none sent) names `tag` (or is "*"); weak tags
    compare as strong ones, as RFC 9110 asks of If-None-Match."""
    if header is None:
        return False
    names = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in names or tag in names
