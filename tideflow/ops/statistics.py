"""Statistics of samples: quantiles (`quantile`, `nanquantile`), covariance and correlation
(`cov`, `corrcoef`) and histograms (`histogram`, `histogramdd`).

Quantiles and moments are compositions of sorting, gathering and arithmetic, as in PyTorch,
so they differentiate through those ops. Histograms count and have no gradient.
"""

from __future__ import annotations

import math
import warnings
from collections import namedtuple
from numbers import Number

import numpy as np

from ..framework import dtype as dtypes
from ..framework.errors import ArgumentError, DTypeError, ShapeError, TideflowError
from ..framework.tensor import Tensor
from ._rules import B, Meta, Signature, checked, defop, dispatch, methods, normalize_dim
from .binary import lerp, where
from .creation import on_placement_of, tensor
from .linalg import matmul
from .unary import sqrt

__all__ = ["quantile", "nanquantile", "cov", "corrcoef", "histogram", "histogramdd"]

_HistogramResult = namedtuple("histogram", ["hist", "bin_edges"])
_HistogramddResult = namedtuple("histogramdd", ["hist", "bin_edges"])
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")
_FLOAT_OR_DOUBLE = (dtypes.float32, dtypes.float64)


# -- quantiles -----------------------------------------------------------------------------
def _quantile_q(op: str, input: Tensor, q) -> Tensor:
    """`q` as a 1-d tensor of the input's dtype, checked as PyTorch does."""
    if isinstance(q, Tensor):
        if q.ndim > 1:
            raise ShapeError(f"{op}: q must be a scalar or 1-d tensor, got shape {list(q.shape)}")
        if q.dtype is not input.dtype:
            raise DTypeError(
                f"{op}: q ({q.dtype.name}) must have the input's dtype ({input.dtype.name})"
            )
        # NOTE: reads q's values, as PyTorch does: an out-of-range q has no rank to gather
        if q.numel() and bool(((q < 0) | (q > 1)).any()):
            raise TideflowError(f"{op}: q values must be in the range [0, 1], got {q.tolist()}")
        return q.reshape(-1)
    if not 0 <= q <= 1:
        raise TideflowError(f"{op}: q must be in the range [0, 1], got {q}")
    return tensor([q], dtype=input.dtype, **on_placement_of(input))


def _ranks(sorted_x: Tensor, q: Tensor, ignore_nan: bool) -> Tensor:
    """The fractional position of each quantile in the sorted last axis (NaNs sort last):
    with NaNs kept, a slice holding one has its quantiles at the NaN; ignoring them, the
    ranks count the slice's numbers only (all-NaN slices take rank 0, a NaN)."""
    n = sorted_x.shape[-1]
    nan = sorted_x.isnan()
    if ignore_nan:
        ranks = q * ((~nan).sum(-1, keepdim=True) - 1)
        return where(ranks < 0, 0.0, ranks)
    ranks = (q * (n - 1)).expand(*sorted_x.shape[:-1], q.shape[0])
    return where(nan.any(-1, keepdim=True), float(n - 1), ranks)


def _interpolate(sorted_x: Tensor, ranks: Tensor, interpolation: str) -> Tensor:
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()  # halves to even, as PyTorch
    below = ranks.floor()
    values_below = sorted_x.gather(-1, below.long())
    if interpolation not in ("linear", "midpoint"):
        return values_below
    values_above = sorted_x.gather(-1, ranks.ceil().long())
    return lerp(values_below, values_above, 0.5 if interpolation == "midpoint" else ranks - below)


def _quantile(op, input, q, dim, keepdim, interpolation, ignore_nan):
    if input.dtype not in _FLOAT_OR_DOUBLE:
        raise DTypeError(f"{op}: expected a float32 or float64 input, got {input.dtype.name}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(
            f"{op}: interpolation must be one of {', '.join(_INTERPOLATIONS)}, "
            f"got {interpolation!r}"
        )
    if input.numel() == 0:
        raise ShapeError(f"{op}: expected a non-empty input, got shape {list(input.shape)}")
    scalar_q = not isinstance(q, Tensor) or q.ndim == 0
    q = _quantile_q(op, input, q)
    if dim is None:
        x, kept = input.reshape(-1), [1] * input.ndim if keepdim else []
    else:
        d = normalize_dim(op, dim, input.ndim)
        x = input.reshape(1) if input.ndim == 0 else input.movedim(d, -1)
        kept = list(input.shape)
        if input.ndim:
            kept[d : d + 1] = [1] if keepdim else []
    sorted_x = x.sort(-1).values
    values = _interpolate(sorted_x, _ranks(sorted_x, q, ignore_nan), interpolation)
    out = values.movedim(-1, 0).reshape(q.shape[0], *kept)  # quantiles first, as PyTorch
    return out.squeeze(0) if scalar_q else out


@checked
def quantile(input: Tensor, q: Tensor | Number, dim=None, keepdim=False, *,
             interpolation="linear"):  # fmt: skip
    """The `q`-th quantiles of `input` along `dim` (of all elements when None): each sorted
    slice is read at position `q * (n - 1)`, between neighbours by `interpolation` (linear,
    lower, higher, midpoint or nearest). A tensor `q` (1-d, of the input's dtype) puts its
    quantiles first in the result. A slice holding NaN gives NaN. float32/float64 only.

    >>> flow.quantile(flow.tensor([1.0, 2.0, 4.0, 8.0]), flow.tensor([0.25, 0.5]))
    tensor([1.7500, 3.0000])
    """
    return _quantile("quantile", input, q, dim, keepdim, interpolation, ignore_nan=False)


@checked
def nanquantile(input: Tensor, q: Tensor | Number, dim=None, keepdim=False, *,
                interpolation="linear"):  # fmt: skip
    """`quantile` of the numbers of each slice, NaNs ignored (an all-NaN slice gives NaN).

    >>> flow.nanquantile(flow.tensor([float("nan"), 1.0, 2.0]), 0.5)
    tensor(1.5000)
    """
    return _quantile("nanquantile", input, q, dim, keepdim, interpolation, ignore_nan=True)


# -- covariance and correlation ---------------------------------------------------------------
def _observation_weights(input: Tensor, fweights, aweights):
    """PyTorch's checks of the frequency (integer) and importance (float) weights, each 1-d
    with one non-negative entry per observation, and their product (None when neither)."""
    n = input.shape[-1] if input.ndim else 1
    weights = None
    for name, w, integral in (("fweights", fweights, True), ("aweights", aweights, False)):
        if w is None:
            continue
        if w.ndim > 1:
            raise ShapeError(f"cov: expected {name} to have one or fewer dimensions, got {w.ndim}")
        if w.numel() != n:
            raise ShapeError(
                f"cov: expected {name} to have one entry per observation ({n}), got {w.numel()}"
            )
        kind_ok = w.dtype in dtypes.INTEGRAL if integral else w.dtype.is_floating_point
        if not kind_ok:
            kind = "an integral" if integral else "a floating point"
            raise DTypeError(f"cov: expected {name} of {kind} dtype, got {w.dtype.name}")
        if bool((w < 0).any()):
            raise TideflowError(f"cov: {name} cannot be negative")
        weights = w if weights is None else weights * w
    return weights


@checked
def cov(input: Tensor, *, correction=1, fweights: Tensor | None = None,
        aweights: Tensor | None = None):  # fmt: skip
    """The covariance matrix of the variables in the rows of `input` (observations in the
    columns; a 1-d input is one variable), with `correction` subtracted from the number of
    observations (Bessel's correction by default) and optional integer frequency weights
    `fweights` and float importance weights `aweights`.

    >>> flow.cov(flow.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    tensor([[ 1., -1.],
            [-1.,  1.]])
    """
    if input.ndim > 2:
        raise ShapeError(
            f"cov: expected an input of two or fewer dimensions, got shape {list(input.shape)}"
        )
    if isinstance(correction, bool) or not isinstance(correction, Number):
        raise ArgumentError(
            f"cov(): argument 'correction' must be a number, not {type(correction).__name__}"
        )
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(dtypes.get_default_dtype())
    w = _observation_weights(input, fweights, aweights)
    if w is None:
        mean = x.mean(1, keepdim=True)
        dof = x.shape[1] - correction
        positive = dof > 0
    else:
        total = w.sum()
        mean = (x * w).sum(1, keepdim=True) / total
        dof = total - correction * ((w * aweights).sum() / total if aweights is not None else 1)
        positive = bool((dof > 0).all())
    if not positive:
        warnings.warn(
            "cov: degrees of freedom <= 0 (correction should be strictly less than the number "
            "of observations); the result divides by zero",
            RuntimeWarning,
            stacklevel=2,
        )
        dof = dof.clamp(min=0) if isinstance(dof, Tensor) else 0
    centred = x - mean
    weighted = centred if w is None else centred * w
    return (matmul(centred, weighted.mT.conj()) / dof).squeeze()


@checked
def corrcoef(input: Tensor):
    """Pearson's correlation coefficients of the variables in the rows of `input`
    (`cov` scaled by the standard deviations; clipped to [-1, 1] for real inputs).

    >>> flow.corrcoef(flow.tensor([[0.0, 1.0, 2.0], [2.0, 1.0, 0.5]]))[0, 1]
    tensor(-0.9820)
    """
    c = cov(input)
    if c.ndim == 0:
        return c / c
    std = sqrt(c.diagonal())
    c = c / std.unsqueeze(1) / std.unsqueeze(0)
    return c if c.dtype.is_complex else c.clamp(-1, 1)


# -- histograms -----------------------------------------------------------------------------
def _dtype(a: Meta | np.ndarray) -> dtypes.DType:
    return a.dtype if isinstance(a, Meta) else dtypes.from_numpy(a.dtype)


def _check_histogram(x, bins, weight, n_bins) -> int:
    """The number of bins, after PyTorch's checks of the operands (metas or arrays: the kernel
    checks too, since the dispatcher asks the meta rule only when a kernel fails)."""
    dtype = _dtype(x)
    if dtype not in _FLOAT_OR_DOUBLE:
        raise DTypeError(f"histogram: expected a float32 or float64 input, got {dtype.name}")
    if bins is not None:
        if len(bins.shape) != 1 or bins.shape[0] < 1 or _dtype(bins) is not dtype:
            raise ShapeError(
                f"histogram: bins must be a non-empty 1-d tensor of the input's dtype, got "
                f"Tensor{list(bins.shape)}:{_dtype(bins).name}"
            )
        n_bins = bins.shape[0] - 1
    elif n_bins <= 0:
        raise TideflowError(f"histogram: bins must be > 0, got {n_bins}")
    if weight is not None and (
        tuple(weight.shape) != tuple(x.shape) or _dtype(weight) is not dtype
    ):
        raise ShapeError(
            f"histogram: weight must have the input's shape and dtype, got "
            f"Tensor{list(weight.shape)}:{_dtype(weight).name} for Tensor{list(x.shape)}:"
            f"{dtype.name}"
        )
    return n_bins


def _check_increasing(op: str, edges: np.ndarray) -> None:
    if np.any(edges[1:] < edges[:-1]) or np.isnan(edges).any():
        raise TideflowError(f"{op}: bin edges must increase monotonically, got {edges.tolist()}")


def _uniform_edges(op: str, data: np.ndarray, bins: int, range, dtype) -> np.ndarray:
    """bins + 1 evenly spaced edges over `range` (the data's extent by default; [0, 1] for no
    data), widened by 0.5 on each side where it is one point, as PyTorch does."""
    if range is not None:
        lo, hi = (float(v) for v in range)
        if lo > hi:
            raise TideflowError(f"{op}: min should not exceed max, got range ({lo}, {hi})")
    elif data.size:
        lo, hi = float(data.min()), float(data.max())
    else:
        lo, hi = 0.0, 1.0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise TideflowError(f"{op}: range of [{lo}, {hi}] is not finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, bins + 1).astype(dtype)


def _count(points: np.ndarray, edges: list[np.ndarray], weight, density: bool) -> np.ndarray:
    """Counts (or weight sums) of the (N, D) points in each cell of the grid the D edge
    arrays draw: along each axis a value falls in the bin whose left edge it reaches, the last
    bin closed on the right; points outside are left out. Densities divide by the total and by
    each cell's volume."""
    inside = np.ones(len(points), bool)
    cells = np.zeros(len(points), np.int64)
    for axis, e in enumerate(edges):
        column = points[:, axis]
        position = np.searchsorted(e, column, side="right") - 1
        position[column == e[-1]] = len(e) - 2  # the last bin's right edge belongs to it
        inside &= (position >= 0) & (position < len(e) - 1)
        cells = cells * (len(e) - 1) + np.clip(position, 0, len(e) - 2)
    shape = tuple(len(e) - 1 for e in edges)
    w = None if weight is None else weight[inside]
    hist = np.bincount(cells[inside], weights=w, minlength=math.prod(shape)).reshape(shape)
    hist = hist.astype(points.dtype)
    if density:
        volumes = np.ones((), points.dtype)
        for e in edges:
            volumes = np.multiply.outer(volumes, np.diff(e))
        hist = hist / hist.sum() / volumes
    return hist.astype(points.dtype, copy=False)


def _histogram_kernel(x, bins, weight, *, n_bins, range, density):
    _check_histogram(x, bins, weight, n_bins)
    data = x.reshape(-1)
    if bins is not None:
        _check_increasing("histogram", bins)
    edges = bins if bins is not None else _uniform_edges("histogram", data, n_bins, range, x.dtype)
    w = None if weight is None else weight.reshape(-1)
    return _count(data.reshape(-1, 1), [edges], w, density), edges.copy()


def _histogram_meta(x, bins, weight, *, n_bins, range, density):
    n_bins = _check_histogram(x, bins, weight, n_bins)
    return Meta((n_bins,), x.dtype), Meta((n_bins + 1,), x.dtype)


def _histogram_sbp(*_, **__) -> list[Signature]:
    # NOTE: shards' counts would add up over a fixed range, but densities and the data's own
    # range need every element: broadcast only
    return [Signature((B, B, B), (B, B))]


_histogram = defop(
    "histogram",
    inputs=("input", "bins", "weight"),
    optional=("bins", "weight"),
    meta=_histogram_meta,
    sbp=_histogram_sbp,
    kernels={"cpu": _histogram_kernel},
    differentiable=False,
    n_out=2,
)


@checked
def histogram(input: Tensor, bins=100, *, range=None, weight: Tensor | None = None,
              density=False):  # fmt: skip
    """The histogram of `input`'s values: `bins` equal-width bins over `range` (the data's
    extent by default), or the edges given as a 1-d increasing tensor. Each bin holds its left
    edge, the last also its right one; values outside are left out. `weight` sums a weight
    per element instead of counting; `density` normalizes to unit area. Returns the counts and
    the bin edges. float32/float64 only; no gradient.

    >>> flow.histogram(flow.tensor([1.0, 2.0, 1.0]), bins=4, range=(0.0, 3.0))
    histogram(hist=tensor([0., 2., 1., 0.]), bin_edges=tensor([0.0000, 0.7500, 1.5000, 2.2500, 3.0000]))
    """  # noqa: E501
    edges = bins if isinstance(bins, Tensor) else None
    n_bins = None if edges is not None else bins
    attrs = {"n_bins": n_bins, "range": None if range is None else tuple(range), "density": density}
    return _HistogramResult(*dispatch(_histogram, (input, edges, weight), attrs))


def _check_histogramdd(x, weight, edges, bin_counts, range) -> tuple[int, ...]:
    """The bins per axis, after PyTorch's checks (metas or arrays, as `_check_histogram`)."""
    op = "histogramdd"
    dtype = _dtype(x)
    if dtype not in _FLOAT_OR_DOUBLE:
        raise DTypeError(f"{op}: expected a float32 or float64 input, got {dtype.name}")
    if len(x.shape) < 2:
        raise ShapeError(
            f"{op}: expected an input of (..., D) points, at least 2 dims, got shape "
            f"{list(x.shape)}"
        )
    d = x.shape[-1]
    counts = tuple(e.shape[0] - 1 for e in edges) if bin_counts is None else bin_counts
    if len(counts) != d:
        raise ShapeError(f"{op}: expected bins for each of the {d} dims, got {len(counts)}")
    for e in edges:
        if len(e.shape) != 1 or e.shape[0] < 1 or _dtype(e) is not dtype:
            raise ShapeError(
                f"{op}: bins must be non-empty 1-d tensors of the input's dtype, got "
                f"Tensor{list(e.shape)}:{_dtype(e).name}"
            )
    if any(c <= 0 for c in counts):
        raise TideflowError(f"{op}: bins must be > 0, got {list(counts)}")
    if range is not None and len(range) != 2 * d:
        raise ShapeError(
            f"{op}: expected {2 * d} range values (min, max per dim), got {len(range)}"
        )
    if weight is not None and (weight.shape != x.shape[:-1] or _dtype(weight) is not dtype):
        raise ShapeError(
            f"{op}: weight must have one value per point, of the input's dtype: shape "
            f"{list(x.shape[:-1])}, got Tensor{list(weight.shape)}:{_dtype(weight).name}"
        )
    return counts


def _histogramdd_kernel(x, weight, *edges, bin_counts, range, density):
    counts = _check_histogramdd(x, weight, edges, bin_counts, range)
    points = x.reshape(-1, x.shape[-1])
    for e in edges:
        _check_increasing("histogramdd", e)
    if bin_counts is not None:
        edges = tuple(
            _uniform_edges(
                "histogramdd",
                points[:, axis],
                n,
                None if range is None else range[2 * axis : 2 * axis + 2],
                x.dtype,
            )
            for axis, n in enumerate(counts)
        )
    w = None if weight is None else weight.reshape(-1)
    return (_count(points, list(edges), w, density), *(e.copy() for e in edges))


def _histogramdd_meta(x, weight, *edges, bin_counts, range, density):
    counts = _check_histogramdd(x, weight, edges, bin_counts, range)
    return (Meta(counts, x.dtype), *(Meta((n + 1,), x.dtype) for n in counts))


def _histogramdd_sbp(x, weight, *edges, bin_counts, **_) -> list[Signature]:
    # NOTE: broadcast only, as histogram's
    n_out = 1 + (len(edges) if bin_counts is None else len(bin_counts))
    ins = (B, None if weight is None else B, *(B for _ in edges))
    return [Signature(ins, (B,) * n_out)]


_histogramdd = defop(
    "histogramdd",
    inputs=("input", "weight", "*bins"),
    optional=("weight",),
    meta=_histogramdd_meta,
    sbp=_histogramdd_sbp,
    kernels={"cpu": _histogramdd_kernel},
    differentiable=False,
    n_out=None,
)


@checked
def histogramdd(input: Tensor, bins=10, *, range=None, weight: Tensor | None = None,
                density=False):  # fmt: skip
    """The D-dimensional histogram of the points in the last dim of `input` (..., D): `bins`
    per dim (an int for all, one int each, or one 1-d tensor of edges each), over `range`
    (min and max of each dim in turn; the points' extent by default). Returns the counts (or
    `weight` sums, one weight per point; densities with `density`) and a tuple of the bin
    edges. float32/float64 only; no gradient.

    >>> points = flow.tensor([[0.0, 1.0], [1.0, 0.0], [2.0, 0.0], [2.0, 2.0]])
    >>> flow.histogramdd(points, bins=2).hist  # x in [0, 1) or [1, 2], y likewise
    tensor([[0., 1.],
            [2., 1.]])
    """
    if isinstance(bins, tuple | list) and bins and isinstance(bins[0], Tensor):
        edges, bin_counts = tuple(bins), None
    else:
        dims = input.shape[-1] if input.ndim else 0
        edges = ()
        bin_counts = tuple(bins) if isinstance(bins, tuple | list) else (bins,) * dims
    attrs = {
        "bin_counts": bin_counts,
        "range": None if range is None else tuple(range),
        "density": density,
    }
    hist, *edges_out = dispatch(_histogramdd, (input, weight, *edges), attrs)
    return _HistogramddResult(hist, tuple(edges_out))


methods(
    quantile=quantile,
    nanquantile=nanquantile,
    cov=cov,
    corrcoef=corrcoef,
    histogram=histogram,
)
