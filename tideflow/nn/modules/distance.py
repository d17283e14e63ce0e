"""Distances between pairs of vectors: CosineSimilarity and PairwiseDistance."""

from __future__ import annotations

from .. import functional as F
from .module import Module


class CosineSimilarity(Module):
    """Cosine of the angle between `x1` and `x2` along `dim` (each norm at least `eps`).

    >>> flow.nn.CosineSimilarity(dim=1)(flow.randn(100, 128), flow.randn(100, 128)).shape
    tideflow.Size([100])
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """The p-norm of `x1 - x2 + eps` over the last dim. The order is stored as `norm`, as
    PyTorch does.

    >>> flow.nn.PairwiseDistance(p=2)(flow.randn(100, 128), flow.randn(100, 128)).shape
    tideflow.Size([100])
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
