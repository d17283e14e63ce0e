"""Identity, Linear and Bilinear."""

from __future__ import annotations

import math

from ...ops.creation import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


class Identity(Module):
    """Returns its input; takes (and ignores) any constructor arguments, so it can replace a
    layer in place.

    >>> flow.nn.Identity(54, unused=0.1)(flow.ones(2)).shape
    tideflow.Size([2])
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """`y = x @ weight.T + bias` over the last dim of `x`: weight (out_features, in_features),
    bias (out_features,). Both start from U(-1/sqrt(in_features), 1/sqrt(in_features)).

    >>> flow.nn.Linear(20, 30)(flow.randn(128, 20)).shape
    tideflow.Size([128, 30])
    """

    def __init__(
        self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None
    ) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # NOTE: kaiming_uniform_ with a=sqrt(5) is U(-1/sqrt(fan_in), 1/sqrt(fan_in)): the
        # historical default PyTorch keeps for compatibility.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            _init_bias_from_fan_in(self.bias, self.weight)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


def _init_bias_from_fan_in(bias: Parameter, weight: Parameter) -> None:
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)), the bias initialization of Linear and Conv."""
    fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
    init.uniform_(bias, -bound, bound)


class Bilinear(Module):
    """`y[..., k] = x1 @ weight[k] @ x2 + bias[k]`: weight (out_features, in1_features,
    in2_features), bias (out_features,), both from U(-1/sqrt(in1_features), +...).

    >>> m = flow.nn.Bilinear(20, 30, 40)
    >>> m(flow.randn(128, 20), flow.randn(128, 30)).shape
    tideflow.Size([128, 40])
    """

    def __init__(
        self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
        device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        shape = (out_features, in1_features, in2_features)
        self.weight = Parameter(empty(shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )
