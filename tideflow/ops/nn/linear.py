"""Linear layers: linear (`x @ W.T + b`) and bilinear."""

from __future__ import annotations

import math

import numpy as np

from ...backends import bf16_gemm
from ...framework.errors import DTypeError, ShapeError
from ...framework.tensor import Tensor
from .._rules import B, Meta, P, S, Signature, checked, defop, dispatch
from ..complex import holomorphic
from .softmax import compute_dtype, reject_unless

__all__ = ["linear", "bilinear"]


def _fits(shape: tuple, out: tuple) -> bool:
    """Whether `shape` broadcasts to `out` (without growing it)."""
    lead = len(out) - len(shape)
    return lead >= 0 and all(d in (1, o) for d, o in zip(shape, out[lead:], strict=True))


def _linear_meta(x: Meta, w: Meta, b: Meta | None) -> Meta:
    if len(x.shape) == 0 or len(w.shape) not in (1, 2):
        raise ShapeError(
            f"linear: expected input of at least 1 dimension and a 1-d or 2-d weight, got "
            f"input of shape {list(x.shape)} and weight of shape {list(w.shape)}"
        )
    for name, m in (("weight", w), ("bias", b)):
        if m is not None and m.dtype is not x.dtype:
            raise DTypeError(
                f"linear: expected input and {name} to have the same dtype, got "
                f"{x.dtype.name} and {m.dtype.name}"
            )
    if x.shape[-1] != w.shape[-1]:
        raise ShapeError(
            f"linear: input has {x.shape[-1]} features but weight expects {w.shape[-1]} "
            f"(weight shape {list(w.shape)})"
        )
    shape = x.shape[:-1] + w.shape[:-1]
    if b is not None and not _fits(b.shape, shape):
        raise ShapeError(
            f"linear: bias of shape {list(b.shape)} does not broadcast to the output shape "
            f"{list(shape)}"
        )
    return Meta(shape, x.dtype)


def _bias_like(b: Meta | None, out_shape: tuple, axis: int | None):
    """The bias layout that matches an output split on `axis` (None: not split)."""
    if b is None:
        return None
    a = None if axis is None else axis - (len(out_shape) - len(b.shape))
    if a is not None and a >= 0 and b.shape[a] == out_shape[axis]:
        return S(a)
    return B


def _linear_sbp(x: Meta, w: Meta, b: Meta | None) -> list[Signature]:
    """Like matmul: split the batch (data parallel), the weight's rows (column parallel:
    output features split) or the contracted features on both (row parallel: partial sums,
    the bias then added once in total, i.e. partial too)."""
    out = x.shape[:-1] + w.shape[:-1]
    last = len(x.shape) - 1
    part = None if b is None else P
    sigs = [
        Signature((S(i), B, _bias_like(b, out, i)), (S(i),))
        for i in range(last)  # batch axes
    ]
    if len(w.shape) == 2:
        sigs.append(Signature((B, S(0), _bias_like(b, out, len(out) - 1)), (S(len(out) - 1),)))
    sigs += [
        Signature((S(last), S(len(w.shape) - 1), part), (P,)),
        Signature((P, B, part), (P,)),
        Signature((B, P, part), (P,)),
        Signature((B, B, _bias_like(b, out, None)), (B,)),
    ]
    return sigs


def _linear_kernel(x, w, b, *, out=None):
    """The product and bias, written into `out` when given (the result's shape and dtype,
    C-contiguous) unless half precision (computed wider, rounded into a fresh array)."""
    # NumPy would promote mixed dtypes and let the bias broadcast the output: the meta rule
    # words those errors.
    reject_unless(w.dtype == x.dtype and (b is None or b.dtype == x.dtype), "linear")
    dtype, ct = x.dtype, compute_dtype(x)
    if dtype != ct:
        return _linear_rounded(x, w, b, dtype, ct)
    if x.ndim > 2 and w.ndim == 2 and x.flags.c_contiguous:  # one GEMM (see matmul)
        rows = math.prod(x.shape[:-1])
        into = None if out is None else out.reshape(rows, w.shape[0])
        y = np.matmul(x.reshape(rows, x.shape[-1]), w.T, out=into)
        y = y.reshape(*x.shape[:-1], w.shape[0])
    else:
        y = np.matmul(x, w.T, out=out)
    if b is not None:
        reject_unless(_fits(b.shape, y.shape), "linear")
        y += b  # y is the fresh product
    return y


def _linear_rounded(x, w, b, dtype, ct):
    """Half-precision linear: float32 products and bias, rounded once."""
    if (
        dtype == bf16_gemm.BF16
        and w.ndim == 2
        and bf16_gemm.worth_it(x.size // max(x.shape[-1], 1), x.shape[-1], w.shape[0])
    ):
        # AVX512-BF16 products, float32 sums and bias, rounded once (see matmul)
        y = bf16_gemm.bf16_gemm(x.reshape(-1, x.shape[-1]), w.T)
        y = y.reshape(*x.shape[:-1], w.shape[0])
        if b is not None:
            reject_unless(_fits(b.shape, y.shape), "linear")
            y += b
        return bf16_gemm.rounded(y)
    x, w = x.astype(ct, copy=False), w.astype(ct, copy=False)
    if x.ndim > 2 and w.ndim == 2 and x.flags.c_contiguous:  # one GEMM (see matmul)
        y = np.matmul(x.reshape(-1, x.shape[-1]), w.T).reshape(*x.shape[:-1], w.shape[0])
    else:
        y = np.matmul(x, w.T)
    if b is not None:
        reject_unless(_fits(b.shape, y.shape), "linear")
        y += b
    return y.astype(dtype)


def _linear_grad(ctx, gy):
    need_x, need_w, need_b = ctx.needs_input_grad
    x, w = ctx.input, ctx.weight
    gx = gw = None
    if len(w.shape) == 1:  # y = x @ w: one output feature, dropped
        if need_x:
            gx = gy.reshape(*gy.shape, 1) * w
        if need_w:
            gw = (gy.reshape(*gy.shape, 1) * x).reshape(-1, w.shape[0]).sum(0)
    else:
        if need_x:
            gx = gy.matmul(w)
        if need_w:
            gw = gy.reshape(-1, w.shape[0]).t().matmul(x.reshape(-1, w.shape[1]))
    # NOTE: the engine sums the bias gradient over the broadcast (batch) dims.
    return gx, gw, (gy if need_b else None)


def _linear_onnx(g, x, w, b):
    if len(g.meta(w).shape) == 1:  # x @ w: one output feature, dropped
        y = g.op("MatMul", x, w)
        return y if b is None else g.op("Add", y, b)
    if len(g.meta(x).shape) == 2:
        return g.op("Gemm", x, w, b, transB=1)
    y = g.op("MatMul", x, g.op("Transpose", w, perm=[1, 0]))
    return y if b is None else g.op("Add", y, b)


_linear = defop(
    "linear",
    inputs=("input", "weight", "bias"),
    meta=_linear_meta,
    sbp=_linear_sbp,
    kernels={"cpu": _linear_kernel},
    out_kernels={"cpu": _linear_kernel},
    grad=holomorphic(_linear_grad),
    saves=("input", "weight"),
    onnx=_linear_onnx,
)


@checked
def linear(input, weight, bias: Tensor | None = None):
    """`input @ weight.T + bias` over the last dim of `input` (any leading dims), with
    `weight` of shape (out_features, in_features).

    >>> F.linear(flow.ones(2, 3), flow.ones(4, 3), flow.zeros(4)).shape
    tideflow.Size([2, 4])
    """
    return dispatch(_linear, (input, weight, bias), {})


@checked
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None):
    """`y[..., k] = input1 @ weight[k] @ input2 + bias[k]` with `weight` of shape
    (out_features, in1_features, in2_features).

    >>> F.bilinear(flow.ones(2, 3), flow.ones(2, 5), flow.ones(4, 3, 5)).shape
    tideflow.Size([2, 4])
    """
    ok = weight.ndim == 3 and input1.ndim > 0 and input2.ndim > 0
    if not (ok and input1.shape[-1] == weight.shape[1] and input2.shape[-1] == weight.shape[2]):
        raise ShapeError(
            f"bilinear: inputs of shapes {list(input1.shape)} and {list(input2.shape)} need a "
            f"weight of shape [out_features, in1_features, in2_features] matching their last "
            f"dims, got weight of shape {list(weight.shape)}"
        )
    out, in1, in2 = weight.shape
    # x1 @ W[k] for every k at once, then contracted with x2 over in2.
    t = linear(input1, weight.transpose(1, 2).reshape(out * in2, in1))
    y = (t.reshape(*t.shape[:-1], out, in2) * input2.reshape(*input2.shape[:-1], 1, in2)).sum(-1)
    return y if bias is None else y + bias
