"""Pooling: MaxPool, AvgPool, AdaptiveMaxPool, AdaptiveAvgPool, LPPool and MaxUnpool in 1, 2
and 3 dims.

The hyperparameters are stored as given (AvgPool1d normalizes them to 1-tuples), as in
PyTorch, so printed layers and attribute reads look the same.
"""

from __future__ import annotations

from .. import functional as F
from .module import Module
from .utils import _pair, _single, _triple


class _MaxPoolNd(Module):
    def __init__(
        self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )

    def _pool(self, pool, input):
        return pool(
            input, self.kernel_size, self.stride, self.padding, self.dilation,
            ceil_mode=self.ceil_mode, return_indices=self.return_indices,
        )  # fmt: skip


class MaxPool1d(_MaxPoolNd):
    """Max over sliding windows of a (N, C, L) or (C, L) input; `stride` defaults to
    `kernel_size`. With `return_indices`, also returns each maximum's position.

    >>> flow.nn.MaxPool1d(3, stride=2)(flow.randn(20, 16, 50)).shape
    tideflow.Size([20, 16, 24])
    """

    def forward(self, input):
        return self._pool(F.max_pool1d, input)


class MaxPool2d(_MaxPoolNd):
    """Max over sliding windows of a (N, C, H, W) or (C, H, W) input.

    >>> flow.nn.MaxPool2d((3, 2), stride=(2, 1))(flow.randn(20, 16, 50, 32)).shape
    tideflow.Size([20, 16, 24, 31])
    """

    def forward(self, input):
        return self._pool(F.max_pool2d, input)


class MaxPool3d(_MaxPoolNd):
    """Max over sliding windows of a (N, C, D, H, W) or (C, D, H, W) input.

    >>> flow.nn.MaxPool3d(2)(flow.randn(2, 3, 4, 6, 8)).shape
    tideflow.Size([2, 3, 2, 3, 4])
    """

    def forward(self, input):
        return self._pool(F.max_pool3d, input)


class _AvgPoolNd(Module):
    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """Mean over sliding windows of a (N, C, L) or (C, L) input; `count_include_pad` counts
    the zero padding in each window's divisor.

    >>> flow.nn.AvgPool1d(3, stride=2)(flow.tensor([[[1.0, 2, 3, 4, 5, 6, 7]]]))
    tensor([[[2., 4., 6.]]])
    """

    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(
            _single(kernel_size), _single(stride if stride is not None else kernel_size),
            _single(padding), ceil_mode, count_include_pad,
        )  # fmt: skip

    def forward(self, input):
        return F.avg_pool1d(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad,
        )  # fmt: skip


class _AvgPoolWithDivisor(_AvgPoolNd):
    def __init__(
        self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
        count_include_pad: bool = True, divisor_override: int | None = None,
    ) -> None:  # fmt: skip
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def _pool(self, pool, input):
        return pool(
            input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
            self.count_include_pad, self.divisor_override,
        )  # fmt: skip


class AvgPool2d(_AvgPoolWithDivisor):
    """Mean over sliding windows of a (N, C, H, W) or (C, H, W) input; `divisor_override`
    replaces every window's element count as the divisor.

    >>> flow.nn.AvgPool2d((3, 2), stride=(2, 1))(flow.randn(20, 16, 50, 32)).shape
    tideflow.Size([20, 16, 24, 31])
    """

    def forward(self, input):
        return self._pool(F.avg_pool2d, input)


class AvgPool3d(_AvgPoolWithDivisor):
    """Mean over sliding windows of a (N, C, D, H, W) or (C, D, H, W) input.

    >>> flow.nn.AvgPool3d(2)(flow.randn(2, 3, 4, 6, 8)).shape
    tideflow.Size([2, 3, 2, 3, 4])
    """

    def forward(self, input):
        return self._pool(F.avg_pool3d, input)


class _AdaptiveMaxPoolNd(Module):
    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max pooling of a (N, C, L) or (C, L) input to `output_size` positions, whatever L.

    >>> flow.nn.AdaptiveMaxPool1d(5)(flow.randn(1, 64, 8)).shape
    tideflow.Size([1, 64, 5])
    """

    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max pooling of a (N, C, H, W) or (C, H, W) input to `output_size` (an int, or a pair
    where None keeps that dim's size).

    >>> flow.nn.AdaptiveMaxPool2d((None, 7))(flow.randn(1, 64, 10, 9)).shape
    tideflow.Size([1, 64, 10, 7])
    """

    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max pooling of a (N, C, D, H, W) or (C, D, H, W) input to `output_size`.

    >>> flow.nn.AdaptiveMaxPool3d(2)(flow.randn(1, 3, 5, 6, 7)).shape
    tideflow.Size([1, 3, 2, 2, 2])
    """

    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class _AdaptiveAvgPoolNd(Module):
    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Average pooling of a (N, C, L) or (C, L) input to `output_size` positions.

    >>> flow.nn.AdaptiveAvgPool1d(5)(flow.randn(1, 64, 8)).shape
    tideflow.Size([1, 64, 5])
    """

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Average pooling of a (N, C, H, W) or (C, H, W) input to `output_size`;
    `AdaptiveAvgPool2d(1)` is global average pooling.

    >>> flow.nn.AdaptiveAvgPool2d(1)(flow.randn(2, 64, 7, 7)).shape
    tideflow.Size([2, 64, 1, 1])
    """

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """Average pooling of a (N, C, D, H, W) or (C, D, H, W) input to `output_size`.

    >>> flow.nn.AdaptiveAvgPool3d((1, None, 2))(flow.randn(1, 3, 5, 6, 7)).shape
    tideflow.Size([1, 3, 1, 6, 2])
    """

    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class _LPPoolNd(Module):
    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, ceil_mode={self.ceil_mode}"
        )

    def _pool(self, pool, input):
        return pool(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool1d(_LPPoolNd):
    """Power-average pooling: each window's (sum of x ** p) ** (1 / p) over a (N, C, L) or
    (C, L) input; p = 1 is sum pooling, large p approaches max pooling.

    >>> flow.nn.LPPool1d(2, 3, stride=2)(flow.randn(20, 16, 50)).shape
    tideflow.Size([20, 16, 24])
    """

    def forward(self, input):
        return self._pool(F.lp_pool1d, input)


class LPPool2d(_LPPoolNd):
    """Power-average pooling of a (N, C, H, W) or (C, H, W) input (see `LPPool1d`).

    >>> flow.nn.LPPool2d(2, (3, 2), stride=(2, 1))(flow.randn(20, 16, 50, 32)).shape
    tideflow.Size([20, 16, 24, 31])
    """

    def forward(self, input):
        return self._pool(F.lp_pool2d, input)


class LPPool3d(_LPPoolNd):
    """Power-average pooling of a (N, C, D, H, W) or (C, D, H, W) input (see `LPPool1d`).

    >>> flow.nn.LPPool3d(2, 2)(flow.randn(2, 3, 4, 4, 4)).shape
    tideflow.Size([2, 3, 2, 2, 2])
    """

    def forward(self, input):
        return self._pool(F.lp_pool3d, input)


class _MaxUnpoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        self.kernel_size = self._as_tuple(kernel_size)
        self.stride = self._as_tuple(stride if stride is not None else kernel_size)
        self.padding = self._as_tuple(padding)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def _unpool(self, unpool, input, indices, output_size):
        return unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of `MaxPool1d`: zeros except each value at its argmax position
    (`indices` from `MaxPool1d(..., return_indices=True)`); `output_size` picks among the
    sizes the pooling could have come from.

    >>> y, i = flow.nn.MaxPool1d(2, return_indices=True)(flow.randn(1, 1, 8))
    >>> flow.nn.MaxUnpool1d(2)(y, i).shape
    tideflow.Size([1, 1, 8])
    """

    _as_tuple = staticmethod(_single)

    def forward(self, input, indices, output_size=None):
        return self._unpool(F.max_unpool1d, input, indices, output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of `MaxPool2d` (see `MaxUnpool1d`).

    >>> y, i = flow.nn.MaxPool2d(2, return_indices=True)(flow.randn(1, 1, 4, 4))
    >>> flow.nn.MaxUnpool2d(2)(y, i).shape
    tideflow.Size([1, 1, 4, 4])
    """

    _as_tuple = staticmethod(_pair)

    def forward(self, input, indices, output_size=None):
        return self._unpool(F.max_unpool2d, input, indices, output_size)


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of `MaxPool3d` (see `MaxUnpool1d`).

    >>> y, i = flow.nn.MaxPool3d(2, return_indices=True)(flow.randn(1, 1, 4, 4, 4))
    >>> flow.nn.MaxUnpool3d(2)(y, i).shape
    tideflow.Size([1, 1, 4, 4, 4])
    """

    _as_tuple = staticmethod(_triple)

    def forward(self, input, indices, output_size=None):
        return self._unpool(F.max_unpool3d, input, indices, output_size)
