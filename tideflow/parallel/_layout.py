"""Shard arithmetic: which part of the logical tensor each rank holds.

A split of n elements over k ranks gives the first `n % k` ranks one element more (OneFlow's
and `np.array_split`'s rule). On an n-D placement the axes apply in order: axis 1 splits what
axis 0 left to the rank, so two axes splitting one dim nest.
"""

from __future__ import annotations

from ..framework.sbp import B, P, SbpParallel, Split


def split_sizes(n: int, parts: int) -> list[int]:
    base, extra = divmod(n, parts)
    return [base + (i < extra) for i in range(parts)]


def split_range(n: int, parts: int, index: int) -> tuple[int, int]:
    base, extra = divmod(n, parts)
    start = index * base + min(index, extra)
    return start, start + base + (index < extra)


def dual(value: SbpParallel) -> SbpParallel:
    """The layout of a tensor's gradient on the ranks: a split gradient is split the same
    way; the ranks' gradients of a broadcast tensor are partial (their sum is the gradient),
    and every rank of a partial tensor gets the whole gradient."""
    if value is B:
        return P
    if value is P:
        return B
    return value


def dual_nd(nd: tuple) -> tuple:
    return tuple(dual(s) for s in nd)


def shard_shape(shape: tuple, nd: tuple, hierarchy: tuple, coord: tuple, upto=None) -> tuple:
    """The shape rank `coord` holds (after placement axes `[0, upto)`, default all)."""
    out = list(shape)
    for axis, s in enumerate(nd[:upto]):
        if isinstance(s, Split):
            lo, hi = split_range(out[s.axis], hierarchy[axis], coord[axis])
            out[s.axis] = hi - lo
    return tuple(out)


def shard_index(shape: tuple, nd: tuple, hierarchy: tuple, coord: tuple) -> tuple:
    """The slices of the logical tensor that rank `coord` holds."""
    starts = [0] * len(shape)
    sizes = list(shape)
    for axis, s in enumerate(nd):
        if isinstance(s, Split):
            lo, hi = split_range(sizes[s.axis], hierarchy[axis], coord[axis])
            starts[s.axis] += lo
            sizes[s.axis] = hi - lo
    return tuple(slice(a, a + n) for a, n in zip(starts, sizes, strict=True))
