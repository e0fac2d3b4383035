"""Baselines of the benchmark and the SMC Transformer behind one Forecaster protocol."""

from model.baselines.base import Forecaster
from model.baselines.registry import Sizes, load_forecaster, make_forecaster, names, resolve

__all__ = ["Forecaster", "Sizes", "load_forecaster", "make_forecaster", "names", "resolve"]
