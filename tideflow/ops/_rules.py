"""Shared rule builders for op definitions: shape/dtype (meta) and SBP rules that many ops
have in common, and the `defop` shorthand. An op file combines these with its kernel and grad.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import operator
from collections.abc import Callable

import numpy as np

from ..framework import dtype as dtypes
from ..framework.dispatch import dispatch
from ..framework.errors import ArgumentError, ShapeError, TensorIndexError
from ..framework.registry import Meta, OpDef, register
from ..framework.sbp import B, P, S, Signature
from ..framework.tensor import Tensor

__all__ = [
    "B",
    "P",
    "S",
    "Meta",
    "Signature",
    "broadcast_only",
    "broadcast_shapes",
    "checked",
    "defop",
    "dispatch",
    "elementwise_meta",
    "elementwise_sbp",
    "halves_in_float32",
    "methods",
    "normalize_dim",
    "normalize_dims",
    "reduce_meta_shape",
    "reduce_sbp",
    "same_meta",
    "sizes_arg",
]


def defop(name: str, **kw) -> OpDef:
    """Build and register an OpDef (see `framework.registry.OpDef` for the fields)."""
    return register(OpDef(name, **kw))


def halves_in_float32(composite: Callable) -> Callable:
    """A composite of several ops that, on tensors of one half-precision dtype, computes in
    float32 and rounds once at the end, as a kernel does (a chain of half-precision ops would
    round after every step: `x - tanh(x)` loses all its digits near 0)."""

    @functools.wraps(composite)
    def wrapper(*args, **kwargs):
        floats = {a.dtype for a in args if isinstance(a, Tensor) and a.dtype.is_floating_point}
        if len(floats) != 1 or (half := floats.pop()) not in (dtypes.float16, dtypes.bfloat16):
            return composite(*args, **kwargs)
        wide = (
            a.to(dtypes.float32) if isinstance(a, Tensor) and a.dtype is half else a for a in args
        )
        out = composite(*wide, **kwargs)
        return out.to(half) if out.dtype is dtypes.float32 else out

    return wrapper


# -- shapes ---------------------------------------------------------------------------------
def sizes_arg(size: tuple) -> tuple:
    """Sizes given either way PyTorch accepts them: `f(2, 3)` or `f((2, 3))`."""
    if len(size) == 1 and isinstance(size[0], tuple | list):
        return tuple(size[0])
    return tuple(size)


def broadcast_shapes(op: str, *shapes: tuple) -> tuple:
    """NumPy/PyTorch broadcasting, with an error naming the op, every shape and PyTorch's
    sentence (tensor a is the shapes broadcast so far, tensor b the next one; the dimension
    is the result's)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i in reversed(range(ndim - len(s), ndim)):  # from the last, as PyTorch reports
            d = s[i - ndim + len(s)]
            if d != out[i]:
                if out[i] == 1:
                    out[i] = d
                elif d != 1:
                    listed = " and ".join(str(list(x)) for x in shapes)
                    raise ShapeError(
                        f"{op}: shapes {listed} cannot be broadcast together: The size of "
                        f"tensor a ({out[i]}) must match the size of tensor b ({d}) at "
                        f"non-singleton dimension {i}"
                    )
    return tuple(out)


def tensor_arg(op: str, name: str, position: int | None, value) -> Tensor:
    """`value` if it is a Tensor, else PyTorch's TypeError (an ArgumentError) naming the op,
    the argument, its position (1-based; None for a keyword-only one) and the type it got (a
    wrapper reading `.shape`/`.ndim` first raises a bare AttributeError)."""
    if not isinstance(value, Tensor):
        where = f" (position {position})" if position is not None else ""
        raise ArgumentError(
            f"{op}(): argument '{name}'{where} must be Tensor, not {type(value).__name__}"
        )
    return value


def operand_arg(op: str, name: str, position: int | None, value):
    """`value` if it is a Tensor or a number (Python's or NumPy's, or a 0-d array, as the
    dispatcher takes it), else a TypeError like `tensor_arg`'s (None, a string, a list: an
    op computing with a number would read None as False or a string as characters)."""
    if isinstance(value, Tensor | numbers.Number | np.bool_) or (
        isinstance(value, np.ndarray) and value.ndim == 0
    ):
        return value
    where = f" (position {position})" if position is not None else ""
    raise ArgumentError(
        f"{op}(): argument '{name}'{where} must be Tensor or Number, not {type(value).__name__}"
    )


def tensors_arg(op: str, name: str, position: int, values):
    """`values` (a sequence argument at 0-based `position`, as PyTorch counts it in this
    message) if each element is a Tensor, else PyTorch's TypeError naming the op, the element
    and the type it got."""
    for i, value in enumerate(values):
        if not isinstance(value, Tensor):
            raise ArgumentError(
                f"{op}(): expected Tensor as element {i} in argument {position} ('{name}'), "
                f"but got {type(value).__name__}"
            )
    return values


_TENSOR = ("Tensor", Tensor)
# annotation -> (check, whether None is allowed)
_CHECKS = {
    "Tensor": (tensor_arg, False),
    Tensor: (tensor_arg, False),
    "Tensor | None": (tensor_arg, True),
    Tensor | None: (tensor_arg, True),
    "Tensor | Number": (operand_arg, False),
    Tensor | numbers.Number: (operand_arg, False),
}


def checked(fn: Callable) -> Callable:
    """`fn` (an op's public function) checking, before it runs, the arguments its signature
    annotates as `Tensor` (or `Tensor | None`; or `Tensor | Number` for an operand that may be
    a number): any other value (None where not allowed, a string, a list) raises
    `tensor_arg`'s TypeError naming the op (`fn`'s name) and the argument, before any
    attribute of it is read. `*tensors: Tensor` checks each element (a function that also
    takes them as one list checks that itself: see `tensors_arg`)."""
    checks = []  # (0-based position or None when keyword-only, name, check, None allowed)
    rest = None  # (0-based position, name) of `*name: Tensor`
    for i, p in enumerate(inspect.signature(fn).parameters.values()):
        if p.kind is p.VAR_POSITIONAL:
            if p.annotation in _TENSOR:
                rest = (i, p.name)
        elif p.annotation in _CHECKS:
            positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            checks.append((i if positional else None, p.name, *_CHECKS[p.annotation]))
    op = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for position, name, check, optional in checks:
            if position is not None and position < len(args):
                value = args[position]
            elif name in kwargs:
                value = kwargs[name]
            else:
                continue
            if not (optional and value is None):
                check(op, name, None if position is None else position + 1, value)
        if rest is not None:
            tensors_arg(op, rest[1], rest[0], args[rest[0] :])
        return fn(*args, **kwargs)

    return wrapper


def int_arg(op: str, name: str, value) -> int:
    """`value` as an int (bools and floats refused, as PyTorch does), else a TypeError naming the
    op and the argument."""
    if type(value) is int:
        return value
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise ArgumentError(f"{op}(): argument '{name}' must be int, not {type(value).__name__}")


def normalize_dim(op: str, dim: int, ndim: int) -> int:
    dim = int_arg(op, "dim", dim)
    n = max(ndim, 1)  # PyTorch lets 0-d tensors use dim 0 / -1
    if not -n <= dim < n:
        raise TensorIndexError(
            f"{op}: dimension {dim} is out of range for a {ndim}-d tensor "
            f"(expected to be in [{-n}, {n - 1}])"
        )
    return dim % n


def normalize_dims(op: str, dim, ndim: int) -> tuple[int, ...]:
    """None/() -> all dims; an int or a sequence -> sorted non-negative unique dims."""
    if dim is None or (isinstance(dim, tuple | list) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, int):
        dim = (dim,)
    dims = tuple(sorted({normalize_dim(op, d, ndim) for d in dim}))
    if len(dims) != len(dim):
        raise ShapeError(f"{op}: dim {list(dim)} names a dimension twice")
    return tuple(d for d in dims if d < ndim or ndim == 0)


def reduce_meta_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in dims)


# -- meta rules -----------------------------------------------------------------------------
def same_meta(x: Meta, *_, **__) -> Meta:
    """Output like the first operand (unary elementwise ops)."""
    return Meta(x.shape, x.dtype)


def elementwise_meta(name: str, out_dtype: dtypes.DType | None = None) -> Callable[..., Meta]:
    """Broadcast the tensor operands; dtype = the (already promoted) operand dtype."""

    def meta(*operands, **_) -> Meta:
        tensors = [m for m in operands if isinstance(m, Meta)]
        shape = broadcast_shapes(name, *(m.shape for m in tensors))
        return Meta(shape, out_dtype or tensors[0].dtype)

    return meta


# -- SBP rules ------------------------------------------------------------------------------
def broadcast_only(*operands, **_) -> list[Signature]:
    """Ops with no cheaper layout: every tensor operand whole on every rank."""
    ins = tuple(B if isinstance(m, Meta) else None for m in operands)
    return [Signature(ins, (B,))]


def elementwise_sbp(partial: str | None = None, n_out: int = 1) -> Callable[..., list[Signature]]:
    """Split any output axis (operands broadcast along it stay B), or all B.

    partial="linear": all-P operands give P (add, sub, neg: sum of parts is the sum);
    partial="one":    one operand P, the others B, gives P (mul by a B factor).
    """

    def sbp(*operands, **_) -> list[Signature]:
        metas = [m if isinstance(m, Meta) else None for m in operands]
        tensors = [m for m in metas if m is not None]
        ndim = max(len(m.shape) for m in tensors)
        out_shape = broadcast_shapes("sbp", *(m.shape for m in tensors))
        sigs = []
        for axis in range(ndim):
            ins = []
            for m in metas:
                if m is None:
                    ins.append(None)
                    continue
                a = axis - (ndim - len(m.shape))
                split = a >= 0 and m.shape[a] == out_shape[axis]
                ins.append(S(a) if split else B)
            sigs.append(Signature(tuple(ins), (S(axis),) * n_out))
        all_b = tuple(None if m is None else B for m in metas)
        sigs.append(Signature(all_b, (B,) * n_out))
        if partial == "linear" and len(tensors) == len(operands):  # P + scalar is not linear
            sigs.append(Signature(tuple(None if m is None else P for m in metas), (P,) * n_out))
        elif partial == "one":
            for i, m in enumerate(metas):
                if m is not None:
                    ins = list(all_b)
                    ins[i] = P
                    sigs.append(Signature(tuple(ins), (P,) * n_out))
        return sigs

    return sbp


def reduce_sbp(partial: bool) -> Callable[..., list[Signature]]:
    """Reductions over `dim`: a kept axis stays split (shifted when dims are dropped); a
    reduced axis that is split gives P when the reduction is a sum of parts (`partial`)."""

    def sbp(x: Meta, *_, dim=None, keepdim=False, **__) -> list[Signature]:
        dims = normalize_dims("sbp", dim, len(x.shape))
        sigs = [Signature((B,), (B,))]
        kept = 0
        for axis in range(len(x.shape)):
            if axis in dims:
                if partial:
                    sigs.append(Signature((S(axis),), (P,)))
            else:
                out_axis = axis if keepdim else kept
                sigs.append(Signature((S(axis),), (S(out_axis),)))
                kept += 1
        if partial:
            sigs.append(Signature((P,), (P,)))
        return sigs

    return sbp


# -- NumPy's keyword names ------------------------------------------------------------------
_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}
_with_numpy_names: dict = {}  # function -> its wrapper: one per function, aliases included


def numpy_names(fn):
    """`fn` also taking NumPy's keywords for its `dim` and `keepdim` (`axis`, `keepdims`), as
    PyTorch's functions and Tensor methods do: `x.sum(axis=0, keepdims=True)`. Functions
    without those parameters (and non-functions) come back as they are; a function wrapped
    before gets the same wrapper (`flow.concat is flow.cat`, `flow.linalg` shares ops')."""
    if not inspect.isfunction(fn):
        return fn
    if fn in _with_numpy_names:
        return _with_numpy_names[fn]
    params = inspect.signature(fn).parameters
    renames = {alias: name for alias, name in _NUMPY_NAMES.items() if name in params}
    if not renames or any(alias in params for alias in renames):
        return fn

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs:
            for alias, name in renames.items():
                if alias in kwargs:
                    if name in kwargs:
                        raise ArgumentError(
                            f"{fn.__name__}(): got both '{name}' and its alias '{alias}'"
                        )
                    kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)

    _with_numpy_names[fn] = wrapper
    return wrapper


# -- Tensor methods -------------------------------------------------------------------------
def methods(**fns) -> None:
    """Bind op functions as `Tensor` methods (the class itself stays op-agnostic); those
    taking `dim`/`keepdim` also take `axis`/`keepdims` (`numpy_names`)."""
    for name, fn in fns.items():
        setattr(Tensor, name, numpy_names(fn))
