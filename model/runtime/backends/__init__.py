"""Execution backends of the runtime (model/runtime/runtime.py): the same two steps run by
PyTorch or by onnxruntime.

Both take and return numpy arrays for the filter update (the runtime's batches are numpy: the
tensors of a model/filtering/filter.CompactState, flattened as the exported graph takes them) and
keep forecast paths in their own tensor type between steps. The filter update is
model/filtering/compact.compact_step (UpdateGraph), which returns the state after the step; forecast
paths start from the compact state (`start_paths`, PyTorch for both backends) and move by
model/filtering/filter.forecast_step, a block of steps at a time (`forecast_steps`): on the cpu,
the torch backend's `start_paths` returns the rollout of model/runtime/kernels/compiled.py (the
same samples to float32 rounding, a ring buffer of keys and values with the paths as columns),
whose compiled steps move the whole block in one call; elsewhere the forecast graph runs a step
at a time.

Paths are drawn from P particles (model/filtering/paths.py): the torch backend keeps them as
particles plus ancestors (`LazyPaths`, or the kernel's `Rollout`) through the first step, the
onnx backend gathers the N windows at the start.

base.py holds the protocol, the record a backend takes (`Particles`) and what both backends
share; torch_backend.py and onnx_backend.py the two backends.

Shapes: B batch, P particles, N paths, L window, D d_model, F inputs, O targets.
"""
