"""What the service and the CLI run: runtime.py (Runtime, a model's series states, updates and
forecasts), and three sub-packages: backends (the filter update and the forecast steps run by
PyTorch or onnxruntime), rollout (a forecast's paths moved forward from series states, on a CPU or
a GPU, their noise, and the Forecaster that drives them), serving (the model directories, the
runtime that serves each, a baseline served stateless, and the protocol the service reads)."""
