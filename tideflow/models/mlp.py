"""MLP: a stack of Linear layers with an activation (and optional dropout) between them."""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Callable, Sequence

from .. import nn


class MLP(nn.Sequential):
    """A multi-layer perceptron over the last dim: `Linear(sizes[0], sizes[1])`, activation,
    ..., `Linear(sizes[-2], sizes[-1])`, with no activation after the last layer.

    It is an `nn.Sequential`, so its state-dict keys (`0.weight`, `2.weight`, ...) are those
    of the same stack written out by hand in PyTorch. `activation` is called with no arguments
    once per hidden layer (a Module class such as `nn.ReLU`, or any factory); `dropout > 0`
    adds an `nn.Dropout` after each activation.

    >>> mlp = flow.models.MLP([784, 256, 10])
    >>> mlp(flow.randn(32, 784)).shape
    tideflow.Size([32, 10])
    """

    def __init__(
        self,
        sizes: Sequence[int],
        activation: Callable[[], nn.Module] = nn.ReLU,
        bias: bool = True,
        dropout: float = 0.0,
    ) -> None:
        sizes = list(sizes)
        if len(sizes) < 2:
            raise ValueError(f"MLP: sizes needs an input and an output size, got {sizes}")
        if any(not isinstance(n, numbers.Integral) or n <= 0 for n in sizes):
            raise ValueError(f"MLP: sizes must be positive integers, got {sizes}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"MLP: dropout must be in [0, 1), got {dropout}")
        layers: list[nn.Module] = []
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes)):
            layers.append(nn.Linear(n_in, n_out, bias=bias))
            if i < len(sizes) - 2:
                layers.append(activation())
                if dropout > 0:
                    layers.append(nn.Dropout(dropout))
        super().__init__(*layers)
        self.sizes = sizes
