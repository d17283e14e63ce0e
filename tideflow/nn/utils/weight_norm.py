"""The hook-based `weight_norm` and `spectral_norm` of PyTorch's older API (still common in
checkpoints: their `<name>_g` / `<name>_v` and `<name>_orig` / `<name>_u` / `<name>_v` state
dict keys). Each recomputes `module.<name>` in a forward pre-hook; `remove_*` folds it back
into a plain parameter. New code should use `nn.utils.parametrizations`."""

from __future__ import annotations

import warnings

from ...framework.grad_mode import no_grad
from ...ops import linalg
from ...ops.nn.distance import normalize
from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from ..modules.module import Module
from ..parameter import Parameter
from .parametrizations import _norm_except_dim

__all__ = ["remove_spectral_norm", "remove_weight_norm", "spectral_norm", "weight_norm"]


def _hook_of(module: Module, kind: type, name: str):
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, kind) and hook.name == name:
            return key, hook
    return None, None


def _remove(module: Module, kind: type, name: str, what: str) -> Module:
    key, hook = _hook_of(module, kind, name)
    if hook is None:
        raise ValueError(f"{what} of '{name}' not found in {module}")
    hook.remove(module)
    del module._forward_pre_hooks[key]
    return module


class WeightNorm:
    """`module.<name> = g * v / ||v||` before each forward, g and v the parameters
    `<name>_g` and `<name>_v`; the norm over every dim but `dim` (the whole tensor for None
    or -1)."""

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def _axis(self, weight) -> int | None:
        return None if self.dim == -1 else self.dim % weight.ndim

    def compute_weight(self, module: Module):
        g, v = getattr(module, f"{self.name}_g"), getattr(module, f"{self.name}_v")
        return v * (g / _norm_except_dim(v, self._axis(v)))

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> WeightNorm:
        if _hook_of(module, WeightNorm, name)[1] is not None:
            raise RuntimeError(
                f"Cannot register two weight_norm hooks on the same parameter {name}"
            )
        hook = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(
            f"{name}_g", Parameter(_norm_except_dim(weight, hook._axis(weight)).detach())
        )
        module.register_parameter(f"{name}_v", Parameter(weight.detach()))
        setattr(module, name, hook.compute_weight(module))
        module.register_forward_pre_hook(hook)
        return hook

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[f"{self.name}_g"]
        del module._parameters[f"{self.name}_v"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Deprecated (as in PyTorch): split `module.<name>` into magnitude `<name>_g` and
    direction `<name>_v` parameters, recombined before each forward.
    `weight_norm(flow.nn.Linear(20, 40)).weight_g.shape  # (40, 1)`"""
    warnings.warn(
        "`torch.nn.utils.weight_norm` is deprecated in favor of "
        "`torch.nn.utils.parametrizations.weight_norm`.",
        FutureWarning,
        stacklevel=2,
    )
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Fold `weight_norm`'s g and v back into the parameter `module.<name>`."""
    return _remove(module, WeightNorm, name, "weight_norm")


class SpectralNorm:
    """`module.<name> = W / sigma` before each forward, W the parameter `<name>_orig` and
    sigma its largest singular value (rows along `dim`) estimated by power iteration from the
    buffers `<name>_u`, `<name>_v`, which training-mode forwards refine."""

    def __init__(self, name: str, n_power_iterations: int, dim: int, eps: float) -> None:
        if n_power_iterations <= 0:
            raise ValueError(
                "Expected n_power_iterations to be positive, but got "
                f"n_power_iterations={n_power_iterations}"
            )
        self.name = name
        self.n_power_iterations = n_power_iterations
        self.dim = dim
        self.eps = eps

    def _as_matrix(self, weight):
        if self.dim != 0:
            weight = weight.movedim(self.dim, 0)
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module: Module, do_power_iteration: bool):
        weight = getattr(module, f"{self.name}_orig")
        u, v = getattr(module, f"{self.name}_u"), getattr(module, f"{self.name}_v")
        matrix = self._as_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(linalg.mv(matrix.mT, u), dim=0, eps=self.eps))
                    u.copy_(normalize(linalg.mv(matrix, v), dim=0, eps=self.eps))
            # copies: the next forward's iteration must not change what backward saved
            u, v = u.clone(), v.clone()
        sigma = linalg.vdot(u, linalg.mv(matrix, v))
        return weight / sigma

    @staticmethod
    def apply(module: Module, name: str, n_power_iterations: int, dim: int, eps: float):
        if _hook_of(module, SpectralNorm, name)[1] is not None:
            raise RuntimeError(
                f"Cannot register two spectral_norm hooks on the same parameter {name}"
            )
        hook = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with no_grad():
            rows, cols = hook._as_matrix(weight).shape
            u = normalize(weight.new_empty(rows).normal_(0, 1), dim=0, eps=eps)
            v = normalize(weight.new_empty(cols).normal_(0, 1), dim=0, eps=eps)
        del module._parameters[name]
        module.register_parameter(f"{name}_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(f"{name}_u", u)
        module.register_buffer(f"{name}_v", v)
        module.register_forward_pre_hook(hook)
        return hook

    def remove(self, module: Module) -> None:
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, f"{self.name}_u")
        delattr(module, f"{self.name}_v")
        delattr(module, f"{self.name}_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(
    module: Module,
    name: str = "weight",
    n_power_iterations: int = 1,
    eps: float = 1e-12,
    dim: int | None = None,
) -> Module:
    """Divide `module.<name>` by its spectral norm before each forward (hook-based, PyTorch's
    older API; see `nn.utils.parametrizations.spectral_norm`). `dim` defaults to 0 (1 for
    transposed convolutions)."""
    if dim is None:
        transposed = (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)
        dim = 1 if isinstance(module, transposed) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module: Module, name: str = "weight") -> Module:
    """Fold `spectral_norm`'s normalization back into the parameter `module.<name>`."""
    return _remove(module, SpectralNorm, name, "spectral_norm")
