"""Tensors assembled from the elements of others: `cartesian_prod`, `combinations`,
`block_diag` and `vander`.

Each is a composition of indexing, concatenation and scans, as in PyTorch, so gradients flow to
the elements they are built from.
"""

from __future__ import annotations

import functools
import itertools
import math

from ..framework import dtype as dtypes
from ..framework.errors import DTypeError, ShapeError, TideflowError
from ..framework.tensor import Tensor
from ._rules import checked
from .creation import on_placement_of, tensor, zeros
from .indexing import index_select
from .shape import cat, meshgrid, stack

__all__ = ["cartesian_prod", "combinations", "block_diag", "vander"]

# NOTE: combinations enumerates positions in Python; past this many it refuses (PyTorch's
# would run out of memory)
_MAX_ELEMENTS = 2**28


def _require_vector(op: str, t: Tensor, name: str = "input") -> None:
    if t.ndim != 1:
        raise ShapeError(f"{op}: expected {name} to be a 1-d tensor, got shape {list(t.shape)}")


@checked
def cartesian_prod(*tensors: Tensor):
    """Every tuple taking one element of each 1-d tensor, in row-major order: a
    `(n_1 * ... * n_k, k)` tensor (a single tensor is returned as it is). The tensors share one
    dtype.

    >>> flow.cartesian_prod(flow.tensor([1, 2]), flow.tensor([3, 4]))
    tensor([[1, 3],
            [1, 4],
            [2, 3],
            [2, 4]])
    """
    if not tensors:
        raise TideflowError("cartesian_prod: expected at least one tensor")
    for i, t in enumerate(tensors):
        _require_vector("cartesian_prod", t, f"tensor {i}")
    if len(tensors) == 1:
        return tensors[0]
    dtype_names = {t.dtype.name for t in tensors}
    if len(dtype_names) > 1:
        raise DTypeError(
            f"cartesian_prod: expected tensors of one dtype, got {', '.join(sorted(dtype_names))}"
        )
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], dim=1)


@functools.lru_cache(maxsize=64)
def _combination_positions(n: int, r: int, with_replacement: bool) -> tuple[int, ...]:
    """The positions each combination takes, flattened, in lexicographic order."""
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    return tuple(i for combination in pick(range(n), r) for i in combination)


@checked
def combinations(input: Tensor, r=2, with_replacement=False):
    """The length-`r` combinations of the elements of the 1-d `input` (by position, in
    lexicographic order; with repeats when `with_replacement`), one per row. r = 0 gives an
    empty 1-d tensor.

    >>> flow.combinations(flow.tensor([1, 2, 3]))
    tensor([[1, 2],
            [1, 3],
            [2, 3]])
    """
    _require_vector("combinations", input)
    if isinstance(r, bool) or not isinstance(r, int) or r < 0:
        raise TideflowError(f"combinations: expected r to be a non-negative int, got {r!r}")
    if r == 0:
        return input[:0]
    n = input.shape[0]
    count = math.comb(n + r - 1, r) if with_replacement else math.comb(n, r)
    if count == 0:  # r > n, or nothing to choose from
        return input[:0].reshape(0, r)
    if count * r > _MAX_ELEMENTS:
        raise TideflowError(
            f"combinations: {count} combinations of {r} elements are too many to hold"
        )
    positions = _combination_positions(n, r, with_replacement)
    index = tensor(positions, dtype=dtypes.int64, **on_placement_of(input))
    return index_select(input, 0, index).reshape(-1, r)


@checked
def block_diag(*tensors: Tensor):
    """A block diagonal matrix of the given blocks, in order (a 0-d tensor is a 1x1 block, a
    1-d one a row), zeros elsewhere; the blocks' dtypes promote together.

    >>> flow.block_diag(flow.tensor([[1, 2]]), flow.tensor(3))
    tensor([[1, 2, 0],
            [0, 0, 3]])
    """
    blocks = []
    for i, t in enumerate(tensors):
        if t.ndim > 2:
            raise ShapeError(
                f"block_diag: expected blocks of two or fewer dimensions, got shape "
                f"{list(t.shape)} for block {i}"
            )
        blocks.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not blocks:
        return zeros(1, 0)
    # PyTorch's promotion: 0-d blocks count as 0-d tensors (below dimensioned ones)
    dtype = dtypes.result_type(
        [t.dtype for t in tensors if t.ndim], [t.dtype for t in tensors if not t.ndim], []
    )
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        height, cols = b.shape
        placed = on_placement_of(b)
        before = zeros(height, left, dtype=dtype, **placed)
        after = zeros(height, width - left - cols, dtype=dtype, **placed)
        rows.append(cat([before, b.to(dtype), after], dim=1))
        left += cols
    return cat(rows, dim=0)


@checked
def vander(x: Tensor, N=None, increasing=False):
    """The Vandermonde matrix of the 1-d `x`: column j holds `x ** (N - 1 - j)` (`x ** j` when
    `increasing`), N columns (len(x) by default). Built by running products, so it is exact
    for integers (int64) and differentiable at 0.

    >>> flow.vander(flow.tensor([1, 2, 3]))
    tensor([[1, 1, 1],
            [4, 2, 1],
            [9, 3, 1]])
    """
    _require_vector("vander", x, "x")
    n = x.shape[0] if N is None else N
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TideflowError(f"vander: expected N to be a non-negative int, got {N!r}")
    if n == 0:
        return x.unsqueeze(1)[:, :0].to(_vander_dtype(x.dtype))
    column = x.unsqueeze(1).to(_vander_dtype(x.dtype))
    powers = cat([column.new_ones(x.shape[0], 1), column.expand(x.shape[0], n - 1)], 1)
    powers = powers.cumprod(1)
    return powers if increasing else powers.flip(1)


def _vander_dtype(dtype: dtypes.DType) -> dtypes.DType:
    """Running products of integers (and bools) are int64, as cumprod's."""
    return dtype if dtype.is_floating_point or dtype.is_complex else dtypes.int64
