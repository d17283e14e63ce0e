"""The scalar functions generated kernels call, chosen in one place (numba compiles each for
the argument's dtype: float32 stays float32).

NOTE: these are libm calls, one element at a time; NumPy's exp/log/tanh loops use SIMD and are
faster on large arrays. So loops made mostly of them run only below `SCALAR_MATH_LIMIT`
elements (measured crossover of softmax, float32 and float64: about 4096, see
benchmarks/jit_kernels.py), and GELU (erfc/tanh per element: 3-5x slower than NumPy's) is not
registered. Vectorizable float32 versions (`backends/vecmath.py`) lift both limits.
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
