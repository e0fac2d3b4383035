"""The particle filter of the SMC Transformer: noise (the keyed noise table), resampling,
filter (one step in named phases), compact (the step on the compact state), paths (forecast
paths from a compact state), inference (the filter over sequences, and its forecasts)."""
