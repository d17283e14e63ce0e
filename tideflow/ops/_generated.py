"""The generated CPU kernels of `backends/jit_kernels`, registered on their ops under
`jit.KERNEL_KEY`; `framework.registry.kernel_for` prefers them where numba is available.

They live in the backends layer (arrays only, no tideflow imports) and are registered here,
the lowest layer that may look ops up: the ops' own modules stay free of backend code.
"""

from __future__ import annotations

from ..backends import jit
from ..backends.jit_kernels import KERNELS, WRITES_OUT
from ..framework.registry import get_op


def _register() -> None:
    for name, make in KERNELS.items():
        op = get_op(name)
        # NOTE: the generated kernel wraps the op's NumPy kernel, its fallback for what the
        # loops do not cover; this reads that kernel, it does not choose one (kernel_for does).
        kernel = make(op.kernels["cpu"])
        op.kernel(jit.KERNEL_KEY, out=kernel if name in WRITES_OUT else None)(kernel)


_register()
