"""`nn.init`: fill a tensor in place with the distributions PyTorch's layers start from.

Every function writes under `no_grad` (so it works on parameters that require grad), returns
the tensor it filled, and draws from `generator` (default: the global generator).

>>> w = flow.empty(3, 5)
>>> flow.nn.init.kaiming_uniform_(w, a=math.sqrt(5)).shape
tideflow.Size([3, 5])
"""

from __future__ import annotations

import functools
import math
import warnings

from ..framework.grad_mode import no_grad
from ..framework.tensor import Tensor
from ..ops.binary import where
from ..ops.creation import arange, empty_like, eye
from ..ops.linalg import qr
from ..ops.random import randperm
from ..ops.shape import diag, stack

__all__ = [
    "calculate_gain",
    "constant_",
    "dirac_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "sparse_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]

_LINEAR_FNS = (
    "linear",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
)


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The gain that keeps activations' variance stable through `nonlinearity`: 1 for linear
    layers and sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope**2)) for
    leaky_relu (`param` is the slope, default 0.01), 3/4 for selu.

    >>> flow.nn.init.calculate_gain("leaky_relu", 0.2)
    1.3867504905630728
    """
    if nonlinearity in _LINEAR_FNS or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4  # found empirically (pytorch/pytorch#50664)
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


# -- plain distributions and constants ------------------------------------------------------
def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn uniformly from [a, b).

    >>> flow.nn.init.uniform_(flow.empty(2, 3), -0.1, 0.1).abs().max() <= 0.1
    tensor(True)
    """
    with no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from N(mean, std**2).

    >>> flow.nn.init.normal_(flow.empty(2, 3), std=0.02).shape
    tideflow.Size([2, 3])
    """
    with no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator=None,
) -> Tensor:
    """Fill with values from N(mean, std**2) truncated to [a, b] (exactly, by rejection).

    >>> w = flow.nn.init.trunc_normal_(flow.empty(100), std=0.02, a=-0.04, b=0.04)
    >>> bool(w.abs().max() <= 0.04)
    True
    """
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
            "The distribution of values may be incorrect.",
            stacklevel=2,
        )
    with no_grad():
        if _normal_cdf((b - mean) / std) - _normal_cdf((a - mean) / std) > 0.3:
            _truncate_by_normal_proposals(tensor, mean, std, a, b, generator)
        else:
            _truncate_by_uniform_proposals(tensor, mean, std, a, b, generator)
    return tensor


def _normal_cdf(x: float) -> float:
    return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0


# NOTE: two rejection samplers, as in PyTorch: normal proposals while most of the mass lies
# in [a, b] (few redraws), uniform proposals on [a, b] weighted by the density when [a, b]
# sits in a tail. Both give the exact truncated law, unlike an inverse-CDF transform, whose
# erfinv loses all precision far in the tails.
def _truncate_by_normal_proposals(tensor, mean, std, a, b, generator) -> None:
    # Bounds in the tensor's dtype, so the mask agrees with the values it can hold.
    lo, hi = tensor.new_tensor(a).item(), tensor.new_tensor(b).item()
    result = tensor.normal_(mean, std, generator=generator)
    while bool((outside := (result < lo) | (result > hi)).any()):
        redraw = empty_like(result).normal_(mean, std, generator=generator)
        result = where(outside, redraw, result)
    tensor.copy_(result)


def _truncate_by_uniform_proposals(tensor, mean, std, a, b, generator) -> None:
    mode = max(a, min(mean, b))
    log_peak = -0.5 * ((mode - mean) / std) ** 2

    def rejected(candidates):
        log_density = ((candidates - mean) / std) ** 2 * -0.5 - log_peak
        return empty_like(candidates).uniform_(generator=generator).log() > log_density

    result = tensor.uniform_(a, b, generator=generator)
    pending = rejected(result)
    while bool(pending.any()):
        candidates = empty_like(result).uniform_(a, b, generator=generator)
        result = where(pending, candidates, result)
        pending = pending & rejected(candidates)
    tensor.copy_(result)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with `val`.

    >>> flow.nn.init.constant_(flow.empty(2), 0.5)
    tensor([0.5000, 0.5000])
    """
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with 1.

    >>> flow.nn.init.ones_(flow.empty(2))
    tensor([1., 1.])
    """
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with 0.

    >>> flow.nn.init.zeros_(flow.empty(2))
    tensor([0., 0.])
    """
    with no_grad():
        return tensor.zero_()


# -- identities -------------------------------------------------------------------------------
def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-d tensor with the identity matrix (ones on the main diagonal).

    >>> flow.nn.init.eye_(flow.empty(2, 3))
    tensor([[1., 0., 0.],
            [0., 1., 0.]])
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with no_grad():
        return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-d convolution weight (out, in, *kernel) with the Dirac delta: the
    convolution passes as many input channels through unchanged as it can, per group.

    >>> flow.nn.init.dirac_(flow.empty(2, 2, 3))[:, :, 1]
    tensor([[1., 0.],
            [0., 1.]])
    """
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if tensor.shape[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = tensor.shape[0] // groups
    channels = arange(min(out_per_group, tensor.shape[1]))
    outputs = (arange(groups).reshape(-1, 1) * out_per_group + channels).reshape(-1)
    inputs = channels.repeat(groups)
    centers = tuple(k // 2 for k in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        tensor[(outputs, inputs, *centers)] = 1
    return tensor


# -- variance-scaling initializations ---------------------------------------------------------
def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight (out, in, *kernel): in or out times the kernel size."""
    if tensor.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive_field, tensor.shape[0] * receptive_field


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot initialization: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).

    >>> gain = flow.nn.init.calculate_gain("relu")
    >>> w = flow.nn.init.xavier_uniform_(flow.empty(3, 5), gain=gain)
    >>> bool(w.abs().max() <= gain * math.sqrt(6 / (3 + 5)))
    True
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot initialization: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out)).

    >>> w = flow.nn.init.xavier_normal_(flow.empty(3, 5))
    """
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor: Tensor, a, mode: str, nonlinearity: str) -> float | None:
    """He et al.'s std, gain / sqrt(fan); None (after PyTorch's warning) for an empty tensor."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
    generator=None,
) -> Tensor:  # fmt: skip
    """He initialization: U(-bound, bound) with bound = gain * sqrt(3 / fan), where `fan` is
    fan_in or fan_out (`mode`) and the gain is `calculate_gain(nonlinearity, a)`. Linear and
    Conv layers start from `a=sqrt(5)`.

    >>> w = flow.nn.init.kaiming_uniform_(flow.empty(3, 5), mode="fan_in", nonlinearity="relu")
    >>> bool(w.abs().max() <= math.sqrt(6 / 5))
    True
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
    generator=None,
) -> Tensor:  # fmt: skip
    """He initialization: N(0, std**2) with std = gain / sqrt(fan) (see kaiming_uniform_).

    >>> w = flow.nn.init.kaiming_normal_(flow.empty(3, 5), mode="fan_out", nonlinearity="relu")
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


# -- structured matrices ----------------------------------------------------------------------
def orthogonal_(tensor: Tensor, gain: float = 1, generator=None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix times `gain`: the Q of a Gaussian matrix's QR,
    with signs fixed so that Q is uniformly distributed (Haar). Dims past the first are
    flattened.

    >>> w = flow.nn.init.orthogonal_(flow.empty(3, 5))
    >>> bool(((w @ w.T) - flow.eye(3)).abs().max() < 1e-5)
    True
    """
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with no_grad():
        flattened = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator)
        if rows < cols:
            flattened = flattened.T
        q, r = qr(flattened)
        # Mezzadri (arXiv:math-ph/0609050): a sign per column makes the QR's Q Haar-uniform.
        q = q * diag(r).sign()
        if rows < cols:
            q = q.T
        tensor.view(q.shape).copy_(q)
        tensor.mul_(gain)
    return tensor


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """Fill a 2-d tensor with N(0, std**2) values, then zero `ceil(sparsity * rows)` randomly
    chosen entries of every column (Martens, 2010).

    >>> w = flow.nn.init.sparse_(flow.empty(4, 3), sparsity=0.5)
    >>> (w == 0).sum(0)
    tensor([2, 2, 2])
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    with no_grad():
        tensor.normal_(0, std, generator=generator)
        if num_zeros and cols:
            # The first `num_zeros` rows of a random permutation per column are zeroed.
            perms = [randperm(rows, generator=generator)[:num_zeros] for _ in range(cols)]
            tensor[stack(perms, dim=1), arange(cols).expand(num_zeros, cols)] = 0
    return tensor


# -- the names without the trailing underscore, deprecated in PyTorch ------------------------------
def _deprecated(initializer):
    old = initializer.__name__.rstrip("_")

    @functools.wraps(initializer)
    def deprecated(*args, **kwargs):
        warnings.warn(
            f"`nn.init.{old}` is now deprecated in favor of `nn.init.{initializer.__name__}`.",
            FutureWarning,
            stacklevel=2,
        )
        return initializer(*args, **kwargs)

    deprecated.__name__ = deprecated.__qualname__ = old
    deprecated.__doc__ = f"Deprecated: `{initializer.__name__}`."
    return deprecated


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
