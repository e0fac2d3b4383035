"""The compiling decorators of the rollout's kernels (model/runtime/kernels/steps.py,
attention.py, readout.py, normals.py): float32 loops that vectorize (the fast
math flags but for reassociation, which would undo the order of operations that keeps
Cody and Waite's reductions exact and is not needed: no loop reduces across paths), release
the GIL, never check bounds and divide as numpy does (no exception), compiled by numba on
first use into its cache (NUMBA_CACHE_DIR where the package's folder is read-only; a few
seconds the first time)."""

from __future__ import annotations

import numba

FAST_MATH = {"nnan", "ninf", "nsz", "arcp", "contract", "afn"}
kernel = numba.njit(
    fastmath=FAST_MATH, nogil=True, cache=True, boundscheck=False, error_model="numpy"
)
inline = numba.njit(
    fastmath=FAST_MATH, nogil=True, cache=True, boundscheck=False, error_model="numpy",
    inline="always",
)
