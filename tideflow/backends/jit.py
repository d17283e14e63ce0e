"""Generated CPU kernels: numba compiles Python functions written for it to native loops.

Importing this module does not import numba (that takes a while): `available()` only asks
whether it is installed and allowed (`TIDEFLOW_JIT=0` turns generated kernels off, for
debugging or to compare with the NumPy kernels). `jit(fn)` compiles `fn` on its first call,
with numba's cache on disk, so later processes load the machine code instead of compiling.
Every generated kernel has a NumPy kernel beside it, which runs when numba is unavailable.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import warnings

KERNEL_KEY = "cpu-jit"  # the `OpDef.kernels` key of generated CPU kernels


@functools.cache
def available() -> bool:
    """numba is installed and `TIDEFLOW_JIT` is not "0"."""
    if os.environ.get("TIDEFLOW_JIT", "1") == "0":
        return False
    return importlib.util.find_spec("numba") is not None


def jit(fn=None, *, fastmath: frozenset[str] | bool = frozenset({"contract"}), **options):
    """`fn` compiled by numba's `njit` on its first call (cached on disk, the GIL released).
    The default `fastmath` only contracts multiply-adds: results stay within float rounding
    of NumPy's, with NaN and inf kept; pass more flags where a kernel can afford them."""

    def wrap(fn):
        compiled = None

        @functools.wraps(fn)
        def call(*args):
            nonlocal compiled
            if compiled is None:
                import numba

                flags = set(fastmath) if not isinstance(fastmath, bool) else fastmath
                compiled = numba.njit(cache=True, nogil=True, fastmath=flags, **options)(fn)
                with warnings.catch_warnings():
                    # NOTE: numba's own diagnostics while it compiles (pedantic IR checks on
                    # inlined code) are not the user's concern: errors under `-W error`
                    warnings.filterwarnings("ignore", module=r"numba\.")
                    return compiled(*args)
            return compiled(*args)

        return call

    return wrap if fn is None else wrap(fn)
