"""The compiling decorators of the rollout's kernels (model/runtime/rollout_kernels.py,
rollout_attention.py, rollout_readout.py): float32 loops that vectorize (fastmath), release
the GIL, never check bounds and divide as numpy does (no exception), compiled by numba on
first use into its cache (NUMBA_CACHE_DIR where the package's folder is read-only; a few
seconds the first time)."""

from __future__ import annotations

import numba

kernel = numba.njit(
    fastmath=True, nogil=True, cache=True, boundscheck=False, error_model="numpy"
)
inline = numba.njit(
    fastmath=True, nogil=True, cache=True, boundscheck=False, error_model="numpy",
    inline="always",
)
