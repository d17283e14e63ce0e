"""Argument helpers shared by the layer families (PyTorch's `nn.modules.utils`)."""

from __future__ import annotations

from collections.abc import Iterable


def _ntuple(n: int, name: str):
    def parse(x) -> tuple:
        return tuple(x) if isinstance(x, Iterable) else (x,) * n

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    """Per-dim amounts (first dim first) as `F.pad` wants them: last dim first, each `n`
    times. `_reverse_repeat_tuple((1, 2), 2) == (2, 2, 1, 1)`"""
    return tuple(x for x in reversed(t) for _ in range(n))
