"""The kernels that move a forecast's paths: on a CPU compiled loops (compiled: the rollout,
with attention, readout, steps and weights under it, jit their decorators), on a GPU blocks of
steps captured as CUDA graphs (device); their noise from counter-based streams, drawn on the
host (normals) or on the device (device_normals) alike. A leaf of the runtime: it imports
nothing of the backends that call it nor of the forecast driver (model/runtime/rollout/)."""
