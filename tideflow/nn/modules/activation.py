"""Activation layers: each wraps its `nn.functional` op, holding the op's hyperparameters
(and `inplace=` where PyTorch has it). PReLU learns its negative slope."""

from __future__ import annotations

import warnings

from ...ops.creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _inplace_repr(inplace: bool, leading: str = "") -> str:
    return f"{leading}inplace=True" if inplace else ""


class _InplaceActivation(Module):
    """An activation whose only hyperparameter is `inplace`."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class ReLU(_InplaceActivation):
    """`max(0, x)` elementwise.

    >>> flow.nn.ReLU()(flow.tensor([-1.0, 2.0]))
    tensor([0., 2.])
    """

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)


class Threshold(Module):
    """`x` where `x > threshold`, else `value`.

    >>> flow.nn.Threshold(0.1, 20.0)(flow.tensor([0.0, 0.5]))
    tensor([20.0000,  0.5000])
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}{_inplace_repr(self.inplace, ', ')}"


class Hardtanh(Module):
    """`x` clamped to [min_val, max_val].

    >>> flow.nn.Hardtanh(-2, 2)(flow.tensor([-3.0, 0.5, 3.0]))
    tensor([-2.0000,  0.5000,  2.0000])
    """

    def __init__(
        self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
        min_value: float | None = None, max_value: float | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        if min_value is not None:
            warnings.warn(
                "keyword argument `min_value` is deprecated and renamed to `min_val`",
                FutureWarning,
                stacklevel=2,
            )
            min_val = min_value
        if max_value is not None:
            warnings.warn(
                "keyword argument `max_value` is deprecated and renamed to `max_val`",
                FutureWarning,
                stacklevel=2,
            )
            max_val = max_value
        if max_val <= min_val:
            raise ValueError(f"max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        inplace = _inplace_repr(self.inplace, ", ")
        return f"min_val={self.min_val}, max_val={self.max_val}{inplace}"


class ReLU6(Hardtanh):
    """`min(max(0, x), 6)`.

    >>> flow.nn.ReLU6()(flow.tensor([-1.0, 7.0]))
    tensor([0., 6.])
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class Sigmoid(Module):
    """`1 / (1 + exp(-x))`.

    >>> flow.nn.Sigmoid()(flow.tensor([0.0, 2.0]))
    tensor([0.5000, 0.8808])
    """

    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    """Hyperbolic tangent.

    >>> flow.nn.Tanh()(flow.tensor([0.0, 1.0]))
    tensor([0.0000, 0.7616])
    """

    def forward(self, input):
        return F.tanh(input)


class _UnprintedInplace(_InplaceActivation):
    def extra_repr(self) -> str:
        return ""  # NOTE: PyTorch prints Hardsigmoid and Hardswish without `inplace`.


class Hardsigmoid(_UnprintedInplace):
    """`relu6(x + 3) / 6`.

    >>> flow.nn.Hardsigmoid()(flow.tensor([-4.0, 0.0, 4.0]))
    tensor([0.0000, 0.5000, 1.0000])
    """

    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class Hardswish(_UnprintedInplace):
    """`x * relu6(x + 3) / 6`.

    >>> flow.nn.Hardswish()(flow.tensor([-4.0, 4.0]))
    tensor([-0., 4.])
    """

    def forward(self, input):
        return F.hardswish(input, self.inplace)


class SiLU(_InplaceActivation):
    """`x * sigmoid(x)` (swish).

    >>> flow.nn.SiLU()(flow.tensor([-1.0, 0.0, 2.0]))
    tensor([-0.2689,  0.0000,  1.7616])
    """

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)


class Mish(_InplaceActivation):
    """`x * tanh(softplus(x))`.

    >>> flow.nn.Mish()(flow.tensor([-1.0, 0.0, 2.0]))
    tensor([-0.3034,  0.0000,  1.9440])
    """

    def forward(self, input):
        return F.mish(input, inplace=self.inplace)


class SELU(_InplaceActivation):
    """Scaled ELU with the self-normalizing constants (alpha ~ 1.6733, scale ~ 1.0507).

    >>> flow.nn.SELU()(flow.tensor([-1.0, 2.0]))
    tensor([-1.1113,  2.1014])
    """

    def forward(self, input):
        return F.selu(input, self.inplace)


class _AlphaActivation(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_inplace_repr(self.inplace, ', ')}"


class ELU(_AlphaActivation):
    """`x` where positive, else `alpha * (exp(x) - 1)`.

    >>> flow.nn.ELU(alpha=0.5)(flow.tensor([-1.0, 2.0]))
    tensor([-0.3161,  2.0000])
    """

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)


class CELU(_AlphaActivation):
    """`max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.

    >>> flow.nn.CELU(2.0)(flow.tensor([-1.0, 2.0]))
    tensor([-0.7869,  2.0000])
    """

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class GELU(Module):
    """`x * Phi(x)`; `approximate='tanh'` uses the tanh approximation.

    >>> flow.nn.GELU(approximate="tanh")(flow.randn(3)).shape
    tideflow.Size([3])
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    """`x` where positive, else `negative_slope * x`.

    >>> flow.nn.LeakyReLU(0.1)(flow.tensor([-2.0, 3.0]))
    tensor([-0.2000,  3.0000])
    """

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}{_inplace_repr(self.inplace, ', ')}"


class LogSigmoid(Module):
    """`log(sigmoid(x))`, stable for large |x|.

    >>> flow.nn.LogSigmoid()(flow.tensor([-100.0, 0.0]))
    tensor([-100.0000,   -0.6931])
    """

    def forward(self, input):
        return F.logsigmoid(input)


class Softplus(Module):
    """`log(1 + exp(beta * x)) / beta`, linear where `beta * x > threshold`.

    >>> flow.nn.Softplus(beta=2.0)(flow.zeros(1))
    tensor([0.3466])
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class _Shrink(Module):
    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Hardshrink(_Shrink):
    """`x` where `|x| > lambd`, else 0.

    >>> flow.nn.Hardshrink()(flow.tensor([-1.0, 0.2, 0.7]))
    tensor([-1.0000,  0.0000,  0.7000])
    """

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Softshrink(_Shrink):
    """`x - lambd` above `lambd`, `x + lambd` below `-lambd`, else 0.

    >>> flow.nn.Softshrink()(flow.tensor([-1.0, 0.2, 0.7]))
    tensor([-0.5000,  0.0000,  0.2000])
    """

    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Softsign(Module):
    """`x / (1 + |x|)`.

    >>> flow.nn.Softsign()(flow.tensor([-3.0, 1.0]))
    tensor([-0.7500,  0.5000])
    """

    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """`x - tanh(x)`.

    >>> flow.nn.Tanhshrink()(flow.tensor([0.0, 1.0]))
    tensor([0.0000, 0.2384])
    """

    def forward(self, input):
        return F.tanhshrink(input)


class PReLU(Module):
    """`x` where positive, else `weight * x`, with a learned slope: one shared
    (`num_parameters=1`) or one per channel (dim 1), all starting at `init`.

    >>> m = flow.nn.PReLU(3)
    >>> m(flow.randn(2, 3, 4)).shape, m.weight.shape
    (tideflow.Size([2, 3, 4]), tideflow.Size([3]))
    """

    def __init__(
        self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None
    ) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class _SoftmaxBase(Module):
    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    """`exp(x) / exp(x).sum(dim)`: entries along `dim` are positive and sum to 1.

    >>> flow.nn.Softmax(dim=1)(flow.zeros(2, 4))
    tensor([[0.2500, 0.2500, 0.2500, 0.2500],
            [0.2500, 0.2500, 0.2500, 0.2500]])
    """

    def forward(self, input):
        return F.softmax(input, self.dim, _stacklevel=5)


class Softmin(_SoftmaxBase):
    """`softmax(-x, dim)`: small entries get the large weights.

    >>> flow.nn.Softmin(dim=1)(flow.tensor([[0.0, 1.0]]))
    tensor([[0.7311, 0.2689]])
    """

    def forward(self, input):
        return F.softmin(input, self.dim, _stacklevel=5)


class LogSoftmax(_SoftmaxBase):
    """`log(softmax(x, dim))`, computed stably.

    >>> flow.nn.LogSoftmax(dim=1)(flow.tensor([[0.0, 0.0]]))
    tensor([[-0.6931, -0.6931]])
    """

    def forward(self, input):
        return F.log_softmax(input, self.dim, _stacklevel=5)


class Softmax2d(Module):
    """Softmax over the channels (dim -3) at every spatial position of a (N, C, H, W) or
    (C, H, W) input.

    >>> flow.nn.Softmax2d()(flow.randn(2, 3, 4, 5)).sum(1).shape
    tideflow.Size([2, 4, 5])
    """

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3, _stacklevel=5)


class GLU(Module):
    """The gated linear unit: `a * sigmoid(b)` for the halves a, b of the input along `dim`.

    >>> flow.nn.GLU()(flow.randn(4, 6)).shape
    tideflow.Size([4, 3])
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class RReLU(Module):
    """The randomized leaky ReLU: a slope drawn from U(lower, upper) per negative element in
    training, their mean in evaluation.

    >>> flow.nn.RReLU(0.1, 0.3).eval()(flow.tensor([-1.0, 2.0]))
    tensor([-0.2000,  2.0000])
    """

    def __init__(
        self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False
    ) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{_inplace_repr(self.inplace, ', ')}"
