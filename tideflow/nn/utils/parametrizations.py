"""`nn.utils.parametrizations`: common parametrizations built on `parametrize`."""

from __future__ import annotations

from ...framework.grad_mode import no_grad
from ...framework.tensor import Tensor
from ...ops import linalg, reduction
from ...ops.nn.distance import normalize
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..modules.module import Module
from . import parametrize

__all__ = ["spectral_norm", "weight_norm"]


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


class _SpectralNorm(Module):
    """weight / sigma, sigma the largest singular value of the weight seen as a matrix (dim
    `dim` its rows), estimated by power iteration: the singular vector estimates `_u`, `_v`
    are buffers, refined by `n_power_iterations` steps at each forward in training (15 at
    creation). A 1-d weight is simply normalized."""

    def __init__(self, weight: Tensor, n_power_iterations: int, dim: int, eps: float) -> None:
        super().__init__()
        if not -weight.ndim <= dim < max(weight.ndim, 1):
            raise IndexError(
                f"spectral_norm: dim {dim} is out of range for a weight of shape "
                f"{list(weight.shape)}"
            )
        if n_power_iterations <= 0:
            raise ValueError(
                f"spectral_norm: n_power_iterations must be positive, got {n_power_iterations}"
            )
        self.dim = dim % max(weight.ndim, 1)
        self.eps = eps
        if weight.ndim > 1:
            self.n_power_iterations = n_power_iterations
            matrix = self._as_matrix(weight)
            rows, cols = matrix.shape
            u = matrix.new_empty(rows).normal_(0, 1)
            v = matrix.new_empty(cols).normal_(0, 1)
            self.register_buffer("_u", normalize(u, dim=0, eps=eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=eps))
            self._power_method(matrix, 15)

    def _as_matrix(self, weight):
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.flatten(1)

    def _power_method(self, matrix, iterations: int) -> None:
        with no_grad():
            for _ in range(iterations):
                self._u = normalize(linalg.mv(matrix, self._v), dim=0, eps=self.eps)
                self._v = normalize(linalg.mv(matrix.mH, self._u), dim=0, eps=self.eps)

    def forward(self, weight):
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        matrix = self._as_matrix(weight)
        if self.training:
            self._power_method(matrix, self.n_power_iterations)
        # NOTE: copies, so that the next power iteration does not change saved tensors
        u, v = self._u.clone(), self._v.clone()
        sigma = linalg.vdot(u, linalg.mv(matrix, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Divide `module.<name>` by its spectral norm (Miyato et al., 2018), estimated by power
    iteration in training mode; `dim` (default 0, 1 for transposed convolutions) indexes
    the weight matrix's rows.
    `spectral_norm(flow.nn.Linear(20, 40)).parametrizations.weight.original.shape`"""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(
            f"spectral_norm: {type(module).__name__} has no parameter or buffer named {name!r}"
        )
    if dim is None:
        transposed = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps)
    )
    return module
