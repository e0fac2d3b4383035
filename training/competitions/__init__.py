"""The forecasting competitions (M1, M3, Tourism): their series, scored zero-shot as fev scores
the published models, and the real series that training may use.

- data.py: the competitions' series by frequency, with the competitions' horizons and seasons
- scores.py: fev's WQL and MASE, the intervals' coverage by step, sMAPE
- forecasters.py: the served model (and its ablation) and statsforecast's peers on one task
- published.py: the published zero-shot rows of fev's results
- run.py: a model's table beside its ablation, the peers and the published rows
"""
