"""Lazy layers: LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d and the lazy batch
and instance norms infer their input size from the first input they see, then become the
plain layer (`Linear`, `Conv2d`, `BatchNorm1d`, ...)."""

from __future__ import annotations

from ...framework import dtype as dtypes
from ...ops.creation import tensor
from ..parameter import UninitializedBuffer, UninitializedParameter
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import (
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)


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


def _channels(module, input) -> int:
    """The channels of `input`: dim 1, or dim 0 of an unbatched input (one dim fewer than a
    batch of `module`'s)."""
    unbatched = input.ndim == module._unbatched_ndim
    return input.shape[0 if unbatched else 1]


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

    @property
    def _unbatched_ndim(self) -> int:
        return len(self.kernel_size) + 1

    def _weight_shape(self) -> tuple:
        return (self.out_channels, self.in_channels // self.groups, *self.kernel_size)

    def initialize_parameters(self, input) -> None:
        self.in_channels = _channels(self, input)
        if self.in_channels % self.groups:
            raise ValueError(
                f"{self._get_name()}: in_channels ({self.in_channels}, from the input of shape "
                f"{list(input.shape)}) must be divisible by groups ({self.groups})"
            )
        self.weight.materialize(self._weight_shape())
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


class _LazyConvTransposeMixin(_LazyConvMixin):
    """`_LazyConvMixin` with the transposed convolutions' arguments and weight layout
    (C_in, C_out / groups, *kernel)."""

    def __init__(
        self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
        groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros",
        device=None, dtype=None,
    ) -> None:  # fmt: skip
        LazyModuleMixin.__init__(
            self, 0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation,
            padding_mode, device, dtype,
        )  # fmt: skip
        self.out_channels = out_channels
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def _weight_shape(self) -> tuple:
        return (self.in_channels, self.out_channels // self.groups, *self.kernel_size)


class LazyConvTranspose1d(_LazyConvTransposeMixin, ConvTranspose1d):
    """`ConvTranspose1d` whose `in_channels` comes from its first input.

    >>> flow.nn.LazyConvTranspose1d(8, 3, stride=2)(flow.randn(4, 16, 10)).shape
    tideflow.Size([4, 8, 21])
    """

    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeMixin, ConvTranspose2d):
    """`ConvTranspose2d` whose `in_channels` comes from its first input.

    >>> flow.nn.LazyConvTranspose2d(8, 3)(flow.randn(2, 4, 5, 5)).shape
    tideflow.Size([2, 8, 7, 7])
    """

    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeMixin, ConvTranspose3d):
    """`ConvTranspose3d` whose `in_channels` comes from its first input.

    >>> flow.nn.LazyConvTranspose3d(2, 2)(flow.randn(1, 3, 2, 2, 2)).shape
    tideflow.Size([1, 2, 3, 3, 3])
    """

    cls_to_become = ConvTranspose3d


class _LazyNormMixin(LazyModuleMixin):
    """The channels of the first input become `num_features`: the affine parameters and the
    running statistics take that size then."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True) -> None:  # fmt: skip
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype) if bias else None
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=dtypes.int64)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def has_uninitialized_params(self) -> bool:
        return super().has_uninitialized_params() or any(
            isinstance(b, UninitializedBuffer) for b in self.buffers()
        )

    def initialize_parameters(self, input) -> None:
        self.num_features = _channels(self, input)
        if self.affine:
            self.weight.materialize((self.num_features,))
            if self.bias is not None:
                self.bias.materialize((self.num_features,))
        if self.track_running_stats:
            self.running_mean.materialize((self.num_features,))
            self.running_var.materialize((self.num_features,))
        self.reset_parameters()


class LazyBatchNorm1d(_LazyNormMixin, BatchNorm1d):
    """`BatchNorm1d` whose `num_features` comes from its first input.

    >>> flow.nn.LazyBatchNorm1d()(flow.randn(8, 5)).shape
    tideflow.Size([8, 5])
    """

    cls_to_become = BatchNorm1d
    _unbatched_ndim = 1  # BatchNorm1d needs a batch: (N, C) and (N, C, L) read C at dim 1


class LazyBatchNorm2d(_LazyNormMixin, BatchNorm2d):
    """`BatchNorm2d` whose `num_features` comes from its first input.

    >>> flow.nn.LazyBatchNorm2d()(flow.randn(2, 3, 4, 4)).shape
    tideflow.Size([2, 3, 4, 4])
    """

    cls_to_become = BatchNorm2d
    _unbatched_ndim = 3


class LazyBatchNorm3d(_LazyNormMixin, BatchNorm3d):
    """`BatchNorm3d` whose `num_features` comes from its first input."""

    cls_to_become = BatchNorm3d
    _unbatched_ndim = 4


class LazyInstanceNorm1d(_LazyNormMixin, InstanceNorm1d):
    """`InstanceNorm1d` whose `num_features` comes from its first input (C of (N, C, L) or
    (C, L)). As PyTorch's, affine and tracking running statistics by default (unlike
    InstanceNorm1d).

    >>> flow.nn.LazyInstanceNorm1d()(flow.randn(2, 3, 6)).shape
    tideflow.Size([2, 3, 6])
    """

    cls_to_become = InstanceNorm1d
    _unbatched_ndim = 2


class LazyInstanceNorm2d(LazyInstanceNorm1d, InstanceNorm2d):
    """`InstanceNorm2d` whose `num_features` comes from its first input."""

    cls_to_become = InstanceNorm2d
    _unbatched_ndim = 3


class LazyInstanceNorm3d(LazyInstanceNorm1d, InstanceNorm3d):
    """`InstanceNorm3d` whose `num_features` comes from its first input."""

    cls_to_become = InstanceNorm3d
    _unbatched_ndim = 4
