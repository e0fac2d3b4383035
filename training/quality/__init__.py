"""`smct quality`: the served model against ETS and a seasonal naive on real series.

suite (the series and their evaluation parts), served (the model through the runtime), peers
(ETS and the seasonal naive), scores, run (one pass over the suite), checks (the acceptance
checks), report (the tables) and figures (the fan charts)."""
