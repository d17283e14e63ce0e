"""`placement`: the ranks a global tensor lives on, arranged as a 1-D or n-D grid.

A 1-D placement (`ranks=[0, 1, 2, 3]`) lays a tensor over four ranks with one SBP; an n-D one
(`ranks=[[0, 1], [2, 3]]`) has one SBP per grid axis, e.g. split the batch over the rows
(data parallel) and the weights over the columns (tensor parallel).
"""

from __future__ import annotations

import numpy as np

from ..framework.device import check_available
from ..framework.errors import DeviceError
from ..framework.tensor import Size
from . import _comm

__all__ = ["placement"]

_TYPES = ("cpu", "cuda")


class placement:  # OneFlow's name (lower case, like a function)
    """A set of ranks and their arrangement (`hierarchy`). Equal placements hold the same
    ranks in the same grid; global tensors on different placements cannot meet in one op.

    `ranks` is anything NumPy reads as an integer array: a list, a nested list for an n-D
    grid, a range, an array. As in OneFlow, `.ranks` gives them back as a NumPy array in
    the grid's shape, so `.ranks.shape` / `.ranks.ndim` describe the grid.

    >>> p = flow.placement(type="cpu", ranks=[0])
    >>> p
    tideflow.placement(type="cpu", ranks=[0])
    >>> p.ranks
    array([0])
    >>> p.ranks.shape == tuple(p.hierarchy)
    True
    """

    __slots__ = ("_grid", "_type")

    def __init__(self, type: str = "cpu", ranks=None) -> None:
        if type not in _TYPES:
            raise DeviceError(
                f"placement: unknown device type {type!r} (expected one of {list(_TYPES)})"
            )
        if ranks is None:
            raise TypeError("placement: `ranks` is required, e.g. placement('cpu', ranks=[0, 1])")
        self._type = type
        self._grid = _rank_grid(ranks)

    @classmethod
    def all(cls, type: str = "cpu") -> placement:
        """Every rank of the world, in rank order (1-D).

        >>> flow.placement.all("cpu").ranks
        array([0])
        """
        return cls(type, list(range(_comm.world_size())))

    # -- what users see ----------------------------------------------------------------------
    @property
    def type(self) -> str:
        return self._type

    @property
    def ranks(self) -> np.ndarray:
        """The ranks as an int64 array in the grid's shape (a copy: the placement is
        immutable)."""
        return self._grid.copy()

    @property
    def hierarchy(self) -> Size:
        """The grid's shape: one entry per placement axis (OneFlow's older spelling of
        `ranks.shape`)."""
        return Size(self._grid.shape)

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, placement)
            and self._type == other._type
            and self._grid.shape == other._grid.shape
            and bool((self._grid == other._grid).all())
        )

    def __hash__(self) -> int:
        return hash((self._type, self._grid.shape, self._grid.tobytes()))

    def __repr__(self) -> str:
        return f'tideflow.placement(type="{self._type}", ranks={self._grid.tolist()})'

    # -- what global tensors use -------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return self._grid.ndim

    @property
    def flat_ranks(self) -> tuple[int, ...]:
        return tuple(self._grid.ravel().tolist())

    def coordinate(self, rank: int) -> tuple[int, ...] | None:
        """The grid position of world rank `rank`, or None if it is not in the placement."""
        where = np.argwhere(self._grid == rank)
        return tuple(where[0].tolist()) if len(where) else None

    def axis_group(self, axis: int, coord: tuple[int, ...]) -> tuple[int, ...]:
        """The ranks that differ from `coord` only along `axis`, in grid order: they convert
        the SBP of that axis among themselves."""
        index = list(coord)
        index[axis] = slice(None)
        return tuple(self._grid[tuple(index)].tolist())

    def check_device(self, what: str) -> None:
        try:
            check_available(self._type)
        except DeviceError as e:
            raise DeviceError(f"{what}: placement {self!r}: {e}") from None


def _rank_grid(ranks) -> np.ndarray:
    """`ranks` as a read-only int64 grid, checked: rectangular, distinct ranks of the world."""
    if isinstance(ranks, range):
        ranks = list(ranks)
    try:
        grid = np.array(ranks)
    except ValueError:
        raise ValueError(f"placement: ranks must form a rectangular grid, got {ranks!r}") from None
    if grid.ndim == 0:
        grid = grid.reshape(1)
    if grid.size == 0:
        raise ValueError("placement: ranks must not be empty")
    if grid.dtype.kind not in "iu":
        raise TypeError(f"placement: ranks must be integers, got {ranks!r}")
    flat = grid.ravel().tolist()
    if len(set(flat)) != len(flat):
        twice = sorted({r for r in flat if flat.count(r) > 1})
        raise ValueError(f"placement: ranks {twice} appear more than once in {grid.tolist()}")
    size = _comm.world_size()
    outside = [r for r in flat if not 0 <= r < size]
    if outside:
        raise ValueError(
            f"placement: ranks {outside} are outside the world of {size} "
            f"process{'es' if size > 1 else ''} (ranks 0 to {size - 1})"
        )
    grid = grid.astype(np.int64)
    grid.flags.writeable = False
    return grid
