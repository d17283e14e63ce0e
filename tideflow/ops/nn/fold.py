"""nn.functional `unfold` (im2col: sliding blocks as columns) and `fold` (col2im: columns
summed back into an image). They share conv's window kernels and are each other's gradient."""

from __future__ import annotations

import math

import numpy as np

from ...framework.errors import ShapeError
from ...framework.tensor import Tensor
from .._rules import B, Meta, P, S, Signature, checked, defop, dispatch
from .conv import col2im, im2col, ntuple, window_counts
from .padding import pad_or_crop
from .sampling import compute_array

__all__ = ["unfold", "fold"]


def _describe(kernel_size, dilation, padding, stride) -> str:
    return (
        f"kernel_size={list(kernel_size)}, dilation={list(dilation)}, "
        f"padding={list(padding)}, stride={list(stride)}"
    )


def _blocks(op: str, spatial, kernel_size, dilation, padding, stride) -> tuple:
    """Number of sliding blocks per spatial dim; an error if some dim has none."""
    if min(kernel_size) < 1 or min(dilation) < 1 or min(stride) < 1 or min(padding) < 0:
        raise ShapeError(
            f"{op}: kernel_size, dilation and stride must be positive and padding non-negative, "
            f"got {_describe(kernel_size, dilation, padding, stride)}"
        )
    padded = [n + 2 * p for n, p in zip(spatial, padding, strict=True)]
    counts = window_counts(padded, kernel_size, stride, dilation)
    if min(counts) < 1:
        raise ShapeError(
            f"{op}: no sliding block fits the spatial size {list(spatial)} with "
            f"{_describe(kernel_size, dilation, padding, stride)}"
        )
    return counts


def _im2col_meta(x: Meta, *, kernel_size, dilation, padding, stride) -> Meta:
    if x.ndim != 4:
        raise ShapeError(
            f"unfold: expected a 3-d (unbatched) or 4-d (batched) input, got input of shape "
            f"{list(x.shape)}"
        )
    counts = _blocks("unfold", x.shape[2:], kernel_size, dilation, padding, stride)
    n, c = x.shape[:2]
    return Meta((n, c * math.prod(kernel_size), math.prod(counts)), x.dtype)


def _im2col_kernel(x, *, kernel_size, dilation, padding, stride):
    _blocks("unfold", x.shape[2:], kernel_size, dilation, padding, stride)
    xp = pad_or_crop(x, tuple((p, p) for p in padding))
    cols = im2col(xp, kernel_size, stride, dilation, groups=1)  # (N, 1, C * K, L)
    cols = cols.reshape(x.shape[0], cols.shape[2], cols.shape[3])
    return cols.copy() if np.may_share_memory(cols, x) else cols


def _col2im_meta(x: Meta, *, output_size, kernel_size, dilation, padding, stride) -> Meta:
    if x.ndim != 3:
        raise ShapeError(
            f"fold: expected a 2-d (unbatched) or 3-d (batched) input, got input of shape "
            f"{list(x.shape)}"
        )
    k = math.prod(kernel_size)
    n, ck, blocks = x.shape
    if ck % k:
        raise ShapeError(
            f"fold: the input's dimension 1 ({ck}) must be divisible by the product of "
            f"kernel_size {list(kernel_size)} ({k}); input shape {list(x.shape)}"
        )
    counts = _blocks("fold", output_size, kernel_size, dilation, padding, stride)
    if blocks != math.prod(counts):
        raise ShapeError(
            f"fold: the input's dimension 2 ({blocks}) must match the number of sliding blocks "
            f"{' * '.join(map(str, counts))} = {math.prod(counts)} of output_size "
            f"{list(output_size)} with {_describe(kernel_size, dilation, padding, stride)}"
        )
    return Meta((n, ck // k, *output_size), x.dtype)


def _col2im_kernel(x, *, output_size, kernel_size, dilation, padding, stride):
    _blocks("fold", output_size, kernel_size, dilation, padding, stride)
    n, c = x.shape[0], x.shape[1] // math.prod(kernel_size)
    padded = tuple(m + 2 * p for m, p in zip(output_size, padding, strict=True))
    out = col2im(compute_array(x), (n, c, *padded), kernel_size, stride, dilation)
    out = pad_or_crop(out, tuple((-p, -p) for p in padding))
    return np.ascontiguousarray(out.astype(x.dtype, copy=False))


def _linear_sbp(x: Meta, **_) -> list[Signature]:
    """Blocks of one sample stay on one rank; both maps are linear."""
    return [Signature((B,), (B,)), Signature((S(0),), (S(0),)), Signature((P,), (P,))]


def _geometry(ctx) -> dict:
    return {k: ctx.attrs[k] for k in ("kernel_size", "dilation", "padding", "stride")}


_im2col = defop(
    "im2col",
    inputs=("input",),
    meta=_im2col_meta,
    sbp=_linear_sbp,
    kernels={"cpu": _im2col_kernel},
    grad=lambda ctx, gy: (
        dispatch(_col2im, (gy,), {"output_size": ctx.input_shape(0)[2:], **_geometry(ctx)}),
    ),
)
_col2im = defop(
    "col2im",
    inputs=("input",),
    meta=_col2im_meta,
    sbp=_linear_sbp,
    kernels={"cpu": _col2im_kernel},
    grad=lambda ctx, gy: (dispatch(_im2col, (gy,), _geometry(ctx)),),
)


def _geometry_attrs(op, kernel_size, dilation, padding, stride) -> dict:
    return {
        "kernel_size": ntuple(kernel_size, 2, op, "kernel_size"),
        "dilation": ntuple(dilation, 2, op, "dilation"),
        "padding": ntuple(padding, 2, op, "padding"),
        "stride": ntuple(stride, 2, op, "stride"),
    }


@checked
def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding blocks (im2col): a (N, C, H, W) or (C, H, W) input becomes
    (N, C * kH * kW, L) columns, L the number of blocks, each column one flattened block
    (channel-major). `F.unfold(x, kernel_size=3, padding=1)`"""
    attrs = _geometry_attrs("unfold", kernel_size, dilation, padding, stride)
    if input.ndim == 3:
        out = dispatch(_im2col, (input.reshape(1, *input.shape),), attrs)
        return out.reshape(out.shape[1:])
    return dispatch(_im2col, (input,), attrs)


@checked
def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Combine sliding blocks into an image (col2im), summing where blocks overlap: the
    adjoint of `unfold`. A (N, C * kH * kW, L) or (C * kH * kW, L) input becomes
    (N, C, *output_size)."""
    attrs = _geometry_attrs("fold", kernel_size, dilation, padding, stride)
    attrs["output_size"] = ntuple(output_size, 2, "fold", "output_size")
    if input.ndim == 2:
        out = dispatch(_col2im, (input.reshape(1, *input.shape),), attrs)
        return out.reshape(out.shape[1:])
    return dispatch(_col2im, (input,), attrs)
