"""Softmax family: softmax, log_softmax, softmin.

softmax and log_softmax are fused ops (one pass with the max subtracted for stability); their
grads use the saved output only: `y * (gy - sum(gy * y))` and `gy - exp(y) * sum(gy)`, each
one op (softmax_backward, log_softmax_backward) with its own grad rule.
"""

from __future__ import annotations

import warnings

import numpy as np

from ...framework import dtype as dtypes
from ...framework.errors import DTypeError, Rejected, TideflowError
from ...framework.grad_mode import is_grad_enabled
from ...framework.node import is_float
from ...framework.tensor import Tensor
from .. import creation
from .._onnx_rules import reduce, scalar_of
from .._rules import B, Meta, P, S, Signature, checked, defop, dispatch, methods, normalize_dim

__all__ = ["softmax", "log_softmax", "softmin", "gumbel_softmax"]


# -- helpers shared by the nn.functional modules ---------------------------------------------
def reject_unless(ok: bool, op: str) -> None:
    """Kernels call this where NumPy would broadcast or promote what the meta rule rejects:
    the dispatcher then asks the meta rule for the user-facing error (the success path pays
    for no message)."""
    if not ok:
        raise Rejected(f"{op}: operands rejected")


def refuse_grad(op: str, **tensors) -> None:
    """Arguments PyTorch does not differentiate (class weights, running statistics) are
    refused, as there, when they require grad: better than silently dropping the gradient."""
    for name, t in tensors.items():
        if t is not None and t.requires_grad and is_grad_enabled():
            raise TideflowError(
                f"{op}: the function is not differentiable with respect to {name}, which "
                "requires grad; pass it detached"
            )


def compute_dtype(x: np.ndarray) -> np.dtype:
    """Half-precision inputs are computed in float32 (NumPy's f16/bf16 math is slow and
    inexact, and it has no half BLAS), like PyTorch's CPU kernels; others as they are."""
    return np.dtype(np.float32) if is_float(x.dtype) and x.dtype.itemsize < 4 else x.dtype


def _softmax_meta(op):
    def meta(x: Meta, *, dim) -> Meta:
        if not x.dtype.is_floating_point:
            raise DTypeError(f"{op}: expected a floating point input, got {x.dtype.name}")
        normalize_dim(op, dim, len(x.shape))
        return Meta(x.shape, x.dtype)

    return meta


def _softmax_sbp(x: Meta, *, dim) -> list[Signature]:
    """Rows along `dim` must be whole on a rank: any other axis may be split."""
    dim = normalize_dim("softmax", dim, len(x.shape))
    sigs = [Signature((S(a),), (S(a),)) for a in range(len(x.shape)) if a != dim]
    return [*sigs, Signature((B,), (B,))]


def _shifted(x: np.ndarray, dim: int) -> np.ndarray:
    """x - max(x) along dim, in the computation dtype (rows of all -inf give nan, as in
    PyTorch)."""
    x = x.astype(compute_dtype(x), copy=False)
    with np.errstate(invalid="ignore"):
        return x - np.max(x, axis=dim, keepdims=True, initial=-np.inf)


def _on_rows(kernel):
    """NumPy has no axis 0 on a 0-d array; PyTorch treats a 0-d tensor as one row."""

    def run(x, *, dim):
        if x.ndim == 0:
            return kernel(x.reshape(1), dim=0).reshape(())
        return kernel(x, dim=dim)

    return run


@_on_rows
def _softmax_kernel(x, *, dim):
    reject_unless(is_float(x.dtype), "softmax")
    e = _shifted(x, dim)  # a fresh array, finished in place
    np.exp(e, out=e)
    e /= np.sum(e, axis=dim, keepdims=True)
    return e.astype(x.dtype, copy=False)


@_on_rows
def _safe_softmax_kernel(x, *, dim):
    """softmax, but 0 (not nan) on rows that are entirely -inf (fully masked attention)."""
    reject_unless(is_float(x.dtype), "safe_softmax")
    xc = x.astype(compute_dtype(x), copy=False)
    m = np.max(xc, axis=dim, keepdims=True, initial=-np.inf)
    m[m == -np.inf] = 0
    e = np.subtract(xc, m)  # a fresh array, finished in place
    np.exp(e, out=e)
    s = np.sum(e, axis=dim, keepdims=True)
    masked = s == 0  # rows that were all -inf: exp gave zeros
    s[masked] = 1
    e /= s
    return e.astype(x.dtype, copy=False)


@_on_rows
def _log_softmax_kernel(x, *, dim):
    reject_unless(is_float(x.dtype), "log_softmax")
    z = _shifted(x, dim)
    with np.errstate(divide="ignore"):
        z -= np.log(np.sum(np.exp(z), axis=dim, keepdims=True))
    return z.astype(x.dtype, copy=False)


def _softmax_grad(ctx, gy):
    return (dispatch(_softmax_backward, (gy, ctx.out), {"dim": ctx.dim}),)


def _log_softmax_grad(ctx, gy):
    return (dispatch(_log_softmax_backward, (gy, ctx.out), {"dim": ctx.dim}),)


# -- the backward ops: one pass over the rows instead of one per primitive ------------------
# softmax_backward(gy, y) = y * (gy - sum(gy * y)) and log_softmax_backward(gy, y) =
# gy - exp(y) * sum(gy), sums along `dim`; y is the forward's output (PyTorch's
# _softmax_backward_data and _log_softmax_backward_data).
def _backward_meta(op):
    def meta(gy: Meta, y: Meta, *, dim) -> Meta:
        if not y.dtype.is_floating_point:
            raise DTypeError(f"{op}: expected a floating point output, got {y.dtype.name}")
        if tuple(gy.shape) != tuple(y.shape) or gy.dtype is not y.dtype:
            raise DTypeError(
                f"{op}: expected grad_out of shape {list(y.shape)} and dtype {y.dtype.name}, "
                f"got {list(gy.shape)} and {gy.dtype.name}"
            )
        normalize_dim(op, dim, len(y.shape))
        return Meta(y.shape, y.dtype)

    return meta


def _backward_sbp(gy: Meta, y: Meta, *, dim) -> list[Signature]:
    """The forward's splits; linear in grad_out, so a partial grad_out gives a partial one."""
    dim = normalize_dim("softmax_backward", dim, len(y.shape))
    sigs = [Signature((S(a), S(a)), (S(a),)) for a in range(len(y.shape)) if a != dim]
    return [*sigs, Signature((B, B), (B,)), Signature((P, B), (P,))]


def _backward_rows(kernel):
    """0-d operands are one row (as in `_on_rows`); halves are computed in float32."""

    def run(gy, y, *, dim):
        reject_unless(is_float(y.dtype) and gy.shape == y.shape, "softmax_backward")
        shape, ct = y.shape, compute_dtype(y)
        if y.ndim == 0:
            gy, y, dim = gy.reshape(1), y.reshape(1), 0
        gx = kernel(gy.astype(ct, copy=False), y.astype(ct, copy=False), dim)
        return gx.reshape(shape).astype(y.dtype, copy=False)

    return run


@_backward_rows
def _softmax_backward_kernel(gy, y, dim):
    gx = gy * y
    gx -= y * np.sum(gx, axis=dim, keepdims=True)
    return gx


@_backward_rows
def _log_softmax_backward_kernel(gy, y, dim):
    return gy - np.exp(y) * np.sum(gy, axis=dim, keepdims=True)


def _softmax_backward_grad(ctx, a):
    gy, y, dim = ctx.grad_out, ctx.output, ctx.dim
    # <a, gx> = sum(a * y * gy) - sum(a * y) * sum(gy * y), per row
    say = (a * y).sum(dim, keepdim=True)
    d_gy = dispatch(_softmax_backward, (a, y), {"dim": dim})
    d_y = a * (gy - (gy * y).sum(dim, keepdim=True)) - gy * say
    return d_gy, d_y


def _log_softmax_backward_grad(ctx, a):
    gy, y, dim = ctx.grad_out, ctx.output, ctx.dim
    e = y.exp()
    # <a, gx> = sum(a * gy) - sum(a * exp(y)) * sum(gy), per row
    d_gy = a - (a * e).sum(dim, keepdim=True)
    d_y = a * e * -gy.sum(dim, keepdim=True)
    return d_gy, d_y


_softmax_backward = defop(
    "softmax_backward",
    inputs=("grad_out", "output"),
    meta=_backward_meta("softmax_backward"),
    sbp=_backward_sbp,
    kernels={"cpu": _softmax_backward_kernel},
    grad=_softmax_backward_grad,
    saves=("grad_out", "output"),
)
_log_softmax_backward = defop(
    "log_softmax_backward",
    inputs=("grad_out", "output"),
    meta=_backward_meta("log_softmax_backward"),
    sbp=_backward_sbp,
    kernels={"cpu": _log_softmax_backward_kernel},
    grad=_log_softmax_backward_grad,
    saves=("grad_out", "output"),
)


def softmax_backward(grad_out, output, dim):
    """The gradient of `softmax(x, dim)` given its `output`, in one kernel. Internal (not in
    nn.functional, as in PyTorch): softmax's grad rule and the op database call it.

    >>> from tideflow.ops.nn.softmax import softmax_backward
    >>> y = F.softmax(flow.tensor([[1.0, 2.0, 3.0]]), dim=1)
    >>> softmax_backward(flow.ones(1, 3), y, 1)
    """
    return dispatch(
        _softmax_backward,
        (grad_out, output),
        {"dim": normalize_dim("softmax_backward", dim, output.ndim)},
    )


def log_softmax_backward(grad_out, output, dim):
    """The gradient of `log_softmax(x, dim)` given its `output`, in one kernel (internal, as
    `softmax_backward`).

    >>> from tideflow.ops.nn.softmax import log_softmax_backward
    >>> y = F.log_softmax(flow.tensor([[1.0, 2.0, 3.0]]), dim=1)
    >>> log_softmax_backward(flow.ones(1, 3), y, 1)
    """
    return dispatch(
        _log_softmax_backward,
        (grad_out, output),
        {"dim": normalize_dim("log_softmax_backward", dim, output.ndim)},
    )


def _softmax_onnx(op_type: str):
    def lower(g, x, *, dim):
        if g.meta(x).shape:
            return g.op(op_type, x, axis=dim)
        # NOTE: ONNX's softmax needs a dim: a 0-d tensor's is a softmax over one element
        return scalar_of(g, g.op(op_type, g.op("Reshape", x, g.ints([1])), axis=0))

    return lower


def _safe_softmax_onnx(g, x, *, dim):
    """Softmax, and 0 on rows that are all -inf (ONNX's Softmax gives nan there)."""
    top = reduce(g, "ReduceMax", x, [dim], True)
    masked = g.op("Equal", top, g.tensor(-np.inf, x))
    return g.op("Where", masked, g.tensor(0, x), _softmax_onnx("Softmax")(g, x, dim=dim))


_softmax = defop(
    "softmax",
    inputs=("input",),
    meta=_softmax_meta("softmax"),
    sbp=_softmax_sbp,
    kernels={"cpu": _softmax_kernel},
    grad=_softmax_grad,
    saves=("out",),
    onnx=_softmax_onnx("Softmax"),
)
# NOTE: PyTorch's `_safe_softmax`, for attention: fully masked rows give 0 (and 0 gradients).
safe_softmax = defop(
    "safe_softmax",
    inputs=("input",),
    meta=_softmax_meta("safe_softmax"),
    sbp=_softmax_sbp,
    kernels={"cpu": _safe_softmax_kernel},
    grad=_softmax_grad,
    saves=("out",),
    onnx=_safe_softmax_onnx,
)
_log_softmax = defop(
    "log_softmax",
    inputs=("input",),
    meta=_softmax_meta("log_softmax"),
    sbp=_softmax_sbp,
    kernels={"cpu": _log_softmax_kernel},
    grad=_log_softmax_grad,
    saves=("out",),
    onnx=_softmax_onnx("LogSoftmax"),
)


def _implicit_dim(op: str, ndim: int, stacklevel: int) -> int:
    """PyTorch's legacy choice when `dim` is omitted (deprecated there too)."""
    warnings.warn(
        f"Implicit dimension choice for {op} has been deprecated. "
        "Change the call to include dim=X as an argument.",
        stacklevel=stacklevel,
    )
    return 0 if ndim in (0, 1, 3) else 1


def _prepare(op: str, input, dim, stacklevel: int, dtype):
    if dim is None:
        dim = _implicit_dim(op, input.ndim, stacklevel + 1)
    if dtype is not None:
        input = input.to(dtypes.to_dtype(dtype))
    return input, {"dim": normalize_dim(op, dim, input.ndim)}


@checked
def softmax(input: Tensor, dim=None, _stacklevel=3, dtype=None):
    """`exp(x) / sum(exp(x))` along `dim`: each slice becomes a probability distribution.
    With `dtype`, the input is cast to it first (to compute half inputs in float32, say).

    >>> F.softmax(flow.tensor([[1.0, 2.0, 3.0]]), dim=1)
    """
    input, attrs = _prepare("softmax", input, dim, _stacklevel, dtype)
    return dispatch(_softmax, (input,), attrs)


@checked
def log_softmax(input: Tensor, dim=None, _stacklevel=3, dtype=None):
    """`log(softmax(x))` along `dim`, computed stably as `x - max - log(sum(exp(x - max)))`.

    >>> F.log_softmax(flow.tensor([[1.0, 2.0, 3.0]]), dim=1)
    """
    input, attrs = _prepare("log_softmax", input, dim, _stacklevel, dtype)
    return dispatch(_log_softmax, (input,), attrs)


@checked
def softmin(input: Tensor, dim=None, _stacklevel=3, dtype=None):
    """`softmax(-x)` along `dim`: small values get the large probabilities.

    >>> F.softmin(flow.tensor([[1.0, 2.0, 3.0]]), dim=1)
    """
    input, attrs = _prepare("softmin", input, dim, _stacklevel, dtype)
    return dispatch(_softmax, (-input,), attrs)


def _softmax_method(self, dim, dtype=None):
    return softmax(self, dim, dtype=dtype)


def _log_softmax_method(self, dim, dtype=None):
    return log_softmax(self, dim, dtype=dtype)


methods(softmax=_softmax_method, log_softmax=_log_softmax_method)


@checked
def gumbel_softmax(logits: Tensor, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """A sample of the Gumbel-softmax (concrete) distribution: softmax((logits + g) / tau)
    along `dim` with g standard Gumbel noise. With `hard`, the one-hot of its argmax in the
    forward, the soft sample's gradient in the backward (straight-through).

    >>> F.gumbel_softmax(flow.zeros(2, 3), tau=0.5, hard=True).sum(-1)
    tensor([1., 1.])
    """
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    # g = -log(E) with E ~ Exp(1) = -log(U); E kept positive, so g stays finite
    uniform = creation.empty_like(logits).uniform_(0.0, 1.0)
    exponential = (-(1 - uniform).log()).clamp_min(float(np.finfo(np.float32).tiny))
    soft = softmax((logits - exponential.log()) / tau, dim)
    if not hard:
        return soft
    index = soft.argmax(dim, keepdim=True)
    one_hot = creation.zeros_like(logits).scatter(dim, index, 1.0)
    return one_hot - soft.detach() + soft
