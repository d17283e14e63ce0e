"""Complex numbers: building them (`complex`, `polar`, `view_as_complex`), taking them apart
(`real`, `imag`, `angle`, `view_as_real`), conjugation and `sgn`, and the two helpers the
other op families use for complex operands: `holomorphic` (PyTorch's gradient convention for
analytic functions) and `reject_complex` (ops that order values).

Autograd follows PyTorch: the gradient of a real loss L with respect to z = x + iy is the
conjugate Wirtinger derivative dL/dx + i dL/dy, so for an analytic f the backward of
`w = f(z)` is `gz = gw * conj(f'(z))`, and a real operand of a complex op gets the real part
of its complex gradient (the engine takes it).

Conjugation is physical: `conj` copies, so `is_conj()` is always False and `resolve_conj`
returns its input (PyTorch's lazy conjugate bit is an optimisation, not semantics).
"""

from __future__ import annotations

import numpy as np

from ..framework import dtype as dtypes
from ..framework.dispatch import inplace
from ..framework.errors import DTypeError, Rejected, ShapeError
from ._rules import (
    B,
    Meta,
    S,
    Signature,
    broadcast_shapes,
    defop,
    dispatch,
    elementwise_sbp,
    methods,
    tensor_arg,
)

__all__ = [
    "adjoint",
    "angle",
    "complex",
    "conj",
    "conj_physical",
    "imag",
    "is_complex",
    "is_conj",
    "polar",
    "real",
    "resolve_conj",
    "resolve_neg",
    "sgn",
    "view_as_complex",
    "view_as_real",
]

_NO_ATTRS: dict = {}
_COMPLEX_NP = frozenset(d.np for d in dtypes.COMPLEX)


def holomorphic(rule):
    """The grad rule of an analytic op from `rule`, its real-valued form (`gy * f'(x)`).

    `rule` is linear in the incoming gradients, so `conj(rule(conj(gy)))` is
    `gy * conj(f'(z))`, PyTorch's convention. Real gradients take the rule as it is."""

    def grad(ctx, *gys):
        if not any(g is not None and g._data.dtype in _COMPLEX_NP for g in gys):
            return rule(ctx, *gys)
        gxs = rule(ctx, *(None if g is None else conj(g) for g in gys))
        return tuple(None if g is None else conj(g) for g in gxs)

    return grad


def reject_complex(op: str, np_dtype) -> None:
    """PyTorch's error for ops that compare or order values, which complex numbers lack."""
    if np_dtype in _COMPLEX_NP:
        name = dtypes.from_numpy(np_dtype).name
        raise DTypeError(f"{op}: not defined for complex tensors (got {name})")


def _complex_input(op: str, x: Meta) -> None:
    if not x.dtype.is_complex:
        raise DTypeError(f"{op}: expected a complex tensor, got {x.dtype.name}")


def _real_meta(x: Meta) -> Meta:
    """The real part's dtype (complex64 -> float32); real inputs keep theirs."""
    return Meta(x.shape, dtypes.to_real(x.dtype))


def _imag_meta(x: Meta) -> Meta:
    _complex_input("imag", x)
    return Meta(x.shape, dtypes.to_real(x.dtype))


def _complex_only(fn):
    """`fn` behind a check that its input is complex (meta words the error)."""

    def kernel(x):
        if x.dtype not in _COMPLEX_NP:
            raise Rejected
        return fn(x)

    return kernel


# -- parts ----------------------------------------------------------------------------------
_real = defop(
    "real",
    inputs=("input",),
    meta=_real_meta,
    sbp=elementwise_sbp(partial="linear"),
    kernels={"cpu": _complex_only(np.real)},
    # NOTE: a real gradient; the engine casts it to the input's complex dtype (gy + 0i).
    grad=lambda ctx, gy: (gy,),
    view=True,
)
_imag = defop(
    "imag",
    inputs=("input",),
    meta=_imag_meta,
    sbp=elementwise_sbp(partial="linear"),
    kernels={"cpu": _complex_only(np.imag)},
    grad=lambda ctx, gy: (complex(gy.new_zeros(()), gy),),
    view=True,
)


def real(input):
    """The real part of a complex tensor, as a view; a real tensor is returned as is.

    >>> flow.real(flow.tensor([1 + 2j, 3 - 1j]))
    tensor([1., 3.])
    """
    tensor_arg("real", "input", 1, input)
    return dispatch(_real, (input,), _NO_ATTRS) if input.dtype.is_complex else input


def imag(input):
    """The imaginary part of a complex tensor, as a view (real tensors have none: an error).

    >>> flow.imag(flow.tensor([1 + 2j, 3 - 1j]))
    tensor([ 2., -1.])
    """
    tensor_arg("imag", "input", 1, input)
    return dispatch(_imag, (input,), _NO_ATTRS)


def _complex_meta(re: Meta, im: Meta) -> Meta:
    if re.dtype is not im.dtype or re.dtype not in (dtypes.float32, dtypes.float64):
        raise DTypeError(
            f"complex: expected real and imag of one dtype, float32 or float64, got "
            f"{re.dtype.name} and {im.dtype.name}"
        )
    return Meta(broadcast_shapes("complex", re.shape, im.shape), dtypes.to_complex(re.dtype))


def _complex_kernel(re, im):
    if re.dtype != im.dtype or re.dtype.kind != "f" or re.dtype.itemsize < 4:
        raise Rejected  # meta words the error
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), np.result_type(re, 1j))
    out.real = re
    out.imag = im
    return out


def _complex_grad(ctx, gy):
    gy = gy if gy.dtype.is_complex else gy.to(dtypes.to_complex(gy.dtype))
    return real(gy), imag(gy)


_complex = defop(
    "complex",
    inputs=("real", "imag"),
    meta=_complex_meta,
    sbp=elementwise_sbp(),
    kernels={"cpu": _complex_kernel},
    grad=_complex_grad,
)


def complex(real, imag):
    """The complex tensor `real + i * imag` (float32 parts give complex64, float64 parts
    complex128; the shapes broadcast).

    >>> flow.complex(flow.tensor([1.0, 2.0]), flow.tensor([0.5, -1.0]))
    tensor([1.+0.5000j, 2.-1.0000j])
    """
    tensor_arg("complex", "real", 1, real)
    tensor_arg("complex", "imag", 2, imag)
    return dispatch(_complex, (real, imag), _NO_ATTRS)


def polar(abs, angle):
    """The complex tensor with modulus `abs` and argument `angle`: `abs * (cos + i sin)`.

    >>> flow.polar(flow.tensor([2.0]), flow.tensor([0.0]))
    tensor([2.+0.j])
    """
    tensor_arg("polar", "abs", 1, abs)
    tensor_arg("polar", "angle", 2, angle)
    return complex(abs * angle.cos(), abs * angle.sin())


# -- conjugation, angle, sgn ----------------------------------------------------------------
_conj = defop(
    "conj_physical",
    inputs=("input",),
    meta=lambda x: Meta(x.shape, x.dtype),
    sbp=elementwise_sbp(partial="linear"),
    kernels={"cpu": np.conjugate},
    grad=lambda ctx, gy: (conj(gy),),
    elementwise=True,
)


def conj_physical(input):
    """The complex conjugate (a copy); real tensors are returned as they are.

    >>> flow.conj_physical(flow.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    tensor_arg("conj_physical", "input", 1, input)
    return dispatch(_conj, (input,), _NO_ATTRS) if input.dtype.is_complex else input


def conj(input):
    """The complex conjugate; real tensors are returned as they are. tideflow conjugates
    eagerly (a copy, never a lazily conjugated view), so it is `conj_physical`.

    >>> flow.conj(flow.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    tensor_arg("conj", "input", 1, input)
    return dispatch(_conj, (input,), _NO_ATTRS) if input.dtype.is_complex else input


def resolve_conj(input):
    """`input`: conjugation is never lazy in tideflow, so there is nothing to resolve."""
    return tensor_arg("resolve_conj", "input", 1, input)


def resolve_neg(input):
    """`input`: negation is never lazy in tideflow, so there is nothing to resolve."""
    return tensor_arg("resolve_neg", "input", 1, input)


def is_conj(input) -> bool:
    """False: tideflow has no lazily conjugated tensors."""
    tensor_arg("is_conj", "input", 1, input)
    return False


def is_complex(input) -> bool:
    """Whether `input`'s dtype is complex64 or complex128."""
    return tensor_arg("is_complex", "input", 1, input).dtype.is_complex


def _angle_kernel(x):
    if x.dtype in _COMPLEX_NP:
        return np.angle(x)
    # NOTE: PyTorch's angle of a real number: pi for negatives, 0 otherwise, nan stays nan.
    out = np.where(x < 0, np.pi, 0.0).astype(x.dtype)
    return np.where(np.isnan(x), x, out)


def _angle_grad(ctx, gy):
    z = ctx.input
    if not z.dtype.is_complex:
        return (gy.new_zeros(()).expand_as(gy),)
    # NOTE: d angle = Im(dz / z); PyTorch's convention makes it gy * i z / |z|^2, 0 at z = 0.
    abs2 = real(z * conj(z))
    step = z / abs2.masked_fill(abs2 == 0, 1) * 1j
    return (gy * step,)


_angle = defop(
    "angle",
    inputs=("input",),
    meta=_real_meta,
    sbp=elementwise_sbp(),
    kernels={"cpu": _angle_kernel},
    grad=_angle_grad,
    saves=("input",),
    promote="float",
    elementwise=True,
)


def angle(input):
    """The argument (phase) of each element, in radians in (-pi, pi]; for real tensors pi
    where negative and 0 elsewhere. Integer inputs give the default float dtype.

    >>> flow.angle(flow.tensor([1j, -1 + 0j]))
    tensor([1.5708, 3.1416])
    """
    tensor_arg("angle", "input", 1, input)
    return dispatch(_angle, (input,), _NO_ATTRS)


def _sgn_kernel(z):
    if z.dtype not in _COMPLEX_NP:  # PyTorch's sign: (x > 0) - (x < 0), so 0 for nan
        return z.copy() if z.dtype == np.bool_ else ((z > 0).astype(z.dtype) - (z < 0))
    modulus = np.abs(z)
    return np.where(modulus == 0, 0, z / np.where(modulus == 0, 1, modulus)).astype(z.dtype)


def _sgn_grad(ctx, gy):
    z = ctx.input
    if not z.dtype.is_complex:
        return (gy.new_zeros(()).expand_as(gy),)
    # NOTE: sgn = z / |z| is not analytic; with s = sgn(z) PyTorch's gradient is
    # (gy - s * Re(conj(gy) * s)) / |z|, and 0 at z = 0.
    s = ctx.out
    modulus = z.abs()
    safe = modulus.masked_fill(modulus == 0, 1)
    g = (gy - s * real(conj(gy) * s)) / safe
    return (g.masked_fill(modulus == 0, 0),)


_sgn = defop(
    "sgn",
    inputs=("input",),
    meta=lambda x: Meta(x.shape, x.dtype),
    sbp=elementwise_sbp(),
    kernels={"cpu": _sgn_kernel},
    grad=_sgn_grad,
    saves=("input", "out"),
    elementwise=True,
)


def sgn(input):
    """`z / |z|` for complex elements (0 at 0), `sign` for real ones.

    >>> flow.sgn(flow.tensor([3 + 4j, 0j]))
    tensor([0.6000+0.8000j, 0.0000+0.0000j])
    """
    tensor_arg("sgn", "input", 1, input)
    return dispatch(_sgn, (input,), _NO_ATTRS)


def adjoint(input):
    """The conjugate transpose of the last two dims (PyTorch's is a lazily conjugated view;
    tideflow's conjugation copies complex tensors). `Tensor.mH` is the same.

    >>> flow.adjoint(flow.tensor([[1 + 1j, 2j]]))
    tensor([[1.-1.j],
            [0.-2.j]])
    """
    tensor_arg("adjoint", "input", 1, input)
    if input.ndim < 2:
        raise ShapeError(
            f"adjoint: expected a tensor of at least 2 dims, got shape {list(input.shape)}"
        )
    return conj(input.transpose(-2, -1))


def _conj_transpose(input):
    """`Tensor.H`: the conjugate transpose of a matrix."""
    if input.ndim != 2:
        raise ShapeError(f"H: expected a matrix (a 2-D tensor), got shape {list(input.shape)}")
    return adjoint(input)


# -- views between complex and pairs of reals -----------------------------------------------
def _last_axis_kept_sbp(x: Meta, **_) -> list[Signature]:
    """Any axis but the pair axis may be split (view_as_real adds it, view_as_complex
    drops it)."""
    axes = min(len(x.shape), len(x.shape) - (0 if x.dtype.is_complex else 1))
    return [Signature((B,), (B,))] + [Signature((S(a),), (S(a),)) for a in range(axes)]


def _view_as_real_meta(x: Meta) -> Meta:
    _complex_input("view_as_real", x)
    return Meta((*x.shape, 2), dtypes.to_real(x.dtype))


def _view_as_real_kernel(z):
    if z.dtype not in _COMPLEX_NP:
        raise Rejected  # meta words the error
    # NOTE: a new unit axis has any stride, so the dtype change splits it into the pair.
    return z[..., np.newaxis].view(z.real.dtype)


def _view_as_complex_meta(x: Meta) -> Meta:
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise DTypeError(
            f"view_as_complex: expected a float32 or float64 tensor, got {x.dtype.name}"
        )
    if not x.shape or x.shape[-1] != 2:
        raise ShapeError(
            f"view_as_complex: the last dimension must have size 2 (the real and imaginary "
            f"parts), got shape {list(x.shape)}"
        )
    return Meta(x.shape[:-1], dtypes.to_complex(x.dtype))


def _view_as_complex_kernel(x):
    if x.dtype.kind != "f" or x.dtype.itemsize < 4 or x.ndim == 0 or x.shape[-1] != 2:
        raise Rejected  # meta words the error
    complex_dtype = np.result_type(x, 1j)
    if x.size == 0:
        return np.empty(x.shape[:-1], complex_dtype)
    item = x.itemsize
    # NOTE: a unit dim's stride is never stepped, so only longer dims need whole complex steps
    leading = [s for s, n in zip(x.strides[:-1], x.shape[:-1], strict=True) if n > 1]
    if x.strides[-1] != item or any(s % (2 * item) for s in leading):
        raise ShapeError(
            f"view_as_complex: the tensor's last dimension must have stride 1 and its other "
            f"strides must be even (got strides {[s // item for s in x.strides]}); "
            "call .contiguous() first"
        )
    return x.view(complex_dtype)[..., 0]


_view_as_real = defop(
    "view_as_real",
    inputs=("input",),
    meta=_view_as_real_meta,
    sbp=_last_axis_kept_sbp,
    kernels={"cpu": _view_as_real_kernel},
    grad=lambda ctx, gy: (view_as_complex(gy.contiguous()),),
    view=True,
)
_view_as_complex = defop(
    "view_as_complex",
    inputs=("input",),
    meta=_view_as_complex_meta,
    sbp=_last_axis_kept_sbp,
    kernels={"cpu": _view_as_complex_kernel},
    grad=lambda ctx, gy: (view_as_real(gy),),
    view=True,
)


def view_as_real(input):
    """A real view of a complex tensor with a last dimension of size 2: (real, imaginary).

    >>> flow.view_as_real(flow.tensor([1 + 2j]))
    tensor([[1., 2.]])
    """
    tensor_arg("view_as_real", "input", 1, input)
    return dispatch(_view_as_real, (input,), _NO_ATTRS)


def view_as_complex(input):
    """A complex view of a float tensor whose last dimension (stride 1) holds (real, imag).

    >>> flow.view_as_complex(flow.tensor([[1.0, 2.0]]))
    tensor([1.+2.j])
    """
    tensor_arg("view_as_complex", "input", 1, input)
    return dispatch(_view_as_complex, (input,), _NO_ATTRS)


methods(
    real=property(real),
    imag=property(imag),
    conj=conj,
    conj_physical=conj_physical,
    conj_physical_=inplace(conj_physical, "conj_physical_"),
    resolve_conj=resolve_conj,
    resolve_neg=resolve_neg,
    is_conj=is_conj,
    angle=angle,
    sgn=sgn,
    sgn_=inplace(sgn, "sgn_"),
    adjoint=adjoint,
    mH=property(adjoint),
    H=property(_conj_transpose),
)
