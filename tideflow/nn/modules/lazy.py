"""Lazy layers: LazyLinear and LazyConv1d/2d/3d infer their input size from the first input
they see, then become the plain layer (`Linear`, `Conv2d`, ...)."""

from __future__ import annotations

from ..parameter import UninitializedParameter
from .conv import Conv1d, Conv2d, Conv3d
from .linear import Linear


class LazyModuleMixin:
    """Runs `initialize_parameters(*inputs)` before the first forward, then turns the module
    into `cls_to_become` (its parameters are the same objects, now materialized)."""

    cls_to_become: type | None = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters)

    def has_uninitialized_params(self) -> bool:
        return any(isinstance(p, UninitializedParameter) for p in self.parameters())


def _infer_parameters(module, args):
    module.initialize_parameters(*args)
    if module.has_uninitialized_params():
        raise RuntimeError(f"{module._get_name()}: parameters remain uninitialized after a call")
    module._initialize_hook.remove()
    del module._initialize_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyLinear(LazyModuleMixin, Linear):
    """`Linear` whose `in_features` is the last dim of its first input.

    >>> m = flow.nn.LazyLinear(30)
    >>> m(flow.randn(128, 20)).shape, m.weight.shape
    (tideflow.Size([128, 30]), tideflow.Size([30, 20]))
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(0, 0, False, device, dtype)
        self.out_features = out_features
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input) -> None:
        self.in_features = input.shape[-1]
        self.weight.materialize((self.out_features, self.in_features))
        if self.bias is not None:
            self.bias.materialize((self.out_features,))
        self.reset_parameters()


class _LazyConvMixin(LazyModuleMixin):
    """The channels of the first input (dim 1, or dim 0 of an unbatched input) become the
    convolution's `in_channels`."""

    def __init__(
        self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
        bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__(
            0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device,
            dtype,
        )  # fmt: skip
        self.out_channels = out_channels
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input) -> None:
        unbatched = input.ndim == len(self.kernel_size) + 1
        self.in_channels = input.shape[0 if unbatched else 1]
        if self.in_channels % self.groups:
            raise ValueError(
                f"{self._get_name()}: in_channels ({self.in_channels}, from the input of shape "
                f"{list(input.shape)}) must be divisible by groups ({self.groups})"
            )
        shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        self.weight.materialize(shape)
        if self.bias is not None:
            self.bias.materialize((self.out_channels,))
        self.reset_parameters()


class LazyConv1d(_LazyConvMixin, Conv1d):
    """`Conv1d` whose `in_channels` comes from its first input.

    >>> flow.nn.LazyConv1d(33, 3, stride=2)(flow.randn(20, 16, 50)).shape
    tideflow.Size([20, 33, 24])
    """

    cls_to_become = Conv1d


class LazyConv2d(_LazyConvMixin, Conv2d):
    """`Conv2d` whose `in_channels` comes from its first input.

    >>> flow.nn.LazyConv2d(33, 3)(flow.randn(2, 16, 10, 10)).shape
    tideflow.Size([2, 33, 8, 8])
    """

    cls_to_become = Conv2d


class LazyConv3d(_LazyConvMixin, Conv3d):
    """`Conv3d` whose `in_channels` comes from its first input.

    >>> flow.nn.LazyConv3d(4, 2)(flow.randn(1, 2, 3, 3, 3)).shape
    tideflow.Size([1, 4, 2, 2, 2])
    """

    cls_to_become = Conv3d
