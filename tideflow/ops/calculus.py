"""Finite differences and numerical integration along a dimension: `diff`, `gradient`,
`trapezoid` and `cumulative_trapezoid`.

Each is a composition of slicing and arithmetic, as in PyTorch, so gradients (and the
operands' dtype promotion) come from those ops.
"""

from __future__ import annotations

import numbers

from ..framework import dtype as dtypes
from ..framework.errors import ShapeError, TideflowError
from ..framework.tensor import Tensor
from ._rules import checked, methods, normalize_dim, normalize_dims
from .binary import logical_xor
from .shape import cat

__all__ = ["diff", "gradient", "trapezoid", "trapz", "cumulative_trapezoid"]


def _part(t: Tensor, dim: int, start: int, stop: int | None = None) -> Tensor:
    """`t[..., start:stop, ...]` along `dim` (negative bounds count from the end)."""
    n = t.shape[dim]
    begin = start % n if start < 0 else start
    end = n if stop is None else (stop % n if stop < 0 else stop)
    return t.narrow(dim, begin, end - begin)


# -- diff -----------------------------------------------------------------------------------
def _extended(input: Tensor, dim: int, prepend, append) -> Tensor:
    """`input` with `prepend` before and `append` after it along `dim`."""
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is not None and extra.ndim != input.ndim:
            raise ShapeError(
                f"diff: {name} must have the input's {input.ndim} dimensions, got shape "
                f"{list(extra.shape)}"
            )
    parts = [t for t in (prepend, input, append) if t is not None]
    return cat(parts, dim) if len(parts) > 1 else input


@checked
def diff(input: Tensor, n=1, dim=-1, prepend: Tensor | None = None,
         append: Tensor | None = None):  # fmt: skip
    """The `n`-th forward difference along `dim`: `out[i] = input[i + 1] - input[i]`, applied
    `n` times (bool inputs: whether neighbours differ). The tensors `prepend`/`append` are put
    before/after the input along `dim` first.

    >>> flow.diff(flow.tensor([1, 3, 6, 10]))
    tensor([2, 3, 4])
    """
    if input.ndim == 0:
        raise ShapeError("diff: expected an input of at least one dimension, got a 0-d tensor")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TideflowError(f"diff: order n must be a non-negative int, got {n!r}")
    d = normalize_dim("diff", dim, input.ndim)
    out = _extended(input, d, prepend, append)
    for _ in range(min(n, out.shape[d])):
        later, earlier = _part(out, d, 1), _part(out, d, 0, -1)
        out = logical_xor(later, earlier) if out.dtype is dtypes.bool_ else later - earlier
    return out


# -- gradient -------------------------------------------------------------------------------
def _spacings(input: Tensor, spacing, dims: tuple[int, ...]) -> list:
    """One spacing per differentiated dim: a number (uniform steps) or a 1-d tensor of the
    sample coordinates along it."""
    if not isinstance(spacing, tuple | list):
        return [spacing] * len(dims)
    if len(spacing) != len(dims):
        raise TideflowError(
            f"gradient: expected spacing to be a number or one entry per differentiated dim "
            f"({len(dims)}), got {len(spacing)} entries"
        )
    for d, s in zip(dims, spacing, strict=True):
        if isinstance(s, Tensor) and (s.ndim != 1 or s.shape[0] != input.shape[d]):
            raise ShapeError(
                f"gradient: coordinates along dim {d} must be a 1-d tensor of its "
                f"{input.shape[d]} points, got shape {list(s.shape)}"
            )
    return list(spacing)


def _uniform_gradient(f: Tensor, d: int, h, edge_order: int) -> Tensor:
    # central differences inside; one-sided ones of the edge order at the ends
    center = (_part(f, d, 2) - _part(f, d, 0, -2)) / h / 2
    first, second, before_last, last = _ends(f, d, 2)
    if edge_order == 1:
        head, tail = (second - first) / h, (last - before_last) / h
    else:
        third, third_last = _part(f, d, 2, 3), _part(f, d, -3, -2)
        head = (-1.5 * first + 2 * second - 0.5 * third) / h
        tail = (0.5 * third_last - 2 * before_last + 1.5 * last) / h
    return cat([head, center, tail], d)


def _ends(f: Tensor, d: int, k: int) -> tuple[Tensor, ...]:
    """The first `k` and the last `k` slices of `f` along `d`, each keeping the dim."""
    return (
        *(_part(f, d, i, i + 1) for i in range(k)),
        *(_part(f, d, i, i + 1 or None) for i in range(-k, 0)),
    )


def _along(t: Tensor, d: int, ndim: int) -> Tensor:
    """A 1-d tensor shaped to broadcast along dim `d` of an `ndim`-d tensor."""
    return t.reshape([-1 if i == d else 1 for i in range(ndim)])


def _coordinate_gradient(f: Tensor, d: int, x: Tensor, edge_order: int) -> Tensor:
    """Second-order differences on uneven steps (the Lagrange polynomial through each point
    and its neighbours)."""
    h = x.diff()
    h1, h2 = _along(h[:-1], d, f.ndim), _along(h[1:], d, f.ndim)
    center = (
        -h2 / (h1 * (h1 + h2)) * _part(f, d, 0, -2)
        + (h2 - h1) / (h1 * h2) * _part(f, d, 1, -1)
        + h1 / (h2 * (h1 + h2)) * _part(f, d, 2)
    )
    if edge_order == 1:
        first, second, before_last, last = _ends(f, d, 2)
        head, tail = (second - first) / h[0], (last - before_last) / h[-1]
    else:
        first, second, third, third_last, before_last, last = _ends(f, d, 3)
        a, b = h[0], h[1]
        head = (
            -(2 * a + b) / (a * (a + b)) * first
            + (a + b) / (a * b) * second
            - a / (b * (a + b)) * third
        )
        a, b = h[-1], h[-2]
        tail = (
            a / (b * (a + b)) * third_last
            - (a + b) / (a * b) * before_last
            + (2 * a + b) / (a * (a + b)) * last
        )
    return cat([head, center, tail], d)


@checked
def gradient(input: Tensor, *, spacing=1, dim=None, edge_order=1):
    """Estimates the derivative of the function sampled by `input` along each of `dim` (every
    dim by default): central differences inside, one-sided differences of `edge_order` (1 or
    2) at the ends. `spacing` is the step (a number, or one per dim) or the sample coordinates
    (a 1-d tensor per dim). Returns a tuple, one tensor per dim.

    >>> flow.gradient(flow.tensor([1.0, 2.0, 4.0, 8.0]))
    (tensor([1.0000, 1.5000, 3.0000, 4.0000]),)
    """
    if edge_order not in (1, 2):
        raise TideflowError(f"gradient: edge_order must be 1 or 2, got {edge_order!r}")
    every = tuple(range(input.ndim))
    if isinstance(dim, numbers.Number):  # one dim; a float is refused as a dim
        dim = (dim,)
    if isinstance(dim, tuple | list) and not dim:  # no dims, no derivatives (as PyTorch)
        return ()
    dims = every if dim is None else normalize_dims("gradient", dim, input.ndim)
    for d in dims:
        if input.ndim == 0 or input.shape[d] < edge_order + 1:
            raise ShapeError(
                f"gradient: expected each differentiated dim to have at least edge_order + 1 "
                f"= {edge_order + 1} points, got shape {list(input.shape)}"
            )
    results = []
    for d, s in zip(dims, _spacings(input, spacing, dims), strict=True):
        if isinstance(s, Tensor):
            results.append(_coordinate_gradient(input, d, s, edge_order))
        elif isinstance(s, numbers.Number) and not isinstance(s, bool):
            results.append(_uniform_gradient(input, d, s, edge_order))
        else:
            raise TypeError(f"gradient: a spacing must be a number or a tensor, got {s!r}")
    return tuple(results)


# -- trapezoid ------------------------------------------------------------------------------
def _steps(op: str, y: Tensor, x, dx, d: int):
    """The widths of the intervals along dim `d`: from the coordinates `x` (1-d along `d`, or
    broadcasting against `y`), or the constant `dx` (1 by default)."""
    if x is None:
        return 1 if dx is None else dx
    if dx is not None:
        raise TideflowError(f"{op}: expected either x or dx, not both")
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise ShapeError(
                f"{op}: expected one x value per sample point ({y.shape[d]} along dim {d}), "
                f"got {x.shape[0]}"
            )
        return _along(x.diff(), d, y.ndim)
    return x.diff(dim=d - y.ndim)


@checked
def trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim=-1):
    """The integral of the samples `y` along `dim` by the trapezoidal rule, at coordinates
    `x` or with the constant spacing `dx` (1 by default). An empty dim integrates to 0.

    >>> flow.trapezoid(flow.tensor([1.0, 2.0, 4.0]))
    tensor(4.5000)
    """
    if y.ndim == 0:
        raise ShapeError("trapezoid: expected y of at least one dimension, got a 0-d tensor")
    d = normalize_dim("trapezoid", dim, y.ndim)
    steps = _steps("trapezoid", y, x, dx, d)
    if y.shape[d] == 0:
        return (y * 0.0).sum(d)
    if not isinstance(steps, Tensor):  # NOTE: PyTorch's arithmetic for a constant step
        return (y.sum(d) - (_part(y, d, 0, 1) + _part(y, d, -1)).squeeze(d) * 0.5) * steps
    return (steps * (_part(y, d, 1) + _part(y, d, 0, -1))).sum(d) / 2


trapz = trapezoid


@checked
def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx=None, dim=-1):
    """The running integral of `y` along `dim` by the trapezoidal rule (one value fewer than
    samples): `trapezoid` of each prefix.

    >>> flow.cumulative_trapezoid(flow.tensor([1.0, 2.0, 4.0]))
    tensor([1.5000, 4.5000])
    """
    if y.ndim == 0:
        raise ShapeError(
            "cumulative_trapezoid: expected y of at least one dimension, got a 0-d tensor"
        )
    d = normalize_dim("cumulative_trapezoid", dim, y.ndim)
    steps = _steps("cumulative_trapezoid", y, x, dx, d)
    if y.shape[d] == 0:
        return y * 0.0
    pairs = _part(y, d, 1) + _part(y, d, 0, -1)
    if not isinstance(steps, Tensor):
        return (steps / 2.0 * pairs).cumsum(d)
    return (steps * pairs / 2.0).cumsum(d)


methods(diff=diff)
