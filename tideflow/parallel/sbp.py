"""`flow.sbp`: how a global tensor is laid over one axis of its placement.

- `split(dim)`: each rank holds a slice along `dim` (the first `size % n` ranks one row more);
- `broadcast`: each rank holds the whole tensor;
- `partial_sum`: each rank holds a tensor of the full shape; the value is their sum.

These are the user-facing names of the framework's `S(i)`, `B` and `P`, which op signatures
use; a global tensor keeps the framework values and shows these.
"""

from __future__ import annotations

import operator

from ..framework.errors import TensorIndexError
from ..framework.sbp import B, P, SbpParallel, Split

__all__ = ["broadcast", "partial_sum", "sbp", "split"]


class sbp:  # OneFlow's name: the type of `flow.sbp.split(0)` and `flow.sbp.broadcast`
    """One placement axis's layout. Make one with `split(dim)`, or use `broadcast` and
    `partial_sum`.

    >>> flow.sbp.split(0)
    tideflow.sbp.split(dim=0)
    >>> flow.sbp.split(1) == flow.sbp.split(1)
    True
    >>> flow.sbp.broadcast() is flow.sbp.broadcast
    True
    """

    __slots__ = ("value",)

    def __init__(self, value: SbpParallel) -> None:
        if not isinstance(value, SbpParallel):
            raise TypeError(
                "sbp: use flow.sbp.split(dim), flow.sbp.broadcast or flow.sbp.partial_sum"
            )
        self.value = value

    @property
    def dim(self) -> int | None:
        """The split dimension (None for broadcast and partial_sum)."""
        return self.value.axis if isinstance(self.value, Split) else None

    def __call__(self) -> sbp:
        """The sbp itself: OneFlow spells `broadcast` and `partial_sum` either as values or
        as calls (`flow.sbp.broadcast()`), so both forms work here too."""
        return self

    def __eq__(self, other) -> bool:
        return isinstance(other, sbp) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        if isinstance(self.value, Split):
            return f"tideflow.sbp.split(dim={self.value.axis})"
        return "tideflow.sbp.broadcast" if self.value is B else "tideflow.sbp.partial_sum"


def split(dim: int) -> sbp:
    """Each rank holds a slice of `dim` (a negative dim counts from the end of the tensor).

    >>> flow.sbp.split(1).dim
    1
    """
    try:
        dim = operator.index(dim)
    except TypeError:
        raise TypeError(f"sbp.split: dim must be an integer, got {dim!r}") from None
    return sbp(Split(dim))


broadcast = sbp(B)
partial_sum = sbp(P)


def of_tensor(arg, t):
    """`arg` as given to a call that converts many tensors: an sbp (or a sequence of them),
    or a function of the tensor returning one. sbp objects are callable themselves
    (`broadcast()`), so they are not taken for such a function."""
    return arg(t) if callable(arg) and not isinstance(arg, sbp) else arg


def public(value: SbpParallel) -> sbp:
    """The user-facing object of a framework SBP value."""
    if value is B:
        return broadcast
    if value is P:
        return partial_sum
    return sbp(value)


def describe(nd: tuple) -> str:
    """A layout for messages: `(split(dim=0), broadcast)`."""
    names = [repr(public(s)).removeprefix("tideflow.sbp.") for s in nd]
    return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"


def nd_sbp(arg, ndim: int, grid_ndim: int, what: str) -> tuple[SbpParallel, ...]:
    """`arg` (one sbp, or a sequence with one per placement axis) as framework values, split
    dims normalized for a tensor of `ndim` dims; clear errors otherwise."""
    items = list(arg) if isinstance(arg, list | tuple) else [arg]
    if len(items) != grid_ndim:
        raise ValueError(
            f"{what}: {len(items)} sbp given for a {grid_ndim}-d placement (one per placement "
            "axis is needed)"
        )
    values = []
    for item in items:
        value = item.value if isinstance(item, sbp) else item
        if not isinstance(value, SbpParallel):
            raise TypeError(
                f"{what}: expected flow.sbp.split(dim), flow.sbp.broadcast or "
                f"flow.sbp.partial_sum, got {item!r}"
            )
        if isinstance(value, Split):
            value = Split(_split_dim(value.axis, ndim, what))
        values.append(value)
    return tuple(values)


def _split_dim(dim: int, ndim: int, what: str) -> int:
    if not -ndim <= dim < ndim:
        expected = f"expected -{ndim} to {ndim - 1}" if ndim else "a 0-d tensor cannot be split"
        raise TensorIndexError(
            f"{what}: split(dim={dim}) is out of range for a {ndim}-d tensor ({expected})"
        )
    return dim % ndim
