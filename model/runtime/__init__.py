"""What the service and the CLI run: runtime (Runtime, a model's series states, updates and
forecasts) with backends, forecasting, scoring, scaling, adapter, gaps, predictive and inputs;
rollout (a forecast's paths moved forward, on a CPU or a GPU, and their noise); stateless (a
baseline served) with baseline_artifact; manifest (the model directories, and the runtime that
serves each)."""
