"""`flow.utils.global_view.global_mode`: a block in which creators (`flow.ones`, `flow.randn`,
`flow.arange`, ...) called without `placement=`/`sbp=` make global tensors on a given placement
and sbp, so that code written for local tensors (a model's forward making its own masks or
noise) runs on global ones unchanged. `current_global_mode()` tells the enclosing one.
"""

from __future__ import annotations

from ..ops._default_layout import DEFAULT
from .placement import placement as Placement
from .sbp import sbp as Sbp

__all__ = ["current_global_mode", "global_mode"]


class global_mode:  # OneFlow's name
    """Inside `with global_mode(True, placement=p, sbp=s):` creators make global tensors on
    `p` with `s` (a `device=` they are given is ignored); `global_mode(False)` returns to
    local tensors within an enabled block. Blocks nest; leaving one restores the outer mode.
    Every rank enters the same blocks.

    >>> p = flow.placement("cpu", ranks=[0])
    >>> with flow.utils.global_view.global_mode(True, placement=p, sbp=flow.sbp.broadcast):
    ...     x = flow.zeros(2, 3)
    >>> x.is_global, x.placement == p
    (True, True)
    """

    def __init__(self, enabled: bool, placement=None, sbp=None) -> None:
        if enabled:
            if placement is None or sbp is None:
                raise ValueError(
                    "global_mode: an enabled global mode needs both placement= and sbp= "
                    f"(got placement={placement!r}, sbp={sbp!r})"
                )
            if not isinstance(placement, Placement):
                raise TypeError(
                    f"global_mode: placement must be a flow.placement, got {placement!r}"
                )
            sbps = tuple(sbp) if isinstance(sbp, list | tuple) else (sbp,)
            if not sbps or not all(isinstance(s, Sbp) for s in sbps):
                raise TypeError(
                    f"global_mode: sbp must be a flow.sbp or a sequence of them, got {sbp!r}"
                )
            self._layout = (placement, sbps)
        else:
            self._layout = None
        self._outer: list = []

    def __enter__(self) -> global_mode:
        self._outer.append(DEFAULT.layout)
        DEFAULT.layout = self._layout
        return self

    def __exit__(self, *exc) -> None:
        DEFAULT.layout = self._outer.pop()


class current_global_mode:  # OneFlow's name
    """The global mode in force where it is made: `is_enabled`, `placement`, `sbp` (a tuple,
    one per placement axis; None when not enabled)."""

    def __init__(self) -> None:
        self._layout = DEFAULT.layout

    @property
    def is_enabled(self) -> bool:
        return self._layout is not None

    @property
    def placement(self):
        return None if self._layout is None else self._layout[0]

    @property
    def sbp(self):
        return None if self._layout is None else self._layout[1]
