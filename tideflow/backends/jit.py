"""Generated CPU kernels: numba compiles Python functions written for it to native loops.

Importing this module does not import numba (that takes a while): `available()` only asks
whether it is installed and allowed (`TIDEFLOW_JIT=0` turns generated kernels off, for
debugging or to compare with the NumPy kernels). `jit(fn)` compiles `fn` on its first call,
with numba's cache on disk, so later processes load the machine code instead of compiling.
Every generated kernel has a NumPy kernel beside it, which runs when numba is unavailable.

Kernels compiled here may use 512-bit vectors on CPUs with AVX-512 (`_wide_vector_compiler`);
other numba code in the process keeps numba's defaults.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import warnings
from pathlib import Path

KERNEL_KEY = "cpu-jit"  # the `OpDef.kernels` key of generated CPU kernels


@functools.cache
def available() -> bool:
    """numba is installed and `TIDEFLOW_JIT` is not "0"."""
    if os.environ.get("TIDEFLOW_JIT", "1") == "0":
        return False
    return importlib.util.find_spec("numba") is not None


def jit(
    fn=None,
    *,
    fastmath: frozenset[str] | bool = frozenset({"contract"}),
    cache: bool = True,
    **options,
):
    """`fn` compiled by numba's `njit` on its first call (cached on disk unless `cache` is
    False, the GIL released). The default `fastmath` only contracts multiply-adds: results
    stay within float rounding of NumPy's, with NaN and inf kept; pass more flags where a
    kernel can afford them."""

    def wrap(fn):
        compiled = None

        @functools.wraps(fn)
        def call(*args):
            nonlocal compiled
            if compiled is None:
                import numba

                flags = set(fastmath) if not isinstance(fastmath, bool) else fastmath
                compiled = numba.njit(
                    nogil=True, fastmath=flags, pipeline_class=_wide_vector_compiler(), **options
                )(fn)
                if cache:
                    compiled._cache = _kernel_cache_class()(fn)  # as njit(cache=True) does
                with warnings.catch_warnings():
                    # NOTE: numba's own diagnostics while it compiles (pedantic IR checks on
                    # inlined code) are not the user's concern: errors under `-W error`
                    warnings.filterwarnings("ignore", module=r"numba\.")
                    return compiled(*args)
            return compiled(*args)

        return call

    return wrap if fn is None else wrap(fn)


@functools.cache
def _helpers_digest() -> str:
    """A digest of the sources of this package's kernels and the helpers they inline (vecmath,
    jit_kernels): numba's cache checks only the source file of the function it compiled."""
    package = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted([*package.glob("*.py"), *package.glob("jit_kernels/*.py")]):
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def _kernel_cache_class():
    """numba's disk cache of a function, keyed also by `_helpers_digest`. NOTE: without it, a
    kernel compiled before an edit of vecmath (inlined into it) keeps loading the old code
    from the cache: a change of vecmath.gelu32 went unseen by the GELU kernels."""
    from numba.core.caching import FunctionCache

    class KernelCache(FunctionCache):
        def _index_key(self, sig, codegen):
            return (*super()._index_key(sig, codegen), _helpers_digest())

    return KernelCache


# LLVM's function attribute that overrides the CPU's preferred vector width for one function
_PREFER_512_BIT = '"prefer-vector-width"="512"'


@functools.cache
def _wide_vector_compiler():
    """numba's default nopython compiler, except that the functions it lowers carry
    `_PREFER_512_BIT`. NOTE: LLVM tunes Intel's AVX-512 CPUs (Skylake-X to Emerald Rapids)
    to prefer 256-bit vectors, for the clock those once lost on 512-bit instructions; on
    Emerald Rapids our loops of float32 polynomials run faster with 512-bit vectors
    (benchmarks/vecmath.py, benchmarks/jit_kernels.py). A per-function attribute leaves the
    user's own numba code alone, where NUMBA_CPU_FEATURES would change every function in the
    process; LLVM ignores it on CPUs without AVX-512. The disk cache stays right: numba keys
    compiled code by CPU name and features, and the attribute is the same for every kernel."""
    from numba.core import compiler, compiler_machinery, lowering, typed_passes

    class WideVectorLower(lowering.Lower):
        def pre_lower(self):
            super().pre_lower()
            # NOTE: llvmlite models only LLVM's enum attributes and refuses the others by
            # name; a string attribute is printed as it is into the function's definition
            set.add(self.builder.function.attributes, _PREFER_512_BIT)

    @compiler_machinery.register_pass(mutates_CFG=True, analysis_only=False)
    class WideVectorLowering(typed_passes.NativeLowering):
        _name = "wide_vector_native_lowering"

        @property
        def lowering_class(self):
            return WideVectorLower

    class WideVectorCompiler(compiler.CompilerBase):
        def define_pipelines(self):
            pm = compiler.DefaultPassBuilder.define_nopython_pipeline(self.state)
            pm.passes = [
                (WideVectorLowering if cls is typed_passes.NativeLowering else cls, about)
                for cls, about in pm.passes
            ]
            pm.finalize()
            return [pm]

    return WideVectorCompiler
