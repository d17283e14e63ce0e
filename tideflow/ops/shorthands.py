"""Top-level functions PyTorch has that are shorthands for other ops: deg2rad, rad2deg,
positive, ravel, msort, diagflat, dist, logspace, tril_indices, triu_indices,
unravel_index, scalar_tensor; and the in-place functions `flow.abs_(x)` etc., which call
the tensor's in-place method."""

from __future__ import annotations

import math

import numpy as np

from ..framework import dtype as dtypes
from ..framework.errors import DTypeError, TensorIndexError, TideflowError
from ..framework.tensor import Tensor
from ._rules import checked, int_arg, methods
from .creation import global_layout, linspace, make, tensor
from .indexing import sort
from .shape import diag

__all__ = [
    "deg2rad", "rad2deg", "positive", "ravel", "msort", "diagflat", "dist", "logspace",
    "tril_indices", "triu_indices", "unravel_index", "scalar_tensor",
]  # fmt: skip


def _floating(input: Tensor) -> Tensor:
    """Integers and bools as the default float dtype, as PyTorch's unary float ops take them."""
    if input.dtype.is_floating_point or input.dtype.is_complex:
        return input
    return input.to(dtypes.get_default_dtype())


@checked
def deg2rad(input: Tensor):
    """Degrees to radians.

    >>> flow.deg2rad(flow.tensor([180.0, 90.0]))
    tensor([3.1416, 1.5708])
    """
    return _floating(input) * (math.pi / 180)


@checked
def rad2deg(input: Tensor):
    """Radians to degrees.

    >>> flow.rad2deg(flow.tensor([math.pi]))
    tensor([180.])
    """
    return _floating(input) * (180 / math.pi)


@checked
def positive(input: Tensor):
    """`input` itself (`+input`); bools have no `+`."""
    if input.dtype is dtypes.bool_:
        raise DTypeError("positive: The `+` operator, on a bool tensor is not supported.")
    return input


@checked
def ravel(input: Tensor):
    """The elements in one dimension, in row-major order (a view where the layout allows).

    >>> flow.ravel(flow.tensor([[1, 2], [3, 4]]))
    tensor([1, 2, 3, 4])
    """
    return input.reshape(-1)


@checked
def msort(input: Tensor):
    """`input` sorted along dim 0 (the values of `sort(input, dim=0)`)."""
    return sort(input, 0)[0]


@checked
def diagflat(input: Tensor, offset=0):
    """The 2-d matrix whose `offset` diagonal holds the flattened input.

    >>> flow.diagflat(flow.tensor([[1, 2], [3, 4]])).shape
    tideflow.Size([4, 4])
    """
    return diag(input.reshape(-1), offset)


@checked
def dist(input: Tensor, other: Tensor, p=2):
    """The p-norm of `input - other` (broadcast), as one number.

    >>> flow.dist(flow.ones(3), flow.zeros(3), 1)
    tensor(3.)
    """
    return (input - other).norm(p)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False,
             placement=None, sbp=None) -> Tensor:  # fmt: skip
    """`steps` values `base ** t` for t evenly spaced from `start` to `end`.

    >>> flow.logspace(0, 2, 3)
    tensor([  1.,  10., 100.])
    """
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    layout = global_layout("logspace", device, placement, sbp)

    def local():
        return (float(base) ** linspace(start, end, steps, dtype=dtypes.float64)).to(dt)

    return make(local, layout, requires_grad)


_MAX_MATRIX = 2**31  # elements of the matrix whose triangle tril_indices/triu_indices list


def _triangle_indices(op: str, numpy_indices, row, col, offset, dtype, device):
    dt = dtypes.int64 if dtype is None else dtypes.to_dtype(dtype)
    if dt not in (dtypes.int32, dtypes.int64):
        raise DTypeError(f"{op}: expected an int32 or int64 dtype, got {dt.name}")
    row, col, offset = (int_arg(op, n, v) for n, v in (("row", row), ("col", col),
                                                        ("offset", offset)))  # fmt: skip
    if row * col > _MAX_MATRIX:  # NumPy builds the whole mask first
        raise TideflowError(f"{op}: a {row} x {col} matrix is too large to index")
    rows, cols = numpy_indices(row, offset, col)
    return tensor(np.stack([rows, cols]), dtype=dt, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The (2, N) coordinates of the lower triangle (diagonal `offset` included) of a
    row x col matrix, row by row.

    >>> flow.tril_indices(2, 2)
    tensor([[0, 1, 1],
            [0, 0, 1]])
    """
    return _triangle_indices("tril_indices", np.tril_indices, row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None) -> Tensor:
    """The (2, N) coordinates of the upper triangle (diagonal `offset` included) of a
    row x col matrix, row by row.

    >>> flow.triu_indices(2, 2)
    tensor([[0, 0, 1],
            [0, 1, 1]])
    """
    return _triangle_indices("triu_indices", np.triu_indices, row, col, offset, dtype, device)


@checked
def unravel_index(indices: Tensor, shape) -> tuple:
    """The coordinates in a tensor of `shape` of the flat (row-major) `indices`, one tensor
    per dim.

    >>> flow.unravel_index(flow.tensor([4, 7]), (3, 3))
    (tensor([1, 2]), tensor([1, 1]))
    """
    if indices.dtype.is_floating_point or indices.dtype.is_complex or indices.dtype is dtypes.bool_:
        raise DTypeError(f"unravel_index: expected integer indices, got {indices.dtype.name}")
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
    size = math.prod(shape)
    if indices.numel() and bool(((indices < -size) | (indices >= size)).any()):
        raise TensorIndexError(
            f"unravel_index: index out of bounds for a tensor of shape {list(shape)}"
        )
    rest = indices.to(dtypes.int64) % max(size, 1)  # negative indices count from the end
    coordinates = []
    for extent in reversed(shape):
        coordinates.append(rest % extent if extent else rest)
        rest = rest // extent if extent else rest
    return tuple(reversed(coordinates))


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A 0-d tensor of the number `s`, of the default float dtype unless `dtype` is given.

    >>> flow.scalar_tensor(3)
    tensor(3.)
    """
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    return tensor(s, dtype=dt, device=device, requires_grad=requires_grad)


methods(deg2rad=deg2rad, rad2deg=rad2deg, positive=positive, ravel=ravel, msort=msort,
        diagflat=diagflat, dist=dist)  # fmt: skip


# -- the in-place functions: `flow.exp_(x)` is `x.exp_()` ----------------------------------------
_IN_PLACE = (
    "abs_", "acos_", "acosh_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
    "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_",
    "clamp_min_", "clip_", "cos_", "cosh_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fill_",
    "fix_", "floor_", "frac_", "gcd_", "i0_", "lcm_", "ldexp_", "log10_", "log1p_", "log2_",
    "log_", "logit_", "nan_to_num_", "neg_", "negative_", "reciprocal_", "relu_", "round_",
    "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_",
    "trunc_", "xlogy_", "zero_", "detach_",
)  # fmt: skip


def _in_place(name: str):
    def function(input: Tensor, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"`input.{name}(...)`: the in-place op on `input`, which it returns."
    return checked(function)


globals().update({name: _in_place(name) for name in _IN_PLACE})
__all__ += list(_IN_PLACE)
