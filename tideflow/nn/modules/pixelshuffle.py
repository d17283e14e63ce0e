"""PixelShuffle and PixelUnshuffle: trade channels for spatial resolution and back."""

from __future__ import annotations

from .. import functional as F
from .module import Module


class PixelShuffle(Module):
    """(*, C * r**2, H, W) -> (*, C, H * r, W * r): sub-pixel convolution's upsampling.

    >>> flow.nn.PixelShuffle(3)(flow.randn(1, 9, 4, 4)).shape
    tideflow.Size([1, 1, 12, 12])
    """

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) -> (*, C * r**2, H, W), the inverse of PixelShuffle.

    >>> flow.nn.PixelUnshuffle(3)(flow.randn(1, 1, 12, 12)).shape
    tideflow.Size([1, 9, 4, 4])
    """

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleave the channels of `groups` groups: (N, g * k, *) with channel i * k + j
    moving to j * g + i (ShuffleNet).

    >>> flow.nn.ChannelShuffle(2)(flow.arange(4.0).reshape(1, 4, 1)).flatten().tolist()
    [0.0, 2.0, 1.0, 3.0]
    """

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
