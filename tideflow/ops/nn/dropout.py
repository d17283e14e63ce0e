"""Dropout: elementwise (dropout) and channel-wise (dropout1d/2d/3d).

One fused op draws the keep-mask from a `Generator` (so results repeat under
`flow.manual_seed`) and scales the kept values by 1 / (1 - p); it returns the boolean mask
too, for the gradient `gy * mask / (1 - p)`.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ...framework import dtype as dtypes
from ...framework.dispatch import inplace as inplace_method
from ...framework.errors import DTypeError, ShapeError
from ...framework.node import is_float
from ...framework.random import default_generator
from ...framework.tensor import Tensor
from .._rules import B, Meta, Signature, checked, defop, dispatch
from ..creation import on_placement_of
from ..random import rand
from .softmax import reject_unless

__all__ = [
    "alpha_dropout",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "feature_alpha_dropout",
]


def _scale(p: float) -> float:
    return 0.0 if p == 1 else 1.0 / (1.0 - p)


def _dropout_meta(x: Meta, *, p, noise_shape, generator) -> tuple:
    if not x.dtype.is_floating_point:
        raise DTypeError(f"dropout: expected a floating point input, got {x.dtype.name}")
    return Meta(x.shape, x.dtype), Meta(noise_shape, dtypes.bool_)


def _dropout_kernel(x, *, p, noise_shape, generator):
    reject_unless(is_float(x.dtype), "dropout")
    keep = generator.rng.random(noise_shape, dtype=np.float32) >= p
    out = x * keep
    out *= np.asarray(_scale(p), x.dtype)
    return out, keep


def _dropout_sbp(x: Meta, **_) -> list[Signature]:
    # NOTE: every rank must draw the same mask for a replicated result: no split layouts;
    # both outputs (the result and the mask) are whole.
    return [Signature((B,), (B, B))]


_dropout = defop(
    "dropout",
    inputs=("input",),
    meta=_dropout_meta,
    sbp=_dropout_sbp,
    kernels={"cpu": _dropout_kernel},
    grad=lambda ctx, gy, _gmask: (gy * ctx.out1 * _scale(ctx.p),),
    saves=("out1",),
    n_out=2,
)


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _apply(input, p: float, noise_shape: tuple):
    attrs = {"p": float(p), "noise_shape": tuple(noise_shape), "generator": default_generator}
    return dispatch(_dropout, (input,), attrs)[0]


_apply_ = inplace_method(_apply, "dropout_")


def _maybe_dropout(input, p: float, training: bool, inplace: bool, noise_shape: tuple):
    _check_p(p)
    if not training or p == 0 or input.numel() == 0:
        return input
    return _apply_(input, p, noise_shape) if inplace else _apply(input, p, noise_shape)


@checked
def dropout(input: Tensor, p=0.5, training=True, inplace=False):
    """Zero each element with probability `p` and scale the others by 1 / (1 - p), so the
    expectation is unchanged; the identity when not `training`.

    >>> F.dropout(flow.ones(8), p=0.5)
    """
    return _maybe_dropout(input, p, training, inplace, tuple(input.shape))


def _channel_noise(shape: tuple, batched: bool) -> tuple:
    """One draw per channel: (N, C, 1, ...) for batched inputs, (C, 1, ...) otherwise."""
    lead = 2 if batched else 1
    return shape[:lead] + (1,) * (len(shape) - lead)


@checked
def dropout1d(input: Tensor, p=0.5, training=True, inplace=False):
    """Zero whole channels (dim -2 of (N, C, L) or (C, L) inputs) with probability `p` and
    scale the others by 1 / (1 - p).

    >>> F.dropout1d(flow.ones(2, 4, 3), p=0.5)
    """
    if input.ndim not in (2, 3):
        raise ShapeError(
            f"dropout1d: expected a 2-d (C, L) or 3-d (N, C, L) input, got shape "
            f"{list(input.shape)}"
        )
    noise = _channel_noise(tuple(input.shape), input.ndim == 3)
    return _maybe_dropout(input, p, training, inplace, noise)


@checked
def dropout2d(input: Tensor, p=0.5, training=True, inplace=False):
    """Zero whole channels (dim 1 of (N, C, H, W) inputs) with probability `p` and scale the
    others by 1 / (1 - p). As in PyTorch, a 3-d input is read as (N, C, L), with a warning.

    >>> F.dropout2d(flow.ones(2, 4, 3, 3), p=0.5)
    """
    if input.ndim < 2:
        raise ShapeError(
            f"dropout2d: expected an input with channels, got shape {list(input.shape)}"
        )
    if input.ndim not in (3, 4):
        warnings.warn(
            f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated "
            "and will result in an error in a future release. To retain the behavior and "
            "silence this warning, please use dropout instead. Note that dropout2d exists to "
            "provide channel-wise dropout on inputs with 2 spatial dimensions, a channel "
            "dimension, and an optional batch dimension (i.e. 3D or 4D inputs).",
            stacklevel=2,
        )
    if input.ndim == 3:
        warnings.warn(
            "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D "
            "dropout behavior is desired - input is interpreted as shape (N, C, L), where C "
            "is the channel dim. This behavior will change in a future release to interpret "
            "the input as one without a batch dimension, i.e. shape (C, H, W). To maintain "
            "the 1D channel-wise dropout behavior, please switch to using dropout1d instead.",
            stacklevel=2,
        )
    noise = _channel_noise(tuple(input.shape), batched=True)
    return _maybe_dropout(input, p, training, inplace, noise)


@checked
def dropout3d(input: Tensor, p=0.5, training=True, inplace=False):
    """Zero whole channels (dim 1 of (N, C, D, H, W), dim 0 of (C, D, H, W) inputs) with
    probability `p` and scale the others by 1 / (1 - p).

    >>> F.dropout3d(flow.ones(2, 4, 2, 2, 2), p=0.5)
    """
    if input.ndim < 2:
        raise ShapeError(
            f"dropout3d: expected an input with channels, got shape {list(input.shape)}"
        )
    if input.ndim not in (4, 5):
        warnings.warn(
            f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated "
            "and will result in an error in a future release. To retain the behavior and "
            "silence this warning, please use dropout instead. Note that dropout3d exists to "
            "provide channel-wise dropout on inputs with 3 spatial dimensions, a channel "
            "dimension, and an optional batch dimension (i.e. 4D or 5D inputs).",
            stacklevel=2,
        )
    noise = _channel_noise(tuple(input.shape), batched=input.ndim == 5)
    return _maybe_dropout(input, p, training, inplace, noise)


# -- alpha dropout: keeps SELU's self-normalizing mean and variance -------------------------
# NOTE: -SELU(-inf) = scale * alpha, the value a dropped unit takes (negated)
_SELU_SATURATION = 1.7580993408473766


def _alpha_dropout(input, p: float, training: bool, inplace: bool, feature: bool, op: str):
    """Dropped units take SELU's saturation value -scale * alpha, then an affine map
    a * x + b restores zero mean and unit variance (PyTorch's `_dropout_impl`)."""
    _check_p(p)
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point input, got {input.dtype.name}")
    if feature and input.ndim < 2:
        raise ShapeError(
            f"{op}: feature dropout needs at least 2 dims (N, C, ...), got shape "
            f"{list(input.shape)}"
        )
    if not training or p == 0 or input.numel() == 0:
        return input
    if p == 1:
        out = input * 0
    else:
        shape = tuple(input.shape)
        noise = _channel_noise(shape, batched=True) if feature else shape
        keep = (rand(noise, dtype=input.dtype, **on_placement_of(input)) >= p).to(input.dtype)
        a = 1.0 / math.sqrt((_SELU_SATURATION**2 * p + 1) * (1 - p))
        out = input * keep * a + (keep - (1 - p)) * (_SELU_SATURATION * a)
    if inplace:
        return input.copy_(out)
    return out


@checked
def alpha_dropout(input: Tensor, p=0.5, training=False, inplace=False):
    """Dropout for SELU networks: in training, each element becomes SELU's saturation value
    with probability `p`, then all are mapped affinely so the mean and variance stay those of
    the input (0 and 1 after SELU); the identity when not `training` (the default).

    >>> F.alpha_dropout(flow.randn(8), p=0.2, training=True).shape
    tideflow.Size([8])
    """
    return _alpha_dropout(input, p, training, inplace, feature=False, op="alpha_dropout")


@checked
def feature_alpha_dropout(input: Tensor, p=0.5, training=False, inplace=False):
    """`alpha_dropout` of whole channels (dim 1 of an (N, C, ...) input).

    >>> F.feature_alpha_dropout(flow.randn(2, 4, 3), p=0.2, training=True).shape
    tideflow.Size([2, 4, 3])
    """
    return _alpha_dropout(input, p, training, inplace, feature=True, op="feature_alpha_dropout")
