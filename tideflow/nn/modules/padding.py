"""Padding layers: constant (and zero), reflection, replication and circular padding of the
last 1, 2 or 3 dims. `padding` is an int (every side) or per-side amounts in `F.pad`'s order,
last dim first: (left, right, top, bottom, front, back)."""

from __future__ import annotations

from typing import ClassVar

from .. import functional as F
from .module import Module
from .utils import _ntuple


class _PadNd(Module):
    _sides: ClassVar[int]  # 2 * the number of padded dims
    _mode: ClassVar[str]  # F.pad's mode

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(self._sides, "_padding")(padding)

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    _mode = "constant"

    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dim with `value`.

    >>> flow.nn.ConstantPad1d((1, 2), 3.5)(flow.zeros(1, 2))
    tensor([[3.5000, 0.0000, 0.0000, 3.5000, 3.5000]])
    """

    _sides = 2


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dims with `value`.

    >>> flow.nn.ConstantPad2d((1, 0, 1, 0), 3.5)(flow.zeros(1, 1, 1))
    tensor([[[3.5000, 3.5000],
             [3.5000, 0.0000]]])
    """

    _sides = 4


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dims with `value`.

    >>> flow.nn.ConstantPad3d(1, 3.5)(flow.zeros(1, 2, 2, 2)).shape
    tideflow.Size([1, 4, 4, 4])
    """

    _sides = 6


class ZeroPad1d(ConstantPad1d):
    """Pad the last dim with zeros.

    >>> flow.nn.ZeroPad1d(2)(flow.ones(1, 2))
    tensor([[0., 0., 1., 1., 0., 0.]])
    """

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last 2 dims with zeros.

    >>> flow.nn.ZeroPad2d((1, 1, 2, 0))(flow.ones(1, 1, 3, 3)).shape
    tideflow.Size([1, 1, 5, 5])
    """

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last 3 dims with zeros.

    >>> flow.nn.ZeroPad3d((1, 1, 0, 0, 2, 0))(flow.ones(1, 2, 2, 2)).shape
    tideflow.Size([1, 4, 2, 4])
    """

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Mirror the last dim at its edges, without repeating the edge value.

    >>> flow.nn.ReflectionPad1d(2)(flow.tensor([[0.0, 1.0, 2.0, 3.0]]))
    tensor([[2., 1., 0., 1., 2., 3., 2., 1.]])
    """

    _sides, _mode = 2, "reflect"


class ReflectionPad2d(_PadNd):
    """Mirror the last 2 dims at their edges.

    >>> flow.nn.ReflectionPad2d((1, 0, 1, 0))(flow.tensor([[[0.0, 1.0], [2.0, 3.0]]]))
    tensor([[[3., 2., 3.],
             [1., 0., 1.],
             [3., 2., 3.]]])
    """

    _sides, _mode = 4, "reflect"


class ReflectionPad3d(_PadNd):
    """Mirror the last 3 dims at their edges.

    >>> flow.nn.ReflectionPad3d(1)(flow.ones(1, 2, 2, 2)).shape
    tideflow.Size([1, 4, 4, 4])
    """

    _sides, _mode = 6, "reflect"


class ReplicationPad1d(_PadNd):
    """Repeat the edge values of the last dim.

    >>> flow.nn.ReplicationPad1d((2, 1))(flow.tensor([[0.0, 1.0, 2.0]]))
    tensor([[0., 0., 0., 1., 2., 2.]])
    """

    _sides, _mode = 2, "replicate"


class ReplicationPad2d(_PadNd):
    """Repeat the edge values of the last 2 dims.

    >>> flow.nn.ReplicationPad2d((1, 0, 1, 0))(flow.tensor([[[0.0, 1.0], [2.0, 3.0]]]))
    tensor([[[0., 0., 1.],
             [0., 0., 1.],
             [2., 2., 3.]]])
    """

    _sides, _mode = 4, "replicate"


class ReplicationPad3d(_PadNd):
    """Repeat the edge values of the last 3 dims.

    >>> flow.nn.ReplicationPad3d(1)(flow.ones(1, 2, 2, 2)).shape
    tideflow.Size([1, 4, 4, 4])
    """

    _sides, _mode = 6, "replicate"


class CircularPad1d(_PadNd):
    """Wrap the last dim around.

    >>> flow.nn.CircularPad1d(2)(flow.tensor([[0.0, 1.0, 2.0, 3.0]]))
    tensor([[2., 3., 0., 1., 2., 3., 0., 1.]])
    """

    _sides, _mode = 2, "circular"


class CircularPad2d(_PadNd):
    """Wrap the last 2 dims around.

    >>> flow.nn.CircularPad2d((1, 0, 1, 0))(flow.tensor([[[0.0, 1.0], [2.0, 3.0]]]))
    tensor([[[3., 2., 3.],
             [1., 0., 1.],
             [3., 2., 3.]]])
    """

    _sides, _mode = 4, "circular"


class CircularPad3d(_PadNd):
    """Wrap the last 3 dims around.

    >>> flow.nn.CircularPad3d(1)(flow.ones(1, 2, 2, 2)).shape
    tideflow.Size([1, 4, 4, 4])
    """

    _sides, _mode = 6, "circular"
