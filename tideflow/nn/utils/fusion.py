"""Fold an evaluation-mode batch norm into the convolution or linear layer before it (for
inference): the norm's affine map of the running statistics becomes the layer's weight and
bias."""

from __future__ import annotations

import copy

from ...ops.creation import ones_like, zeros_like
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights"]  # fmt: skip


def _check_eval(layer, bn) -> None:
    if layer.training or bn.training:
        raise ValueError("Fusion only for eval!")
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError("fusion: the batch norm must track running statistics")


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) of the convolution followed by the batch norm, as parameters; the
    output channels are dim 0 of the weight (dim 1 with `transpose`)."""
    weight_dtype = conv_w.dtype
    bias_dtype = conv_b.dtype if conv_b is not None else weight_dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    scale = (bn_rv + bn_eps).rsqrt()
    shape = [1, -1] if transpose else [-1, 1]
    shape += [1] * (conv_w.ndim - 2)
    weight = (conv_w * (bn_w * scale).reshape(shape)).to(weight_dtype)
    bias = ((conv_b - bn_rm) * scale * bn_w + bn_b).to(bias_dtype)
    return Parameter(weight, conv_w.requires_grad), Parameter(bias, conv_b.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of `conv` computing `bn(conv(x))` (both in eval mode).

    >>> conv, bn = flow.nn.Conv2d(3, 4, 3).eval(), flow.nn.BatchNorm2d(4).eval()
    >>> fused = flow.nn.utils.fuse_conv_bn_eval(conv, bn)
    """
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias,
        transpose,
    )  # fmt: skip
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) of the linear layer followed by the batch norm, as parameters."""
    weight_dtype = linear_w.dtype
    bias_dtype = linear_b.dtype if linear_b is not None else weight_dtype
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    weight = linear_w * scale.unsqueeze(-1).to(weight_dtype)
    bias = ((linear_b - bn_rm) * scale + bn_b).to(bias_dtype)
    return Parameter(weight, linear_w.requires_grad), Parameter(bias, linear_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of `linear` computing `bn(linear(x))` (both in eval mode)."""
    _check_eval(linear, bn)
    if not (linear.out_features == bn.num_features or bn.num_features == 1):
        raise ValueError(
            "To fuse, linear.out_features == bn.num_features or bn.num_features == 1, got "
            f"{linear.out_features} and {bn.num_features}"
        )
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(
        fused.weight, fused.bias, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias
    )
    return fused
