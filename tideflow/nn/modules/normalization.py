"""Normalization layers: BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, LayerNorm, GroupNorm,
RMSNorm."""

from __future__ import annotations

import numbers
import warnings

from ...framework import dtype as dtypes
from ...framework.errors import ShapeError
from ...ops.creation import empty, ones, tensor, zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module, check_input_dim


def _register_affine(module: Module, shape: tuple, affine: bool, with_bias: bool, factory):
    """`weight` and `bias` parameters of `shape` (uninitialized), or None where not learned."""
    module.register_parameter("weight", Parameter(empty(shape, **factory)) if affine else None)
    bias = Parameter(empty(shape, **factory)) if affine and with_bias else None
    module.register_parameter("bias", bias)


class _NormBase(Module):
    """Per-channel affine parameters (ones and zeros) and, with `track_running_stats`, the
    running mean (zeros), variance (ones) and batch count (int64 0) as buffers."""

    def __init__(
        self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
        affine: bool = True, track_running_stats: bool = True, device=None, dtype=None, *,
        bias: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        factory = {"device": device, "dtype": dtype}
        _register_affine(self, (num_features,), affine, bias, factory)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, **factory))
            self.register_buffer("running_var", ones(num_features, **factory))
            self.register_buffer(
                "num_batches_tracked", tensor(0, dtype=dtypes.int64, device=device)
            )
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class _BatchNorm(_NormBase):
    _input_dims: tuple[int, ...]

    def forward(self, input):
        check_input_dim(type(self).__name__, input, self._input_dims)
        self._check_channels(input)
        # NOTE: with momentum=None the running statistics are the plain average of every
        # batch seen so far: batch k enters with weight 1/k.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        # Batch statistics in training, and in evaluation when no running ones are kept.
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        # Running statistics are read in evaluation and updated in training only if tracked.
        pass_stats = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if pass_stats else None,
            self.running_var if pass_stats else None,
            self.weight, self.bias, use_batch_stats, factor, self.eps,
        )  # fmt: skip

    def _check_channels(self, input) -> None:
        has_state = self.weight is not None or self.running_mean is not None
        if has_state and input.shape[1] != self.num_features:
            raise ShapeError(
                f"{type(self).__name__}: expected input with {self.num_features} channels "
                f"(dim 1), got input of shape {list(input.shape)}"
            )


class BatchNorm1d(_BatchNorm):
    """Batch normalization of a (N, C) or (N, C, L) input: each channel is normalized with
    the batch's statistics in training (updating `running_mean`/`running_var` with
    `momentum`; `momentum=None` keeps their plain average) and with the running ones in
    evaluation.

    >>> flow.nn.BatchNorm1d(100)(flow.randn(20, 100)).shape
    tideflow.Size([20, 100])
    """

    _input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of a (N, C, H, W) input (see BatchNorm1d).

    >>> flow.nn.BatchNorm2d(100, affine=False)(flow.randn(20, 100, 35, 45)).shape
    tideflow.Size([20, 100, 35, 45])
    """

    _input_dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization of a (N, C, D, H, W) input (see BatchNorm1d).

    >>> flow.nn.BatchNorm3d(4)(flow.randn(2, 4, 3, 5, 5)).shape
    tideflow.Size([2, 4, 3, 5, 5])
    """

    _input_dims = (5,)


class _InstanceNorm(_NormBase):
    _input_dims: tuple[int, ...]  # (unbatched, batched)

    def __init__(
        self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
        affine: bool = False, track_running_stats: bool = False, device=None, dtype=None, *,
        bias: bool = True,
    ) -> None:  # fmt: skip
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )

    def forward(self, input):
        check_input_dim(type(self).__name__, input, self._input_dims)
        unbatched = input.ndim == self._input_dims[0]
        channel_dim = 0 if unbatched else 1
        if input.shape[channel_dim] != self.num_features:
            if self.affine:
                raise ShapeError(
                    f"{type(self).__name__}: expected input's size at dim={channel_dim} to "
                    f"match num_features ({self.num_features}), got input of shape "
                    f"{list(input.shape)}"
                )
            warnings.warn(
                f"input's size at dim={channel_dim} does not match num_features. You can "
                "silence this warning by not passing in num_features, which is not used "
                "because affine=False",
                stacklevel=2,
            )
        x = input.unsqueeze(0) if unbatched else input
        y = F.instance_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0, self.eps,
        )  # fmt: skip
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of a (N, C, L) or (C, L) input: each channel of each sample
    is normalized over L. No affine parameters or running statistics by default.

    >>> flow.nn.InstanceNorm1d(100)(flow.randn(20, 100, 40)).shape
    tideflow.Size([20, 100, 40])
    """

    _input_dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of a (N, C, H, W) or (C, H, W) input.

    >>> flow.nn.InstanceNorm2d(100, affine=True)(flow.randn(20, 100, 35, 45)).shape
    tideflow.Size([20, 100, 35, 45])
    """

    _input_dims = (3, 4)


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of a (N, C, D, H, W) or (C, D, H, W) input.

    >>> flow.nn.InstanceNorm3d(4)(flow.randn(2, 4, 3, 5, 5)).shape
    tideflow.Size([2, 4, 3, 5, 5])
    """

    _input_dims = (4, 5)


def _shape_tuple(normalized_shape) -> tuple:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(normalized_shape)


class LayerNorm(Module):
    """Normalize over the trailing `normalized_shape` dims to zero mean and unit variance,
    then scale by `weight` (ones) and shift by `bias` (zeros), both of `normalized_shape`.

    >>> flow.nn.LayerNorm(10)(flow.randn(20, 5, 10)).shape
    tideflow.Size([20, 5, 10])
    """

    def __init__(
        self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
        bias: bool = True, device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        factory = {"device": device, "dtype": dtype}
        _register_affine(self, self.normalized_shape, elementwise_affine, bias, factory)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class GroupNorm(Module):
    """Split the channels (dim 1) into `num_groups` groups and normalize each group of each
    sample over its channels and spatial dims; then scale and shift per channel.

    >>> flow.nn.GroupNorm(3, 6)(flow.randn(20, 6, 10, 10)).shape
    tideflow.Size([20, 6, 10, 10])
    """

    def __init__(
        self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
        device=None, dtype=None, *, bias: bool = True,
    ) -> None:  # fmt: skip
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(
                f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            )
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        factory = {"device": device, "dtype": dtype}
        _register_affine(self, (num_channels,), affine, bias, factory)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """Divide by the root mean square over the trailing `normalized_shape` dims (no
    centering), then scale by `weight` (ones). `eps=None` uses the dtype's machine epsilon.

    >>> flow.nn.RMSNorm([2, 3])(flow.randn(2, 2, 3)).shape
    tideflow.Size([2, 2, 3])
    """

    def __init__(
        self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True,
        device=None, dtype=None,
    ) -> None:  # fmt: skip
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class LocalResponseNorm(Module):
    """Divide each value by `(k + alpha * mean(x**2)) ** beta` over a window of `size`
    neighbouring channels (see `F.local_response_norm`).

    >>> flow.nn.LocalResponseNorm(2)(flow.randn(2, 5, 3, 3)).shape
    tideflow.Size([2, 5, 3, 3])
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
