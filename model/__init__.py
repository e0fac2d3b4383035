"""The SMC Transformer forecaster, in packages from the bottom up; each imports only from
itself and the packages before it (tests/test_layers.py; docs/architecture.md maps them):

    network     the SMC Transformer network and its config
    filtering   the particle filter: its noise, resampling, steps, forecast paths, and the
                predictive laws it issues
    series      the per-series layer: a series' state and its bytes, its scaling, support and
                gaps, the scoring of each value, and its online adaptation
    artifacts   saved models: artifacts, checkpoints, the exported graphs
    baselines   the benchmark's forecasters
    runtime     what the service and the CLI run: the runtime, its backends, the rollout of
                forecast paths, and what is served
"""
