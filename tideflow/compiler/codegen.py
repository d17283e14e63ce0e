"""Generated loops for fused groups of elementwise nodes.

A group's loop is assembled from its members' scalar rules (`OpDef.scalar`, written beside each
op's definition): one Python function of the group's input arrays and output arrays that
walks the broadcast output once, computes every member on scalars (intermediates stay in
registers) and stores the group's outputs. numba compiles it (`backends/jit.py`).

- Broadcasting: output axes are collapsed where every operand broadcasts the same way, so a
  group of same-shape operands is one flat loop, a bias add a loop over rows and columns. An
  operand's element is loaded, and a member computed, in the outermost loop its operands
  vary in (per-row statistics once per row, not once per element).
- Dtypes: float32/float64, bool and integers; each member's result is cast to the dtype the
  IR declares for it, so values round as the unfused kernels' do. bfloat16 is computed in
  float32, as its NumPy kernels do: loaded from its bits (arrays pass as uint16 views),
  rounded once per member, stored as bits (vecmath's bf16_* functions). Constants (Python
  scalars among the operands, attributes) take the dtype of the member's operands, as NumPy's
  weak scalars do. Any other dtype, or a member without a rule for its dtypes, leaves the
  group on its NumPy kernels (`Unsupported`).
- Transcendentals: `MATH` names what each math function compiles to, in one place; float32
  calls go to `tideflow.backends.vecmath`'s vectorizable functions where that module has them
  (libm's stay scalar calls, which keep the loop from vectorizing).
- Cache: the source is its own key. It is written once to `cache_dir()` as
  `tf_<hash of the source>.py` and imported from there, so numba's on-disk cache (`cache=True`,
  kept beside the file) serves every later process: the source holds everything the machine
  code depends on (ops, attributes as constants, dtypes, broadcast pattern), but not the
  sizes, which the loop reads from its arrays.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import math
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..backends import jit
from ..framework import dtype as dtypes
from .ir import Node, Value

CODEGEN_VERSION = 1  # part of every source, so a change of the generator changes every key

# dtypes a generated loop computes in (bfloat16 computes in float32: `_np_dtype`); float16
# and complex stay on NumPy kernels
_DTYPES = {
    np.dtype(t): t.__name__
    for t in (
        np.float32,
        np.float64,
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
    )
}

# What each math function of the scalar rules compiles to: float32 calls go to the vectorizable
# function VECMATH32 names where `tideflow.backends.vecmath` defines it, the others to `MATH`.
VECMATH32 = {
    "exp": "exp32",
    "log": "log32",
    "tanh": "tanh32",
    "erf": "erf32",
    "expm1": "expm1_32",
    "log1p": "log1p32",
    "erfc": "erfc32",
}
# float32 functions of vecmath with no libm counterpart: rules call them through `g.fused`
FUSED32 = {"gelu": "gelu32", "gelu_grad": "gelu_grad32"}
MATH = {
    name: f"math.{name}"
    for name in (
        "exp",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sqrt",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
        "erf",
        "erfc",
        "atan2",
        "hypot",
        "copysign",
    )
}


# math functions numba compiles to LLVM intrinsics, which vectorize: not libm calls
_INTRINSICS = frozenset({"sqrt", "copysign"})


class Unsupported(Exception):
    """The group cannot be generated (a member without a rule, a dtype, an operand kind):
    it runs its members' NumPy kernels."""


def cache_dir() -> Path:
    """Where generated sources (and numba's cache of them) live: `$TIDEFLOW_KERNEL_CACHE`, or
    `tideflow/kernels` under `$XDG_CACHE_HOME` (default `~/.cache`)."""
    configured = os.environ.get("TIDEFLOW_KERNEL_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tideflow" / "kernels"


_vecmath_lock = threading.Lock()
_vecmath_state: list = []  # [(names, digest)] once looked up


def _vecmath() -> tuple[dict[str, str], str]:
    """`{function: vecmath function name}` for the float32 functions (of VECMATH32 and
    FUSED32) `tideflow.backends.vecmath` defines, and a digest of its source (generated sources name
    it: numba's cache does not see changes in the functions a kernel calls)."""
    with _vecmath_lock:
        if not _vecmath_state:
            names: dict[str, str] = {}
            digest = ""
            if importlib.util.find_spec("tideflow.backends.vecmath") is not None:
                module = importlib.import_module("tideflow.backends.vecmath")
                names = {n: v for n, v in (VECMATH32 | FUSED32).items() if hasattr(module, v)}
                digest = hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()[:16]
            _vecmath_state.append((names, digest))
        return _vecmath_state[0]


# -- the rules' helper ---------------------------------------------------------------------------
class Emitter:
    """What a scalar rule sees as `g`: the member's operand dtypes (`dtypes`, None for
    constants and absent operands), the dtype it computes in (`dtype`: its tensor operands',
    after promotion) and the dtype of its output (`out`), bfloat16 appearing as float32, and
    helpers that render constants and math calls."""

    def __init__(
        self, source: _Source, dtypes: tuple, dtype: np.dtype, out: np.dtype, bf16_exact: bool
    ) -> None:
        self._source = source
        self.dtypes = dtypes
        self.dtype = dtype
        self.out = out
        self._bf16_exact = bf16_exact

    @property
    def floating(self) -> bool:
        return self.dtype.kind == "f"

    @property
    def integral(self) -> bool:
        return self.dtype.kind in "iu"

    def c(self, value, dtype: np.dtype | None = None) -> str:
        """`value` as a constant of `dtype` (default: the computation dtype)."""
        return self._source.constant(
            value, np.dtype(dtype or self.dtype), bf16_exact=self._bf16_exact
        )

    def call(self, fn: str, *args: str) -> str:
        """The math function `fn` (a key of `MATH`) applied to `args`."""
        if fn not in MATH:
            raise Unsupported(f"no math function {fn!r}")
        return self._source.function(fn, self.dtype) + f"({', '.join(args)})"

    def fused(self, fn: str, *args: str) -> str | None:
        """vecmath's float32 function for a whole formula (a key of `FUSED32`: one accurate
        loop body, where the formula in math calls would round several times), applied to
        `args`; None where the member computes in another dtype (its rule then writes the
        formula)."""
        if self.dtype != np.float32 or fn not in _vecmath()[0]:
            return None
        return self._source.function(fn, self.dtype) + f"({', '.join(args)})"

    def max(self, a: str, b: str) -> str:
        """NumPy's maximum: nan if either is nan."""
        return f"({a} if {a} > {b} or {a} != {a} else {b})"

    def min(self, a: str, b: str) -> str:
        """NumPy's minimum: nan if either is nan."""
        return f"({a} if {a} < {b} or {a} != {a} else {b})"

    def truth(self, a: str, i: int) -> str:
        """Operand `i` (`a`) as a truth value: nonzero is True (nan too)."""
        dtype = self.dtypes[i]
        if dtype is not None and dtype.kind == "b":
            return a
        return f"({a} != {self.c(0, dtype) if dtype is not None else 0})"


class _Source:
    """The module being written: its imports and constants."""

    def __init__(self) -> None:
        self.constants: dict[str, str] = {}  # rendered value -> name
        self.imports: dict[str, str] = {}  # vecmath function -> its name
        self.libm: set[str] = set()  # math functions called from libm, one element at a time
        self.vecmath_digest = ""

    def constant(self, value, dtype: np.dtype, *, bf16_exact: bool = False) -> str:
        """`value` as a constant of `dtype`. With `bf16_exact` (a member on bfloat16 values)
        only values bfloat16 holds exactly: the NumPy kernels differ in whether they round a
        scalar to bfloat16 first (NumPy's weak scalars) or compute with it in float32."""
        if dtype not in _DTYPES:
            raise Unsupported(f"constant of dtype {dtype}")
        if isinstance(value, np.generic):
            value = value.item()
        if not isinstance(value, bool | int | float):
            raise Unsupported(f"constant {value!r}")
        if bf16_exact and not _exact_in_bf16(value):
            raise Unsupported(f"constant {value!r} is not a bfloat16 value")
        if dtype.kind == "b":
            return repr(bool(value))
        if dtype.kind == "f":
            v = float(value)
            text = repr(v) if math.isfinite(v) else f"float({str(v)!r})"
        else:
            if not float(value).is_integer():
                raise Unsupported(f"constant {value!r} of dtype {dtype}")
            text = repr(int(value))
        rendered = f"np.{_DTYPES[dtype]}({text})"
        return self.constants.setdefault(rendered, f"K{len(self.constants)}")

    def bf16(self, fn: str, arg: str) -> str:
        """A call of vecmath's bfloat16 conversion `fn`."""
        _, self.vecmath_digest = _vecmath()
        self.imports[fn] = fn
        return f"{fn}({arg})"

    def function(self, fn: str, dtype: np.dtype) -> str:
        if dtype == np.float32:
            names, digest = _vecmath()
            if fn in names:
                self.imports[fn] = names[fn]
                self.vecmath_digest = digest
                return names[fn]
        if fn not in _INTRINSICS:
            self.libm.add(fn)
        return MATH[fn]


# -- generation ----------------------------------------------------------------------------------
def _collapse(shape: tuple[int, ...], operand_shapes: Sequence[tuple[int, ...]]):
    """The output's loop axes: `shape` with its size-1 axes dropped and neighbouring axes
    merged where every operand is either whole or broadcast along both. Returns the loop
    axes' sizes and, per operand, which loop axes it is whole along."""
    ndim = len(shape)
    aligned = [(1,) * (ndim - len(s)) + tuple(s) for s in operand_shapes]
    sizes: list[int] = []
    patterns: list[tuple[bool, ...]] = []
    for axis, size in enumerate(shape):
        if size == 1:
            continue
        whole = tuple(s[axis] == size for s in aligned)
        if patterns and patterns[-1] == whole:
            sizes[-1] *= size
        else:
            sizes.append(size)
            patterns.append(whole)
    if not sizes:  # one element: a loop of one, every operand whole
        sizes, patterns = [1], [(True,) * len(operand_shapes)]
    flags = tuple(tuple(p[i] for p in patterns) for i in range(len(operand_shapes)))
    return tuple(sizes), flags


_BF16 = np.dtype(dtypes.bfloat16.np)
_BF16_BITS = np.dtype(np.uint16)  # how bfloat16 arrays reach a loop


def _np_dtype(value: Value) -> np.dtype:
    """The dtype the loop computes `value` in: its own, float32 for bfloat16."""
    dtype = np.dtype(value.dtype.np)
    if dtype == _BF16:
        return np.dtype(np.float32)
    if dtype not in _DTYPES:
        raise Unsupported(f"dtype {value.dtype.name} of %{value.id}")
    return dtype


def _exact_in_bf16(value: bool | int | float) -> bool:
    v = float(value)
    return math.isnan(v) or float(np.array(v).astype(_BF16)) == v


def _is_bf16(value: Value) -> bool:
    return value.dtype is dtypes.bfloat16


def _as_loop_array(a: np.ndarray) -> np.ndarray:
    """bfloat16 arrays reach the loop as their bits."""
    return a.view(_BF16_BITS) if a.dtype == _BF16 else a


class Generated:
    """A group's loop: `source` (a module defining `kernel(*outputs, *inputs)`), its `key`,
    and the shapes the arrays are viewed as: `in_shapes` per input, `loop_shape` for the
    outputs."""

    __slots__ = ("in_shapes", "key", "loop_shape", "out_dtypes", "out_shapes", "source")

    def __init__(self, source, in_shapes, loop_shape, out_shapes, out_dtypes) -> None:
        self.source = source
        self.key = hashlib.sha256(source.encode()).hexdigest()[:32]
        self.in_shapes = in_shapes
        self.loop_shape = loop_shape
        self.out_shapes = out_shapes
        self.out_dtypes = out_dtypes


def generate(
    members: Sequence[Node],
    inputs: Sequence[Value],
    outputs: Sequence[Value],
    *,
    libm: bool = False,
) -> Generated:
    """The loop computing `outputs` from `inputs` by the members' scalar rules (members in
    program order, all of the output shape). Raises `Unsupported` where a rule or dtype is
    missing, and, unless `libm`, where a member calls a math function that has no
    vectorizable form (libm's, one call per element, keep the loop scalar: slower than
    NumPy's SIMD loops for exp/erfc, so such groups stay on NumPy)."""
    shape = members[0].outputs[0].shape
    sizes, flags = _collapse(shape, [v.shape for v in inputs])
    depth_count = len(sizes)
    source = _Source()
    body: list[list[str]] = [[] for _ in range(depth_count + 1)]  # statements per loop depth
    name: dict[Value, str] = {}
    depth: dict[Value, int] = {}
    loop_index = [f"i{k}" for k in range(depth_count)]
    for j, (v, whole) in enumerate(zip(inputs, flags, strict=True)):
        _np_dtype(v)
        index = ", ".join(loop_index[k] if w else "0" for k, w in enumerate(whole))
        d = max((k + 1 for k, w in enumerate(whole) if w), default=0)
        name[v], depth[v] = f"x{j}", d
        load = f"a{j}[{index}]"
        body[d].append(f"x{j} = {source.bf16('bf16_widen', load) if _is_bf16(v) else load}")
    for k, node in enumerate(members):
        if len(node.outputs) != 1 or node.op.scalar is None:
            raise Unsupported(f"{node.op.name} has no scalar rule")
        (out,) = node.outputs
        out_dtype = _np_dtype(out)
        operand_dtypes = tuple(
            _np_dtype(a) if isinstance(a, Value) else None for a in node.operands
        )
        dtype = _computation_dtype(node, operand_dtypes, out_dtype)
        bf16 = _is_bf16(out) or any(isinstance(a, Value) and _is_bf16(a) for a in node.operands)
        args: list[str | None] = []
        d = 0
        for a in node.operands:
            if isinstance(a, Value):
                args.append(name[a])
                d = max(d, depth[a])
            elif a is None:
                args.append(None)
            else:
                args.append(source.constant(a, dtype, bf16_exact=bf16))
        g = Emitter(source, operand_dtypes, dtype, out_dtype, bf16_exact=bf16)
        expr = node.op.scalar(g, *args, **node.attrs)
        if expr is None:
            dtypes = ", ".join(str(t) for t in operand_dtypes if t is not None)
            raise Unsupported(f"{node.op.name} has no scalar rule for {dtypes}")
        if out_dtype.kind != "b":
            expr = f"np.{_DTYPES[out_dtype]}({expr})"
        if _is_bf16(out):
            expr = source.bf16("bf16_round", expr)
        # NOTE: names and comments by position, not value ids: equal groups, one source
        name[out], depth[out] = f"v{k}", d
        body[d].append(f"v{k} = {expr}  # {node.op.name}")
    if source.libm and not libm:
        raise Unsupported(f"calls libm's {', '.join(sorted(source.libm))} (no vectorizable form)")
    for j, v in enumerate(outputs):
        value = source.bf16("bf16_bits", name[v]) if _is_bf16(v) else name[v]
        body[depth_count].append(f"o{j}[{', '.join(loop_index)}] = {value}")
    return Generated(
        _module(source, members, len(inputs), len(outputs), body, loop_index),
        tuple(tuple(s if w else 1 for s, w in zip(sizes, f, strict=True)) for f in flags),
        sizes,
        tuple(v.shape for v in outputs),
        tuple(np.dtype(v.dtype.np) for v in outputs),
    )


def _computation_dtype(node: Node, dtypes: tuple, out: np.dtype) -> np.dtype:
    """The dtype of the member's (promoted) tensor operands, which its constants take."""
    positions = node.op.promote_args or range(len(dtypes))
    for i in positions:
        if i < len(dtypes) and dtypes[i] is not None:
            return dtypes[i]
    return out


def _module(source: _Source, members, n_in: int, n_out: int, body, loop_index) -> str:
    ops = ",".join(n.op.name for n in members)
    lines = [
        f"# tideflow generated kernel (codegen {CODEGEN_VERSION}): fused({ops})",
        "import math",
        "",
        "import numpy as np",
    ]
    if source.imports:
        names = ", ".join(sorted(set(source.imports.values())))
        lines += [
            f"from tideflow.backends import vecmath  # {source.vecmath_digest}",
            f"from tideflow.backends.vecmath import {names}",
            "",
            "vecmath.register()  # numba inlines them",
        ]
    lines.append("")
    lines += [f"{k} = {rendered}" for rendered, k in source.constants.items()]
    params = [f"o{j}" for j in range(n_out)] + [f"a{j}" for j in range(n_in)]
    lines += ["", "", f"def kernel({', '.join(params)}):"]
    indent = "    "
    lines.append(f"{indent}{', '.join(f'n{k}' for k in range(len(loop_index)))}, = o0.shape")
    for d, statements in enumerate(body):
        lines += [indent + s for s in statements]
        if d < len(loop_index):
            lines.append(f"{indent}for {loop_index[d]} in range(n{d}):")
            indent += "    "
    return "\n".join(lines) + "\n"


# -- loading and running -----------------------------------------------------------------------
_load_lock = threading.Lock()
_loaded: dict[str, Callable] = {}


def load(generated: Generated) -> Callable:
    """The compiled kernel of `generated` (one per key and process): its source is written
    to `cache_dir()` unless there already, imported, and compiled on its first call."""
    with _load_lock:
        fn = _loaded.get(generated.key)
        if fn is None:
            path = cache_dir() / f"tf_{generated.key}.py"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                # NOTE: written whole then renamed: processes sharing the cache never import
                # half a file, and an existing file keeps its time stamp, which numba's cache
                # index checks.
                tmp = path.with_name(f"{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_text(generated.source)
                os.replace(tmp, path)
            spec = importlib.util.spec_from_file_location(f"tideflow_kernel_{generated.key}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            # NOTE: numba's cache finds a function's globals through its module's name
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            # NOTE: numpy's error model: x / 0 is inf or nan, as in the NumPy kernels
            fn = jit.jit(module.kernel, error_model="numpy")
            _loaded[generated.key] = fn
        return fn


class GeneratedKernel:
    """`kernel(*input_arrays)`: the group's generated loop, returning its outputs (fresh
    arrays) as `FusedKernel` does, or written into `out=` (as NumPy's: the array of a single
    output, a tuple for several; C-contiguous, of their shapes and dtypes): the fused node's
    kernel and out kernel. If loading or compiling fails (a rule numba cannot type), the
    first call says why in `failure` and this and every later call run `fallback` (the
    members' NumPy kernels, on fresh arrays)."""

    def __init__(
        self,
        members: Sequence[Node],
        inputs: Sequence[Value],
        outputs: Sequence[Value],
        fallback: Callable,
        *,
        libm: bool = False,
    ) -> None:
        self.generated = generate(members, inputs, outputs, libm=libm)
        self._fallback = fallback
        self._fn: Callable | None = None
        self.failure: str | None = None
        self.compile_seconds: float | None = None  # the first call's load + compile

    @property
    def source(self) -> str:
        return self.generated.source

    @property
    def path(self) -> Path:
        return cache_dir() / f"tf_{self.generated.key}.py"

    def __call__(self, *arrays, out: np.ndarray | tuple[np.ndarray, ...] | None = None):
        if out is not None and not isinstance(out, tuple):
            out = (out,)
        fn = self._fn
        if fn is None:
            return self._first_call(arrays, out)
        return fn(arrays, out)

    def _first_call(self, arrays, out):
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                # NOTE: numba's own diagnostics (pedantic IR checks on large loops) are not
                # the user's concern: they would be errors under `-W error`
                warnings.filterwarnings("ignore", module=r"numba\.")
                compiled = load(self.generated)
                result = self._run(compiled, arrays, out)
        except Exception as exc:  # numba's typing and lowering errors, an unwritable cache
            self.failure = f"{type(exc).__name__}: {exc}"
            self._fn = self._run_fallback
            return self._run_fallback(arrays, out)
        finally:
            self.compile_seconds = time.perf_counter() - start
        self._fn = functools.partial(self._run, compiled)
        return result

    def _run_fallback(self, arrays, out):
        return self._fallback(*arrays)

    def _run(self, compiled: Callable, arrays, out):
        g = self.generated
        outs = out
        if outs is None:
            outs = [np.empty(s, d) for s, d in zip(g.out_shapes, g.out_dtypes, strict=True)]
        ins = zip(arrays, g.in_shapes, strict=True)
        compiled(
            *(_as_loop_array(o).reshape(g.loop_shape) for o in outs),
            *(_as_loop_array(np.ascontiguousarray(a)).reshape(s) for a, s in ins),
        )
        return outs[0] if len(outs) == 1 else tuple(outs)
