"""Convolutions: Conv1d/2d/3d and ConvTranspose1d/2d/3d."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import ClassVar

from ...ops.creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import _init_bias_from_fan_in
from .module import Module
from .utils import _pair, _reverse_repeat_tuple, _single, _triple

_PADDING_STRINGS = ("same", "valid")
_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


class _ConvNd(Module):
    """What every convolution shares: the checked hyperparameters, the weight and bias with
    PyTorch's initialization, and the printed form."""

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: tuple, stride: tuple,
        padding: str | tuple, dilation: tuple, transposed: bool, output_padding: tuple,
        groups: int, bias: bool, padding_mode: str, device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in _PADDING_STRINGS:
                raise ValueError(
                    f"Invalid padding string {padding!r}, should be one of {list(_PADDING_STRINGS)}"
                )
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(
                f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                f"padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        # The padding in F.pad's order (last dim first), used by the non-zero padding modes.
        self._reversed_padding_repeated_twice = _explicit_padding(padding, kernel_size, dilation)
        if transposed:
            shape = (in_channels, out_channels // groups, *kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *kernel_size)
        self.weight = Parameter(empty(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            _init_bias_from_fan_in(self.bias, self.weight)

    def extra_repr(self) -> str:
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)


def _explicit_padding(padding: str | tuple, kernel_size: tuple, dilation: tuple) -> tuple:
    """(left, right) amounts per spatial dim, last dim first. 'same' puts the odd element of
    the total `dilation * (kernel - 1)` on the right, as PyTorch does."""
    if padding == "valid":
        return (0, 0) * len(kernel_size)
    if padding == "same":
        pairs = []
        for d, k in zip(reversed(dilation), reversed(kernel_size), strict=True):
            total = d * (k - 1)
            pairs += [total // 2, total - total // 2]
        return tuple(pairs)
    return _reverse_repeat_tuple(padding, 2)


class _Conv(_ConvNd):
    _ntuple: ClassVar[Callable]  # int or sequence -> tuple of the layer's rank
    _functional: ClassVar[Callable]  # F.conv1d / conv2d / conv3d

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
        dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
        device=None, dtype=None,
    ) -> None:  # fmt: skip
        to_tuple = self._ntuple
        super().__init__(
            in_channels, out_channels, to_tuple(kernel_size), to_tuple(stride),
            padding if isinstance(padding, str) else to_tuple(padding), to_tuple(dilation),
            False, to_tuple(0), groups, bias, padding_mode, device, dtype,
        )  # fmt: skip

    def _conv_forward(self, input, weight, bias):
        padding = self.padding
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            padding = 0
        conv = self._functional
        return conv(input, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-d convolution over a (N, C_in, L) or (C_in, L) input. `padding` is an int, 'valid'
    or 'same'; `padding_mode` 'zeros', 'reflect', 'replicate' or 'circular'.

    >>> flow.nn.Conv1d(16, 33, 3, stride=2)(flow.randn(20, 16, 50)).shape
    tideflow.Size([20, 33, 24])
    """

    _ntuple = staticmethod(_single)
    _functional = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-d convolution over a (N, C_in, H, W) or (C_in, H, W) input; kernel_size, stride,
    padding and dilation are ints or pairs (padding also 'valid' or 'same').

    >>> m = flow.nn.Conv2d(16, 33, (3, 5), stride=(2, 1), padding=(4, 2), dilation=(3, 1))
    >>> m(flow.randn(20, 16, 50, 100)).shape
    tideflow.Size([20, 33, 26, 100])
    """

    _ntuple = staticmethod(_pair)
    _functional = staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-d convolution over a (N, C_in, D, H, W) or (C_in, D, H, W) input.

    >>> flow.nn.Conv3d(4, 8, 3, padding=1)(flow.randn(2, 4, 5, 6, 7)).shape
    tideflow.Size([2, 8, 5, 6, 7])
    """

    _ntuple = staticmethod(_triple)
    _functional = staticmethod(F.conv3d)


class _ConvTranspose(_ConvNd):
    _ntuple: ClassVar[Callable]
    _functional: ClassVar[Callable]  # F.conv_transpose1d / 2d / 3d

    def __init__(
        self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
        output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
        padding_mode: str = "zeros", device=None, dtype=None,
    ) -> None:  # fmt: skip
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        to_tuple = self._ntuple
        super().__init__(
            in_channels, out_channels, to_tuple(kernel_size), to_tuple(stride),
            to_tuple(padding), to_tuple(dilation), True, to_tuple(output_padding), groups,
            bias, padding_mode, device, dtype,
        )  # fmt: skip

    def forward(self, input, output_size=None):
        """`output_size` (spatial sizes, optionally with the leading N, C) picks one of the
        output sizes that a strided convolution maps back to the input's."""
        output_padding = self._output_padding(input, output_size)
        return self._functional(
            input, self.weight, self.bias, self.stride, self.padding, output_padding,
            self.groups, self.dilation,
        )  # fmt: skip

    def _output_padding(self, input, output_size) -> tuple:
        if output_size is None:
            return self.output_padding
        nd = len(self.kernel_size)
        leading = 2 if input.ndim == nd + 2 else 1
        output_size = tuple(output_size)
        if len(output_size) == leading + nd:
            output_size = output_size[leading:]
        if len(output_size) != nd:
            raise ValueError(
                f"ConvTranspose{nd}D: for {input.ndim}D input, output_size must have {nd} "
                f"or {leading + nd} elements (got {len(output_size)})"
            )
        spatial = input.shape[leading:]
        min_sizes = [
            (n - 1) * s - 2 * p + d * (k - 1) + 1
            for n, s, p, d, k in zip(
                spatial, self.stride, self.padding, self.dilation, self.kernel_size, strict=True
            )
        ]
        max_sizes = [lo + s - 1 for lo, s in zip(min_sizes, self.stride, strict=True)]
        bounds = zip(output_size, min_sizes, max_sizes, strict=True)
        if any(not lo <= n <= hi for n, lo, hi in bounds):
            raise ValueError(
                f"requested an output size of {list(output_size)}, but valid sizes range from "
                f"{min_sizes} to {max_sizes} (for an input of {list(spatial)})"
            )
        return tuple(n - lo for n, lo in zip(output_size, min_sizes, strict=True))


class ConvTranspose1d(_ConvTranspose):
    """1-d transposed convolution (the gradient of Conv1d with respect to its input) over a
    (N, C_in, L) or (C_in, L) input; weight (C_in, C_out / groups, k).

    >>> flow.nn.ConvTranspose1d(16, 8, 3, stride=2)(flow.randn(4, 16, 10)).shape
    tideflow.Size([4, 8, 21])
    """

    _ntuple = staticmethod(_single)
    _functional = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTranspose):
    """2-d transposed convolution ("deconvolution") over a (N, C_in, H, W) or (C_in, H, W)
    input. `forward(input, output_size)` resolves the ambiguity of strided output sizes.

    >>> up = flow.nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1)
    >>> up(flow.randn(1, 16, 6, 6), output_size=[1, 16, 12, 12]).shape
    tideflow.Size([1, 16, 12, 12])
    """

    _ntuple = staticmethod(_pair)
    _functional = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTranspose):
    """3-d transposed convolution over a (N, C_in, D, H, W) or (C_in, D, H, W) input.

    >>> flow.nn.ConvTranspose3d(4, 2, 2, stride=2)(flow.randn(1, 4, 3, 3, 3)).shape
    tideflow.Size([1, 2, 6, 6, 6])
    """

    _ntuple = staticmethod(_triple)
    _functional = staticmethod(F.conv_transpose3d)
