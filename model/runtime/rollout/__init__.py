"""A forecast's paths moved forward: the Forecaster that drives them (forecaster), through a
backend (model/runtime/backends/) whose kernels move them (model/runtime/kernels/)."""
