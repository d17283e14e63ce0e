"""Generated CPU kernels (numba loops, `backends/jit.py`) of the hottest composite ops, one
module per op family. Each module's `KERNELS` maps an op name to `make(numpy_kernel)`, which
returns a kernel with the NumPy kernel's signature and results that runs the loop for float32
and float64 operands in the layouts it handles (bfloat16 too where `bfloat16.through_float32`
wraps it: computed in float32, rounded once) and calls `numpy_kernel` otherwise (float16,
integers, other layouts, sizes where NumPy is faster). `bfloat16.cast` converts float32 <->
bfloat16 in one loop. Importing this package does
not import numba; loops compile on their first call (then load from numba's disk cache).

This layer knows arrays only: `tideflow/ops/_generated.py` registers the kernels on the ops.
"""

from __future__ import annotations

from . import activation, attention, bfloat16, norm, optim, softmax

KERNELS = {
    **optim.KERNELS,
    **norm.KERNELS,
    **softmax.KERNELS,
    **activation.KERNELS,
    **bfloat16.KERNELS,
    **attention.KERNELS,
}
# the kernels that also write into given arrays, taking `out=` (`OpDef.out_kernels`)
WRITES_OUT = activation.WRITES_OUT | norm.WRITES_OUT | softmax.WRITES_OUT | bfloat16.WRITES_OUT
