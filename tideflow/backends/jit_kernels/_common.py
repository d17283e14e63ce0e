"""What the generated kernels share: the dtypes they are generated for, placeholders for
absent operands, constants of a dtype."""

from __future__ import annotations

import numpy as np

# NOTE: loops are generated for these; float16/bfloat16 (NumPy computes them in float32 and
# rounds once) and integers stay with the NumPy kernels.
FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

_EMPTY = {dt: np.empty(0, dt) for dt in FLOATS}


def empty_of(dt: np.dtype) -> np.ndarray:
    """An operand that a loop never reads (an absent weight, no momentum buffer): one array
    type per dtype, so None does not add a compiled specialization."""
    return _EMPTY[dt]


def consts(dt: np.dtype, *values: float) -> np.ndarray:
    """Scalars for a loop, rounded once to `dt`, as one array. NOTE: numba types a Python
    literal as float64 (or int64), and float32 combined with either computes in float64:
    float32 loops take every constant from such an array. One array is also cheaper to pass
    than many scalars (numba checks each argument's type)."""
    return np.array(values, dt)
