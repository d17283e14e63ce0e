"""PyTorch's top-level utilities that programs call outside any model: type queries
(`is_tensor`, `numel`), dtype limits (`finfo`, `iinfo`), math constants, runtime switches
(threads, matmul precision, determinism, printing), `cdist`, and `compile`.

They exist so that unmodified PyTorch scripts (see `tideflow.mock_torch`) run. Switches that
have no effect on NumPy kernels are recorded and read back, and their docstrings say so.
"""

from __future__ import annotations

import math
import os
import warnings

import ml_dtypes

from .framework import dtype as dtypes
from .framework.errors import DTypeError, ShapeError, TideflowError
from .framework.printing import set_printoptions
from .framework.tensor import Tensor
from .ops.binary import where
from .ops.creation import ones_like
from .ops.shape import cat

__all__ = [
    "are_deterministic_algorithms_enabled",
    "can_cast",
    "cdist",
    "compile",
    "e",
    "finfo",
    "get_float32_matmul_precision",
    "get_num_threads",
    "iinfo",
    "inf",
    "is_deterministic_algorithms_warn_only_enabled",
    "is_floating_point",
    "is_tensor",
    "nan",
    "newaxis",
    "numel",
    "pi",
    "result_type",
    "set_float32_matmul_precision",
    "set_num_threads",
    "set_printoptions",
    "use_deterministic_algorithms",
]

inf = math.inf
nan = math.nan
pi = math.pi
e = math.e
newaxis = None  # `x[:, flow.newaxis]` inserts a dim, as `None` does


# -- type queries --------------------------------------------------------------------------
def is_tensor(obj) -> bool:
    """Whether `obj` is a tideflow tensor (global tensors and Parameters included).

    >>> flow.is_tensor(flow.zeros(2)), flow.is_tensor([0.0, 0.0])
    (True, False)
    """
    return isinstance(obj, Tensor)


def _tensor_arg(fn: str, input) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}(): argument 'input' must be a Tensor, not {type(input).__name__}")
    return input


def is_floating_point(input) -> bool:
    """Whether the tensor's dtype is a floating dtype (float16, bfloat16, float32, float64).

    >>> flow.is_floating_point(flow.zeros(2)), flow.is_floating_point(flow.arange(2))
    (True, False)
    """
    return _tensor_arg("is_floating_point", input).dtype.is_floating_point


def numel(input) -> int:
    """The number of elements of the tensor.

    >>> flow.numel(flow.zeros(2, 3))
    6
    """
    return _tensor_arg("numel", input).numel()


# -- dtype limits --------------------------------------------------------------------------
def _dtype_arg(fn: str, value) -> dtypes.DType:
    if not isinstance(value, dtypes.DType):
        raise TypeError(f"{fn}(): expected a tideflow dtype, got {type(value).__name__}")
    return value


# -- promotion -----------------------------------------------------------------------------
def result_type(tensor1, tensor2) -> dtypes.DType:
    """The dtype an op on these operands (tensors or Python numbers) computes in, by
    PyTorch's promotion: dimensioned tensors over 0-d ones over numbers within a category.

    >>> flow.result_type(flow.tensor([1, 2]), 1.5), flow.result_type(flow.ones(2), 1j)
    (tideflow.float32, tideflow.complex64)
    """
    groups: tuple[list, list, list] = ([], [], [])
    for operand in (tensor1, tensor2):
        if isinstance(operand, Tensor):
            groups[0 if operand.ndim else 1].append(operand.dtype)
        elif isinstance(operand, bool | int | float | complex):
            groups[2].append(operand)
        else:
            raise TypeError(
                f"result_type(): expected a Tensor or a number, got {type(operand).__name__}"
            )
    return dtypes.result_type(*groups)


def can_cast(from_, to) -> bool:
    """Whether PyTorch lets a result of dtype `from_` be written into a tensor of dtype `to`:
    never into a lower category (complex into real, floating into integer, numbers into
    bool).

    >>> flow.can_cast(flow.float64, flow.int32), flow.can_cast(flow.int32, flow.cfloat)
    (False, True)
    """
    return _dtype_arg("can_cast", from_).category <= _dtype_arg("can_cast", to).category


class finfo:
    """The limits of a floating dtype (the default dtype when none is given), as
    `torch.finfo` gives them: `bits`; `eps`, the gap between 1 and the next value; `max`,
    `min`; `tiny` = `smallest_normal`, the smallest positive normal value; `resolution`,
    10 ** -(decimal digits of precision); `dtype`, the dtype's name.

    >>> flow.finfo(flow.bfloat16).eps
    0.0078125
    >>> flow.finfo(flow.float16)
    finfo(resolution=0.001, min=-65504, max=65504, eps=0.000976562, smallest_normal=6.10352e-05, tiny=6.10352e-05, dtype=float16)
    """  # noqa: E501

    __slots__ = ("bits", "dtype", "eps", "max", "min", "resolution", "smallest_normal", "tiny")

    def __init__(self, type=None) -> None:
        dt = dtypes.get_default_dtype() if type is None else _dtype_arg("finfo", type)
        dt = dtypes.to_real(dt)  # a complex dtype's parts: finfo(cfloat) is float32's
        if not dt.is_floating_point:
            raise TypeError(
                f"finfo(): requires a floating point dtype, got {dt!r}; use tideflow.iinfo "
                "for integer dtypes"
            )
        info = ml_dtypes.finfo(dt.np)  # NumPy's finfo, extended to bfloat16
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.smallest_normal = self.tiny = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)  # exactly 1e-06, not float32(1e-06)
        self.dtype = dt.name

    def __eq__(self, other) -> bool:
        if not isinstance(other, finfo):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in finfo.__slots__)

    __hash__ = None  # compared by value and unhashable, as in PyTorch

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:
    """The limits of an integer dtype, as `torch.iinfo` gives them: `bits`, `min`, `max`
    (Python ints) and `dtype`, the dtype's name.

    >>> flow.iinfo(flow.int16).max
    32767
    >>> flow.iinfo(flow.uint8)
    iinfo(min=0, max=255, dtype=uint8)
    """

    __slots__ = ("bits", "dtype", "max", "min")

    def __init__(self, type) -> None:
        dt = _dtype_arg("iinfo", type)
        if dt is dtypes.bool_:
            raise TypeError("iinfo(): tideflow.bool is not supported")
        if dt.is_floating_point or dt.is_complex:
            raise TypeError(
                f"iinfo(): requires an integer dtype, got {dt!r}; use tideflow.finfo for "
                "floating and complex dtypes"
            )
        info = ml_dtypes.iinfo(dt.np)
        self.bits = int(info.bits)
        self.min = int(info.min)
        self.max = int(info.max)
        self.dtype = dt.name

    def __eq__(self, other) -> bool:
        if not isinstance(other, iinfo):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in iinfo.__slots__)

    __hash__ = None

    def __repr__(self) -> str:
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


# -- runtime switches ----------------------------------------------------------------------
class _Switches:
    """What the switch functions recorded (None: never set)."""

    num_threads: int | None = None
    matmul_precision = "highest"
    deterministic = False
    deterministic_warn_only = False


_SWITCHES = _Switches()


def _threadpoolctl():
    """The optional `threadpoolctl` module (it can resize BLAS thread pools at run time)."""
    try:
        import threadpoolctl
    except ImportError:
        return None
    return threadpoolctl


def set_num_threads(num_threads: int) -> None:
    """Set the number of threads the BLAS library (NumPy's matmul, linalg) may use.

    NOTE: NumPy has no portable way to resize its BLAS thread pool once loaded. With the
    optional `threadpoolctl` package installed the new count is applied at once; without it
    the value is only recorded (and read back by `get_num_threads`): set `OMP_NUM_THREADS` in
    the environment before starting Python to limit BLAS threads then.

    >>> flow.set_num_threads(2)
    >>> flow.get_num_threads()
    2
    """
    if isinstance(num_threads, bool) or not isinstance(num_threads, int):
        raise TypeError(f"set_num_threads(): expected an int, got {type(num_threads).__name__}")
    if num_threads <= 0:
        raise TideflowError(f"set_num_threads(): expects a positive integer, got {num_threads}")
    _SWITCHES.num_threads = num_threads
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is not None:
        threadpoolctl.threadpool_limits(limits=num_threads, user_api="blas")


def get_num_threads() -> int:
    """The number of BLAS threads: the value last given to `set_num_threads`, else what the
    BLAS library uses (read with `threadpoolctl` when installed; else `OMP_NUM_THREADS` /
    `OPENBLAS_NUM_THREADS` when set, else the number of CPUs this process may run on).

    >>> flow.get_num_threads() >= 1
    True
    """
    if _SWITCHES.num_threads is not None:
        return _SWITCHES.num_threads
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is not None:
        blas = [
            p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"
        ]
        if blas:
            return max(blas)
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


_MATMUL_PRECISIONS = ("highest", "high", "medium")


def set_float32_matmul_precision(precision: str) -> None:
    """Record the precision float32 matmuls may use ('highest', 'high' or 'medium').

    NOTE: accepted for compatibility: NumPy's BLAS always multiplies float32 in full float32
    ('highest'); PyTorch's lower settings allow TF32/bfloat16 passes on GPUs. As in PyTorch,
    an unknown value warns and changes nothing.

    >>> flow.set_float32_matmul_precision("high")
    >>> flow.get_float32_matmul_precision()
    'high'
    >>> flow.set_float32_matmul_precision("highest")
    """
    if precision not in _MATMUL_PRECISIONS:
        warnings.warn(
            f"set_float32_matmul_precision: {precision!r} is not one of 'highest', 'high' or "
            "'medium'; the call has no effect",
            UserWarning,
            stacklevel=2,
        )
        return
    _SWITCHES.matmul_precision = precision


def get_float32_matmul_precision() -> str:
    """The value last given to `set_float32_matmul_precision` ('highest' by default)."""
    return _SWITCHES.matmul_precision


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record whether only deterministic algorithms may run.

    NOTE: accepted for compatibility: every tideflow kernel is deterministic (NumPy on the
    CPU, fixed reduction orders), so either mode gives the same, reproducible results.

    >>> flow.use_deterministic_algorithms(True)
    >>> flow.are_deterministic_algorithms_enabled()
    True
    >>> flow.use_deterministic_algorithms(False)
    """
    for name, value in (("mode", mode), ("warn_only", warn_only)):
        if not isinstance(value, bool):
            raise TypeError(
                f"use_deterministic_algorithms(): {name} must be a bool, got {type(value).__name__}"
            )
    _SWITCHES.deterministic = mode
    _SWITCHES.deterministic_warn_only = warn_only


def are_deterministic_algorithms_enabled() -> bool:
    """The mode last given to `use_deterministic_algorithms` (False by default)."""
    return _SWITCHES.deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """The `warn_only` flag last given to `use_deterministic_algorithms` (False by default)."""
    return _SWITCHES.deterministic_warn_only


# -- compile -------------------------------------------------------------------------------
def compile(model=None, **options):
    """Return `model` (a module or function) unchanged; without one, a decorator that does.

    NOTE: accepted so that scripts calling `torch.compile` run; the keyword options
    (`mode`, `backend`, `fullgraph`, ...) are ignored. tideflow compiles with `nn.Graph`:
    subclass it, call your model in `build`, and the step is traced once, optimized and run on
    the actor runtime.

    >>> net = flow.nn.Linear(2, 2)
    >>> flow.compile(net, mode="max-autotune") is net
    True
    >>> @flow.compile(fullgraph=True)
    ... def double(x):
    ...     return 2 * x
    >>> double(flow.tensor([1.0]))
    tensor([2.])
    """
    if model is None:
        return lambda fn: compile(fn, **options)
    if not callable(model):
        raise TypeError(f"compile(): expected a module or function, got {type(model).__name__}")
    return model


# -- cdist ---------------------------------------------------------------------------------
_COMPUTE_MODES = (
    "use_mm_for_euclid_dist_if_necessary",
    "use_mm_for_euclid_dist",
    "donot_use_mm_for_euclid_dist",
)


def _check_cdist(x1, x2, p, compute_mode) -> None:
    for name, x in (("x1", x1), ("x2", x2)):
        if not isinstance(x, Tensor):
            raise TypeError(f"cdist(): {name} must be a Tensor, not {type(x).__name__}")
        if not x.dtype.is_floating_point:
            raise DTypeError(
                f"cdist: only floating-point dtypes are supported, {name} is {x.dtype}"
            )
        if x.ndim < 2:
            raise ShapeError(
                f"cdist: expects tensors with at least 2 dims, {name} has shape {list(x.shape)}"
            )
    if x1.dtype is not x2.dtype:
        raise DTypeError(
            f"cdist: x1 and x2 must have the same dtype, got {x1.dtype} and {x2.dtype}"
        )
    if x1.shape[-1] != x2.shape[-1]:
        raise ShapeError(
            f"cdist: x1 and x2 must have the same number of columns, got shapes "
            f"{list(x1.shape)} and {list(x2.shape)}"
        )
    if not p >= 0:
        raise ValueError(f"cdist: p must be non-negative, got {p}")
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(
            f"cdist: {compute_mode!r} is not a valid compute_mode; expected one of "
            f"{', '.join(map(repr, _COMPUTE_MODES))}"
        )


def _root(total: Tensor, p: float) -> Tensor:
    """total ** (1 / p) with gradient 0 where total is 0 (where PyTorch's cdist gives 0; the
    plain power's derivative is infinite there and 0 * inf would make it NaN)."""
    zero = total == 0
    safe = where(zero, 1.0, total)
    return where(zero, 0.0, safe.sqrt() if p == 2 else safe ** (1.0 / p))


def _max_distance(gaps: Tensor) -> Tensor:
    """max over the last dim, with PyTorch's cdist gradient: every tied maximum gets the full
    gradient (amax would share it among the ties)."""
    peak = gaps.amax(-1)
    ties = (gaps * (gaps == peak.unsqueeze(-1))).sum(-1)
    # NOTE: the value is `peak`; the gradient is that of `ties`, one per tied entry.
    return peak.detach() + (ties - ties.detach())


def _euclidean_by_matmul(x1: Tensor, x2: Tensor) -> Tensor:
    """sqrt(|a|^2 + |b|^2 - 2 a.b) for all pairs with one matmul, as PyTorch computes it:
    O(rows) memory instead of O(rows1 * rows2 * cols), at some loss of precision for
    nearby points (distances below 1e-15 come out as 1e-15)."""
    norm1 = (x1 * x1).sum(-1, keepdim=True)
    norm2 = (x2 * x2).sum(-1, keepdim=True)
    left = cat([x1 * -2, norm1, ones_like(norm1)], -1)
    right = cat([x2, ones_like(norm2), norm2], -1)
    return (left @ right.mT).clamp_min(1e-30).sqrt()


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of `x1` (..., P, M) and each row of `x2`
    (..., R, M): a (..., P, R) tensor; batch dims broadcast. `p` may be 0 (count of
    differing coordinates), any positive value, or `inf` (largest coordinate difference).

    For p = 2, `compute_mode` picks the algorithm as PyTorch does: the matmul form
    (fast, O(P + R) extra memory, less precise for close points) when P or R exceeds 25
    ('use_mm_for_euclid_dist_if_necessary'), always ('use_mm_for_euclid_dist') or never
    ('donot_use_mm_for_euclid_dist'). Gradients match PyTorch's, 0 at zero distance.

    >>> a = flow.tensor([[0.0, 0.0], [1.0, 1.0]])
    >>> flow.cdist(a, flow.tensor([[3.0, 4.0]]))
    tensor([[5.0000],
            [3.6056]])
    >>> flow.cdist(a, flow.tensor([[3.0, 4.0]]), p=1)
    tensor([[7.],
            [5.]])
    """
    _check_cdist(x1, x2, p, compute_mode)
    if p == 2 and compute_mode != "donot_use_mm_for_euclid_dist":
        large = x1.shape[-2] > 25 or x2.shape[-2] > 25
        if large or compute_mode == "use_mm_for_euclid_dist":
            return _euclidean_by_matmul(x1, x2)
    gaps = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()  # (..., P, R, M)
    if p == 0:
        return gaps.sign().sum(-1)  # sign(): a count whose gradient is 0, as in PyTorch
    if p == 1:
        return gaps.sum(-1)
    if p == math.inf:
        return _max_distance(gaps)
    if p == 2:
        return _root((gaps * gaps).sum(-1), p)
    if p < 1:  # |d| ** p has an infinite derivative at d = 0, where PyTorch's gradient is 0
        zero = gaps == 0
        powered = where(zero, 0.0, where(zero, 1.0, gaps) ** p)
    else:
        powered = gaps**p
    return _root(powered.sum(-1), p)
