"""Upsample (any `F.interpolate` mode) and its fixed-mode 2-d forms."""

from __future__ import annotations

from .. import functional as F
from .module import Module


class Upsample(Module):
    """Resize the spatial dims of a (N, C, d1, ...) input to `size` or by `scale_factor`,
    with mode 'nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic' or 'trilinear'.

    >>> flow.nn.Upsample(scale_factor=2, mode="bilinear")(flow.randn(1, 1, 2, 2)).shape
    tideflow.Size([1, 1, 4, 4])
    """

    def __init__(
        self, size=None, scale_factor=None, mode: str = "nearest",
        align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(
            input, self.size, self.scale_factor, self.mode, self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )  # fmt: skip

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return f"{info}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """2-d nearest-neighbour upsampling of a (N, C, H, W) input.

    >>> flow.nn.UpsamplingNearest2d(scale_factor=2)(flow.randn(1, 1, 2, 2)).shape
    tideflow.Size([1, 1, 4, 4])
    """

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """2-d bilinear upsampling of a (N, C, H, W) input with `align_corners=True`.

    >>> flow.nn.UpsamplingBilinear2d(size=(3, 5))(flow.randn(1, 1, 2, 2)).shape
    tideflow.Size([1, 1, 3, 5])
    """

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
