"""Fold and Unfold: sliding local blocks into columns and back (`F.unfold` / `F.fold`)."""

from __future__ import annotations

from .. import functional as F
from .module import Module


class Unfold(Module):
    """Extract sliding blocks: (N, C, *spatial) -> (N, C * prod(kernel_size), L), one column
    per block position (im2col).

    >>> flow.nn.Unfold(kernel_size=2)(flow.randn(1, 3, 4, 4)).shape
    tideflow.Size([1, 12, 9])
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
            f"stride={self.stride}"
        )


class Fold(Module):
    """Sum sliding blocks back into an image: (N, C * prod(kernel_size), L) ->
    (N, C, *output_size), the adjoint of Unfold (col2im; overlaps add up).

    >>> flow.nn.Fold(output_size=(4, 4), kernel_size=2)(flow.randn(1, 12, 9)).shape
    tideflow.Size([1, 3, 4, 4])
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input):
        return F.fold(
            input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride
        )

    def extra_repr(self) -> str:
        return (
            f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
            f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}"
        )
