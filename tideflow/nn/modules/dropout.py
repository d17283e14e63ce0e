"""Dropout layers: active in training mode, the identity in evaluation mode."""

from __future__ import annotations

from .. import functional as F
from .module import Module


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training, zero each element with probability `p` and scale the rest by
    1 / (1 - p), so the expected value is unchanged; in evaluation, the identity.

    >>> m = flow.nn.Dropout(p=0.2)
    >>> m.eval()(flow.ones(3))
    tensor([1., 1., 1.])
    """

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of a (N, C, L) or (C, L) input with probability `p` (training).

    >>> flow.nn.Dropout1d(0.5)(flow.ones(2, 4, 3)).shape
    tideflow.Size([2, 4, 3])
    """

    def forward(self, input):
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels (feature maps) of a (N, C, H, W) input with probability `p`
    (training). As in PyTorch, a 3-d input is read as (N, C, L), with a warning.

    >>> flow.nn.Dropout2d(0.5)(flow.ones(2, 4, 3, 3)).shape
    tideflow.Size([2, 4, 3, 3])
    """

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """Zero whole channels of a (N, C, D, H, W) or (C, D, H, W) input with probability `p`.

    >>> flow.nn.Dropout3d(0.5)(flow.ones(2, 4, 2, 3, 3)).shape
    tideflow.Size([2, 4, 2, 3, 3])
    """

    def forward(self, input):
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: in training, each element becomes SELU's saturation value
    with probability `p`, then all are mapped affinely so the mean and variance stay those of
    the input; in evaluation, the identity.

    >>> flow.nn.AlphaDropout(0.2)(flow.randn(4, 8)).shape
    tideflow.Size([4, 8])
    """

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(_DropoutNd):
    """`AlphaDropout` of whole channels (dim 1 of an (N, C, ...) input).

    >>> flow.nn.FeatureAlphaDropout(0.2)(flow.randn(2, 4, 3, 3)).shape
    tideflow.Size([2, 4, 3, 3])
    """

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)
