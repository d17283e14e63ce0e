"""SyncBatchNorm: batch normalization whose training statistics span the batch of every rank
of a process group (data parallelism with small per-rank batches), and
`convert_sync_batchnorm` to swap it in for a model's batch norms."""

from __future__ import annotations

from ... import distributed as dist
from ...autograd.function import Function
from ...framework import dtype as dtypes
from ...framework.errors import ShapeError
from ...ops.creation import zeros
from ...ops.shape import cat, stack
from .normalization import _BatchNorm


def _channel_shape(x) -> tuple:
    """The shape that broadcasts a per-channel vector against x (N, C, *)."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


class _SyncBatchNormFunction(Function):
    """Forward: every rank's count, mean and sum of squared deviations per channel are
    gathered and combined (the parallel variance formula: stable, and the same on every
    rank). Backward: the two per-channel sums of the input gradient are all-reduced; the
    weight's and bias's gradients stay local, as DDP reduces parameter gradients itself."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, factor, group):
        axes = (0, *range(2, x.ndim))
        compute = dtypes.float32 if x.dtype in (dtypes.float16, dtypes.bfloat16) else x.dtype
        xc = x.to(compute)
        count = x.numel() // x.shape[1]
        mean = xc.mean(axes)
        squares = ((xc - mean.reshape(_channel_shape(x))) ** 2).sum(axes)
        local = cat([zeros(1, dtype=compute) + count, mean, squares])
        gathered = [zeros(local.shape, dtype=compute) for _ in range(dist.get_world_size(group))]
        dist.all_gather(gathered, local, group=group)
        rows = stack(gathered)  # (ranks, 1 + 2C): count, means, squared deviations
        counts, means, deviations = (
            rows[:, :1],
            rows[:, 1 : 1 + x.shape[1]],
            rows[:, 1 + x.shape[1] :],
        )
        total = counts.sum()
        global_mean = (counts * means).sum(0) / total
        m2 = (deviations + counts * (means - global_mean) ** 2).sum(0)
        invstd = (m2 / total + eps).rsqrt()
        if running_mean is not None:
            running_mean.mul_(1 - factor).add_(global_mean.to(running_mean.dtype) * factor)
            unbiased = m2 / (total - 1).clamp_min(1)
            running_var.mul_(1 - factor).add_(unbiased.to(running_var.dtype) * factor)
        shape = _channel_shape(x)
        xhat = (xc - global_mean.reshape(shape)) * invstd.reshape(shape)
        y = xhat
        if weight is not None:
            y = y * weight.reshape(shape) + bias.reshape(shape)
        ctx.save_for_backward(xhat, weight, invstd)
        ctx.total, ctx.group = total, group
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xhat, weight, invstd = ctx.saved_tensors
        axes = (0, *range(2, xhat.ndim))
        shape = _channel_shape(xhat)
        dyc = dy.to(xhat.dtype)
        sum_dy = dyc.sum(axes)
        sum_dy_xhat = (dyc * xhat).sum(axes)
        both = cat([sum_dy, sum_dy_xhat])
        dist.all_reduce(both, group=ctx.group)
        channels = xhat.shape[1]
        mean_dy, mean_dy_xhat = both[:channels] / ctx.total, both[channels:] / ctx.total
        scale = invstd if weight is None else invstd * weight.to(xhat.dtype)
        dx = (dyc - mean_dy.reshape(shape) - xhat * mean_dy_xhat.reshape(shape)) * scale.reshape(
            shape
        )
        dw = None if weight is None else sum_dy_xhat.to(weight.dtype)
        db = None if weight is None else sum_dy.to(weight.dtype)
        return dx.to(dy.dtype), dw, db, None, None, None, None, None


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over (N, C, *) inputs whose statistics in training are those of
    the whole batch across the ranks of `process_group` (the world by default): each rank
    passes its part, and every rank normalizes with the same mean and variance (and updates
    the same running statistics). In evaluation, or in a group of one, it is BatchNorm.

    >>> flow.nn.SyncBatchNorm(4)(flow.randn(8, 4, 3)).shape
    tideflow.Size([8, 4, 3])
    """

    _input_dims = tuple(range(2, 9))  # (N, C, *) of any rank

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, process_group=None,
                 device=None, dtype=None) -> None:  # fmt: skip
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

    def forward(self, input):
        if input.ndim < 2:
            raise ShapeError(f"SyncBatchNorm: expected at least 2D input (got {input.ndim}D input)")
        self._check_channels(input)
        if not self.training or dist.get_world_size(self.process_group) == 1:
            return super().forward(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        tracked = self.track_running_stats
        return _SyncBatchNormFunction.apply(
            input, self.weight, self.bias, self.running_mean if tracked else None,
            self.running_var if tracked else None, self.eps, factor, self.process_group,
        )  # fmt: skip

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """`module` with every BatchNorm1d/2d/3d inside replaced by a SyncBatchNorm holding
        the same parameters and running statistics (the same tensors), in the same mode.

        >>> net = flow.nn.Sequential(flow.nn.Conv2d(3, 4, 1), flow.nn.BatchNorm2d(4))
        >>> flow.nn.SyncBatchNorm.convert_sync_batchnorm(net)[1]
        SyncBatchNorm(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)
        """
        if isinstance(module, _BatchNorm) and not isinstance(module, cls):
            converted = cls(module.num_features, module.eps, module.momentum, module.affine,
                            module.track_running_stats, process_group)  # fmt: skip
            for name in ("weight", "bias"):
                if getattr(module, name, None) is not None:
                    setattr(converted, name, getattr(module, name))
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                converted.register_buffer(name, getattr(module, name))
            converted.train(module.training)
            module = converted
        for name, child in list(module.named_children()):
            module.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return module
