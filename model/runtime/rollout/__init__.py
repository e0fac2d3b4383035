"""A forecast's paths moved forward: on a CPU by compiled kernels (compiled: the driver, with
attention, readout, kernels and weights under it, jit their decorators), on a GPU in blocks of
steps captured as CUDA graphs (device); their noise from counter-based streams, drawn on the
host (normals) or on the device (device_normals) alike."""
