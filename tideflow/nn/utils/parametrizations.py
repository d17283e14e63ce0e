"""`nn.utils.parametrizations`: common parametrizations built on `parametrize`."""

from __future__ import annotations

from ...ops import reduction
from ..modules.module import Module
from . import parametrize

__all__ = ["weight_norm"]


def _norm_except_dim(v, dim: int | None):
    """The 2-norm of each slice of `v` along `dim`, shaped to broadcast against `v` (1 in
    every other dim); over the whole tensor when `dim` is None."""
    if dim is None:
        return reduction.sum(v * v).sqrt()
    others = tuple(d for d in range(v.ndim) if d != dim)
    return reduction.sum(v * v, dim=others, keepdim=True).sqrt()


class _WeightNorm(Module):
    """weight = g * v / ||v||, the norm taken over every dim but `dim`: `original0` is the
    magnitude g, `original1` the direction v."""

    def __init__(self, dim: int | None) -> None:
        super().__init__()
        self.dim = dim

    def _axis(self, weight) -> int | None:
        # NOTE: PyTorch reads dim=-1 as "the whole tensor", as it does dim=None
        return None if self.dim is None or self.dim == -1 else self.dim % weight.ndim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self._axis(weight_v)))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self._axis(weight)), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize `module.<name>` by its magnitude and direction (Salimans & Kingma, 2016):
    `parametrizations.<name>.original0` holds g (the norms along `dim`), `original1` the
    direction v; the weight is g * v / ||v||.
    `weight_norm(flow.nn.Linear(20, 40)).parametrizations.weight.original0.shape  # (40, 1)`"""
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module
