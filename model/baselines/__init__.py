"""Baselines of the benchmark and the SMC Transformer behind one Forecaster protocol."""

from model.baselines.base import FitConfig, Forecaster
from model.baselines.registry import load_forecaster, make_forecaster, names, resolve

__all__ = ["FitConfig", "Forecaster", "load_forecaster", "make_forecaster", "names", "resolve"]
