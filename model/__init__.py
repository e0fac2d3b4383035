"""The SMC Transformer forecaster, in packages from the bottom up; each imports only from
itself and the packages before it (tests/test_layers.py):

    network     the SMC Transformer network and its config
    filtering   the particle filter: its noise, resampling, steps and forecast paths
    series      a series' state, its bytes and its online adaptation
    artifacts   saved models: artifacts, checkpoints, the exported graphs
    baselines   the benchmark's forecasters
    runtime     what the service and the CLI run: the runtimes and the model directories
"""
