"""`smct quality`: the served model against its ablation, ETS, ARIMA and a seasonal naive on
real series.

suite (the series and their evaluation parts), served (the model through the runtime),
ablation (the model's per-series layer around a random walk), peers (ETS and the seasonal
naive), arima (ARIMA), scores, run (one pass over the suite), checks (the acceptance checks),
report (the tables) and figures (the fan charts)."""
