"""The libm functions generated kernels call, chosen in one place (numba compiles each for
the argument's dtype: float32 stays float32).

NOTE: these are libm calls, one element at a time, where NumPy's exp/log/tanh loops use SIMD.
So float64 loops made mostly of them run only below `SCALAR_MATH_LIMIT` elements (the
crossover `benchmarks/jit_kernels.py` measures for softmax), and GELU's float64 forward stays
with NumPy. float32 loops call `backends/vecmath.py`'s vectorizable functions instead.
"""

from __future__ import annotations

import math

import numpy as np

exp = np.exp
log = np.log
tanh = np.tanh
sqrt = np.sqrt
erfc = math.erfc

VECTORIZED = False  # exp/log/tanh/erfc above compile to vector code
SCALAR_MATH_LIMIT = 4096  # elements: NumPy's SIMD loops win above this with scalar math
