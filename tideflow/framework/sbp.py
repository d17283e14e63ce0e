"""SBP values: how one logical tensor is laid over the ranks of one placement axis.

`S(i)`: each rank holds a slice along axis i; `B`: each rank holds the whole tensor; `P`: each
rank holds a tensor of the full shape and the logical value is their sum. Ops declare which
combinations they accept as `Signature`s; `parallel/` does inference and boxing with them.
"""

from __future__ import annotations

from typing import NamedTuple


class SbpParallel:
    __slots__ = ()


class Split(SbpParallel):
    __slots__ = ("axis",)

    def __init__(self, axis: int) -> None:
        self.axis = axis

    def __eq__(self, other) -> bool:
        return isinstance(other, Split) and other.axis == self.axis

    def __hash__(self) -> int:
        return hash(("S", self.axis))

    def __repr__(self) -> str:
        return f"S({self.axis})"


class _Broadcast(SbpParallel):
    __slots__ = ()

    def __repr__(self) -> str:
        return "B"

    def __reduce__(self) -> str:  # copies and pickles stay the singleton (compared by `is`)
        return "B"


class _PartialSum(SbpParallel):
    __slots__ = ()

    def __repr__(self) -> str:
        return "P"

    def __reduce__(self) -> str:
        return "P"


def S(axis: int) -> Split:
    return Split(axis)


B = _Broadcast()
P = _PartialSum()


class Signature(NamedTuple):
    """One accepted layout: an SBP per tensor input (None for non-tensor args), one per output."""

    ins: tuple
    outs: tuple

    def __repr__(self) -> str:
        ins = ", ".join("-" if s is None else repr(s) for s in self.ins)
        return f"{ins} -> {', '.join(map(repr, self.outs))}"
