"""The ablation of `smct quality`: the served model's per-series layer around a network that
forecasts the last value, to tell what the trained network adds to it.

The ablation artifact has the source artifact's configuration (with `skip`), particle count,
scaling and features, and the network of model.network.smc_transformer.random_walk: readout
G_obs = 0, skip a = 1, no lag or log-scale terms, so that its one-step law is
N(X_{t-1}, Sigma_obs) in the series' scaled units, Sigma_obs the source network's own. The
runtime wraps it in the same per-series layer as the model (docs/adaptation.md: the scaling,
the spread and coverage corrections, the mean's regression on the lagged values, the seasonal
profile and the trend) and the quality suite runs it through the same served path
(training.quality.served). What the model gains over it is the trained network's.

It is exported once per source artifact (its model_id) into
$XDG_CACHE_HOME/smct/ablation/ (default ~/.cache/smct/ablation/) and read from there after.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from model.artifacts.artifact import Artifact
from training.cache import cache_dir

log = logging.getLogger(__name__)
VERSION = 1  # of the construction: a change builds the cached artifacts anew


def ablation_artifact(source: Path, cache: Path | None = None) -> Path:
    """The directory of the ablation artifact of the artifact at `source`, exported into
    `cache` (default: ~/.cache/smct/ablation, training/cache.py) the first time."""
    from model.artifacts.export import export_artifact
    from model.network.smc_transformer import GaussianObservation, random_walk

    art = Artifact.open(source)
    out = (cache or cache_dir("ablation")) / f"{art.model_id[:32]}-v{VERSION}"
    if (out / "manifest.json").is_file():
        return out
    manifest = art.manifest
    obs = art.load_model().obs
    if not isinstance(obs, GaussianObservation):
        raise ValueError(f"{source}: the ablation needs a gaussian observation model")
    sigma_obs = float(obs.sigma_obs.mean())
    network = random_walk(replace(art.config, skip=True), sigma_obs)
    log.info("exporting the ablation of %s to %s", source, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    export_artifact(
        network, out, particles=int(manifest["particles"]), scaling=manifest["scaling"],
        features=manifest["features"], metrics={},
        training={"ablation_of": art.model_id, "sigma_obs": sigma_obs},
        threshold=float(manifest["filter"]["threshold"]), overwrite=True,
    )
    return out
