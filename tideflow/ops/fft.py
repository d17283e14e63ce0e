"""Discrete Fourier transforms (`flow.fft`, PyTorch's torch.fft).

Three primitive ops compute every transform, as in PyTorch: `fft_c2c` (complex to complex,
either direction), `fft_r2c` (real to complex, the one-sided half spectrum along the last
transformed dim) and `fft_c2r` (a half spectrum to the real signal it is the transform of).
The public functions only choose the dims, trim or zero-pad the input to the requested sizes
(`n`, `s`), and map `norm` to the scale the primitive applies.

Scales: `norm` names which direction is scaled. "backward" (the default) leaves the forward
transform unscaled and divides the inverse by n; "forward" the reverse; "ortho" divides both
by sqrt(n). A primitive's `scale` attribute says what it applies: "none", "sqrt" or "n".

Gradients follow PyTorch's conjugate convention (`ops/complex.py`): the adjoint of
`scale * DFT` is `scale * DFT^H`, the transform in the other direction with the same scale;
`r2c`'s adjoint zero-pads the half spectrum, transforms back and keeps the real part; `c2r`'s
is `r2c` with the bins the half spectrum stands for twice doubled.
"""

from __future__ import annotations

import numpy as np

from ..framework import dtype as dtypes
from ..framework.errors import (
    ArgumentError,
    DTypeError,
    Rejected,
    ShapeError,
    TensorIndexError,
    TideflowError,
)
from ._rules import (
    B,
    Meta,
    P,
    S,
    Signature,
    defop,
    dispatch,
    int_arg,
    normalize_dim,
    tensor_arg,
)
from .binary import where
from .complex import conj, real
from .creation import arange, on_placement_of, tensor, zeros
from .shape import cat, narrow, roll

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "hfft2",
    "hfftn",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "ihfft2",
    "ihfftn",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]

_REAL = (dtypes.float32, dtypes.float64)
# NOTE: NumPy's `norm` names the scaled direction as PyTorch's does: from (scale, forward)
# to the NumPy mode of the transform NumPy runs.
_NUMPY_NORM = {
    ("none", True): "backward",
    ("sqrt", True): "ortho",
    ("n", True): "forward",
    ("none", False): "forward",
    ("sqrt", False): "ortho",
    ("n", False): "backward",
}


def _scale(op: str, norm, forward: bool) -> str:
    """The scale a transform in this direction applies under `norm`."""
    if norm is None or norm == "backward":
        return "none" if forward else "n"
    if norm == "forward":
        return "n" if forward else "none"
    if norm == "ortho":
        return "sqrt"
    raise TideflowError(
        f"{op}: invalid normalization mode {norm!r}; expected 'forward', 'backward' or 'ortho'"
    )


# -- the primitives -------------------------------------------------------------------------
def _transform_sbp(x: Meta, *, dims, **_) -> list[Signature]:
    """The transform mixes elements along `dims` only: any other axis may be split; it is
    linear, so partial sums stay partial."""
    sigs = [Signature((B,), (B,)), Signature((P,), (P,))]
    return sigs + [Signature((S(a),), (S(a),)) for a in range(len(x.shape)) if a not in dims]


def _c2c_meta(x: Meta, *, dims, scale, forward) -> Meta:
    if not x.dtype.is_complex:
        raise DTypeError(f"fft_c2c: expected a complex tensor, got {x.dtype.name}")
    return Meta(x.shape, x.dtype)


def _c2c_kernel(x, *, dims, scale, forward):
    if x.dtype.kind != "c":
        raise Rejected
    transform = np.fft.fftn if forward else np.fft.ifftn
    return transform(x, axes=dims, norm=_NUMPY_NORM[scale, forward]).astype(x.dtype, copy=False)


_c2c = defop(
    "fft_c2c",
    inputs=("input",),
    meta=_c2c_meta,
    sbp=_transform_sbp,
    kernels={"cpu": _c2c_kernel},
    grad=lambda ctx, gy: (_c2c_op(gy, ctx.dims, ctx.scale, not ctx.forward),),
)


def _half(n: int) -> int:
    """The length of a one-sided spectrum of n real points."""
    return n // 2 + 1


def _r2c_meta(x: Meta, *, dims, scale, onesided) -> Meta:
    if x.dtype not in _REAL:
        raise DTypeError(f"fft_r2c: expected a float32 or float64 tensor, got {x.dtype.name}")
    shape = list(x.shape)
    if onesided:
        shape[dims[-1]] = _half(shape[dims[-1]])
    return Meta(tuple(shape), dtypes.to_complex(x.dtype))


def _r2c_kernel(x, *, dims, scale, onesided):
    if x.dtype not in (np.float32, np.float64):
        raise Rejected
    transform = np.fft.rfftn if onesided else np.fft.fftn
    out = transform(x, axes=dims, norm=_NUMPY_NORM[scale, True])
    return out.astype(np.result_type(x, 1j), copy=False)


def _r2c_grad(ctx, gy):
    n = ctx.input_shape(0)[ctx.dims[-1]]
    if ctx.onesided:  # the bins the half spectrum leaves out got no gradient: zeros
        gy = _resize(gy, ctx.dims[-1], n)
    return (real(_c2c_op(gy, ctx.dims, ctx.scale, False)),)


_r2c = defop(
    "fft_r2c",
    inputs=("input",),
    meta=_r2c_meta,
    sbp=_transform_sbp,
    kernels={"cpu": _r2c_kernel},
    grad=_r2c_grad,
)


def _c2r_meta(x: Meta, *, dims, scale, last_dim_size) -> Meta:
    if not x.dtype.is_complex:
        raise DTypeError(f"fft_c2r: expected a complex tensor, got {x.dtype.name}")
    shape = list(x.shape)
    shape[dims[-1]] = last_dim_size
    return Meta(tuple(shape), dtypes.to_real(x.dtype))


def _c2r_kernel(x, *, dims, scale, last_dim_size):
    if x.dtype.kind != "c":
        raise Rejected
    sizes = [x.shape[d] for d in dims[:-1]] + [last_dim_size]
    out = np.fft.irfftn(x, s=sizes, axes=dims, norm=_NUMPY_NORM[scale, False])
    return out.astype(x.real.dtype, copy=False)


def _c2r_grad(ctx, gy):
    gx = _r2c_op(gy, ctx.dims, ctx.scale, onesided=True)
    last = ctx.dims[-1]
    # NOTE: bins 1 .. n - half of the half spectrum each stand for two bins of the full one
    # (k and n - k): their gradient counts twice.
    doubled = ctx.last_dim_size - gx.shape[last]
    if doubled <= 0:
        return (gx,)
    weights = np.ones(gx.shape[last])
    weights[1 : 1 + doubled] = 2.0
    shape = [1] * gx.ndim
    shape[last] = gx.shape[last]
    weights = tensor(weights.reshape(shape), dtype=dtypes.to_real(gx.dtype), **on_placement_of(gx))
    return (gx * weights,)


_c2r = defop(
    "fft_c2r",
    inputs=("input",),
    meta=_c2r_meta,
    sbp=_transform_sbp,
    kernels={"cpu": _c2r_kernel},
    grad=_c2r_grad,
)


def _c2c_op(x, dims: tuple, scale: str, forward: bool):
    return dispatch(_c2c, (x,), {"dims": dims, "scale": scale, "forward": forward})


def _r2c_op(x, dims: tuple, scale: str, onesided: bool):
    return dispatch(_r2c, (x,), {"dims": dims, "scale": scale, "onesided": onesided})


def _c2r_op(x, dims: tuple, scale: str, last_dim_size: int):
    attrs = {"dims": dims, "scale": scale, "last_dim_size": last_dim_size}
    return dispatch(_c2r, (x,), attrs)


# -- operands: dtypes, dims, sizes ----------------------------------------------------------
def _as_complex(op: str, x):
    """Complex operands as they are; real (and integer) ones as complex of their precision."""
    if x.dtype.is_complex:
        return x
    return x.to(dtypes.to_complex(_as_real(op, x).dtype))


def _as_real(op: str, x):
    """Float32/float64 as they are; integers and bool in the default dtype. Complex operands
    and half precision (which PyTorch's CPU transforms lack) are refused."""
    if x.dtype in _REAL:
        return x
    if x.dtype.is_complex:
        raise DTypeError(f"{op}: expects a real input tensor, but got {x.dtype.name}")
    if x.dtype.is_floating_point:
        raise DTypeError(f"{op}: {x.dtype.name} is not supported; use float32 or float64")
    return x.to(dtypes.get_default_dtype())


def _resize(x, dim: int, n: int):
    """`x` trimmed or zero-padded at the end of `dim` to length n."""
    have = x.shape[dim]
    if have == n:
        return x
    if have > n:
        return narrow(x, dim, 0, n)
    shape = list(x.shape)
    shape[dim] = n - have
    return cat([x, zeros(*shape, dtype=x.dtype, **on_placement_of(x))], dim)


def _check_size(op: str, n, name: str = "n") -> int:
    n = int_arg(op, name, n)
    if n < 1:
        raise ShapeError(f"{op}: invalid number of data points ({n}) specified")
    return n


def _length(op: str, n) -> tuple | None:
    """A one-dimensional transform's `n` as the `s` of its n-dimensional form."""
    return None if n is None else (_check_size(op, n),)


def _dims_and_sizes(op: str, x, s, dim) -> tuple[tuple, list]:
    """PyTorch's rules for (s, dim): both None -> every dim at its size; `s` alone -> the last
    len(s) dims; `dim` alone -> those dims at their sizes; -1 in `s` keeps a dim's size."""
    if x.ndim == 0:
        raise TensorIndexError(f"{op}: expected a tensor of at least one dimension, got a 0-d one")
    if isinstance(dim, int):
        dim = (dim,)
    for name, value in (("s", s), ("dim", dim)):
        if value is not None and not isinstance(value, tuple | list):
            raise ArgumentError(
                f"{op}(): argument '{name}' must be a sequence of ints, not {type(value).__name__}"
            )
    if dim is None:
        count = x.ndim if s is None else len(s)
        if count > x.ndim:
            raise ShapeError(
                f"{op}: got s with {count} values but the input has only {x.ndim} dimensions"
            )
        dims = tuple(range(x.ndim - count, x.ndim))
    else:
        dims = tuple(normalize_dim(op, d, x.ndim) for d in dim)
        if len(set(dims)) != len(dims):
            raise ShapeError(f"{op}: dims must be unique, got {list(dim)}")
        if s is not None and len(s) != len(dims):
            raise ShapeError(
                f"{op}: when given, dim and shape arguments must have the same length "
                f"(got s={list(s)} and dim={list(dim)})"
            )
    if s is None:
        sizes = [None] * len(dims)
    else:
        sizes = [None if n == -1 else _check_size(op, n, "s") for n in s]
    return dims, sizes


def _resized(x, dims: tuple, sizes: list):
    for d, n in zip(dims, sizes, strict=True):
        if n is not None:
            x = _resize(x, d, n)
    return x


def _empty_check(op: str, x, dims: tuple) -> None:
    for d in dims:
        if x.shape[d] == 0:
            raise ShapeError(f"{op}: invalid number of data points (0) specified")


# -- complex transforms ---------------------------------------------------------------------
def _c2c_transform(op: str, x, s, dim, norm, forward: bool):
    tensor_arg(op, "input", 1, x)
    dims, sizes = _dims_and_sizes(op, x, s, dim)
    x = _resized(_as_complex(op, x), dims, sizes)
    _empty_check(op, x, dims)
    return _c2c_op(x, dims, _scale(op, norm, forward), forward)


def fft(input, n=None, dim=-1, norm=None):
    """The one-dimensional discrete Fourier transform along `dim`, of length `n` (the input is
    trimmed or zero-padded to it). Real inputs transform as complex numbers.

    >>> flow.fft.fft(flow.tensor([1.0, 0.0, 0.0, 0.0]))
    tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
    """
    return _c2c_transform("fft", input, _length("fft", n), (dim,), norm, True)


def ifft(input, n=None, dim=-1, norm=None):
    """The inverse of `fft` (scaled by 1/n under the default norm)."""
    return _c2c_transform("ifft", input, _length("ifft", n), (dim,), norm, False)


def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The two-dimensional `fftn` over the last two dims (by default)."""
    return _c2c_transform("fft2", input, s, dim, norm, True)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of `fft2`."""
    return _c2c_transform("ifft2", input, s, dim, norm, False)


def fftn(input, s=None, dim=None, norm=None):
    """The n-dimensional discrete Fourier transform over `dim` (every dim, or the last
    len(s)), each transformed dim trimmed or zero-padded to its size in `s`.

    >>> flow.fft.fftn(flow.ones(2, 2))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    return _c2c_transform("fftn", input, s, dim, norm, True)


def ifftn(input, s=None, dim=None, norm=None):
    """The inverse of `fftn`."""
    return _c2c_transform("ifftn", input, s, dim, norm, False)


# -- real signals, one-sided spectra --------------------------------------------------------
def _one_sided_dims(op: str, x, s, dim) -> tuple[tuple, list]:
    """The dims and sizes of a transform with a one-sided last dim: it needs one."""
    dims, sizes = _dims_and_sizes(op, x, s, dim)
    if not dims:
        raise ShapeError(f"{op}: must transform at least one axis")
    return dims, sizes


def _r2c_transform(op: str, x, s, dim, norm, forward: bool):
    tensor_arg(op, "input", 1, x)
    dims, sizes = _one_sided_dims(op, x, s, dim)
    x = _resized(_as_real(op, x), dims, sizes)
    _empty_check(op, x, dims)
    out = _r2c_op(x, dims, _scale(op, norm, forward), onesided=True)
    return out if forward else conj(out)  # ihfft: the conjugate of the forward half spectrum


def _c2r_transform(op: str, x, s, dim, norm, forward: bool):
    tensor_arg(op, "input", 1, x)
    dims, sizes = _one_sided_dims(op, x, s, dim)
    x = _as_complex(op, x)
    last = dims[-1]
    n = sizes[-1] if sizes[-1] is not None else 2 * (x.shape[last] - 1)
    _check_size(op, n)
    x = _resized(x, dims, [*sizes[:-1], _half(n)])
    _empty_check(op, x, dims)
    if forward:  # hfft: the signal's spectrum is the conjugate of the inverse's
        x = conj(x)
    return _c2r_op(x, dims, _scale(op, norm, forward), n)


def rfft(input, n=None, dim=-1, norm=None):
    """The Fourier transform of a real signal along `dim`: the n // 2 + 1 non-negative
    frequencies (the others are their conjugates).

    >>> flow.fft.rfft(flow.tensor([1.0, 2.0, 3.0, 4.0]))
    tensor([10.+0.j, -2.+2.j, -2.+0.j])
    """
    return _r2c_transform("rfft", input, _length("rfft", n), (dim,), norm, True)


def irfft(input, n=None, dim=-1, norm=None):
    """The real signal of length `n` (default 2 * (m - 1)) whose `rfft` is `input`.

    >>> flow.fft.irfft(flow.tensor([10 + 0j, -2 + 2j, -2 + 0j]))
    tensor([1., 2., 3., 4.])
    """
    return _c2r_transform("irfft", input, _length("irfft", n), (dim,), norm, False)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """`rfftn` over the last two dims (by default)."""
    return _r2c_transform("rfft2", input, s, dim, norm, True)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """The inverse of `rfft2`."""
    return _c2r_transform("irfft2", input, s, dim, norm, False)


def rfftn(input, s=None, dim=None, norm=None):
    """The n-dimensional transform of a real signal: full spectra along every transformed dim
    but the last, which keeps its n // 2 + 1 non-negative frequencies."""
    return _r2c_transform("rfftn", input, s, dim, norm, True)


def irfftn(input, s=None, dim=None, norm=None):
    """The inverse of `rfftn`; the last dim's output length defaults to 2 * (m - 1)."""
    return _c2r_transform("irfftn", input, s, dim, norm, False)


def hfft(input, n=None, dim=-1, norm=None):
    """The (real) Fourier transform of a Hermitian-symmetric signal given by its first half:
    a signal of length `n` (default 2 * (m - 1)) whose `ihfft` is `input`."""
    return _c2r_transform("hfft", input, _length("hfft", n), (dim,), norm, True)


def ihfft(input, n=None, dim=-1, norm=None):
    """The inverse of `hfft`: the first n // 2 + 1 bins of the inverse transform of a real
    signal (the rest are their conjugates)."""
    return _r2c_transform("ihfft", input, _length("ihfft", n), (dim,), norm, False)


def hfft2(input, s=None, dim=(-2, -1), norm=None):
    """`hfftn` over the last two dims (by default)."""
    return _c2r_transform("hfft2", input, s, dim, norm, True)


def hfftn(input, s=None, dim=None, norm=None):
    """The n-dimensional `hfft`: the real signal whose `ihfftn` is `input`, the last dim's
    length defaulting to 2 * (m - 1)."""
    return _c2r_transform("hfftn", input, s, dim, norm, True)


def ihfft2(input, s=None, dim=(-2, -1), norm=None):
    """`ihfftn` over the last two dims (by default)."""
    return _r2c_transform("ihfft2", input, s, dim, norm, False)


def ihfftn(input, s=None, dim=None, norm=None):
    """The n-dimensional `ihfft`: the inverse transform of a real signal, the last dim
    keeping its n // 2 + 1 non-negative frequencies."""
    return _r2c_transform("ihfftn", input, s, dim, norm, False)


# -- frequencies and shifts -----------------------------------------------------------------
def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an `fft` of length n with sample spacing d:
    [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n).

    >>> flow.fft.fftfreq(4)
    tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
    """
    n = _check_size("fftfreq", n)
    d = _spacing("fftfreq", d)
    index = arange(n, dtype=_frequency_dtype("fftfreq", dtype))
    index = where(index >= (n + 1) // 2, index - n, index)  # the negative frequencies
    return _frequencies(index, n, d, requires_grad)


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an `rfft` of length n: [0, 1, ..., n // 2] / (d * n).

    >>> flow.fft.rfftfreq(4)
    tensor([0.0000, 0.2500, 0.5000])
    """
    n = _check_size("rfftfreq", n)
    d = _spacing("rfftfreq", d)
    index = arange(n // 2 + 1, dtype=_frequency_dtype("rfftfreq", dtype))
    return _frequencies(index, n, d, requires_grad)


def _spacing(op: str, d) -> float:
    if isinstance(d, bool) or not isinstance(d, int | float):
        raise ArgumentError(f"{op}(): argument 'd' must be a number, not {type(d).__name__}")
    return float(d)


def _frequency_dtype(op: str, dtype) -> dtypes.DType:
    try:
        dtype = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    except DTypeError as e:
        raise DTypeError(f"{op}: {e}") from None
    if not dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point dtype, got {dtype.name}")
    return dtype


def _frequencies(index, n: int, d: float, requires_grad: bool):
    out = index / (d * n)
    return out.requires_grad_() if requires_grad else out


def _shift_dims(op: str, x, dim) -> tuple:
    if dim is None:
        return tuple(range(x.ndim))
    if not isinstance(dim, tuple | list):
        dim = (dim,)
    return tuple(normalize_dim(op, d, x.ndim) for d in dim)


def fftshift(input, dim=None):
    """Moves the zero frequency to the middle of `dim` (every dim by default): a roll by
    half of each dim's length.

    >>> flow.fft.fftshift(flow.fft.fftfreq(4))
    tensor([-0.5000, -0.2500,  0.0000,  0.2500])
    """
    tensor_arg("fftshift", "input", 1, input)
    dims = _shift_dims("fftshift", input, dim)
    if not dims:
        return input
    return roll(input, [input.shape[d] // 2 for d in dims], dims)


def ifftshift(input, dim=None):
    """The inverse of `fftshift` (they differ for odd lengths)."""
    tensor_arg("ifftshift", "input", 1, input)
    dims = _shift_dims("ifftshift", input, dim)
    if not dims:
        return input
    return roll(input, [-(input.shape[d] // 2) for d in dims], dims)


FFT_NAMESPACE = {name: globals()[name] for name in __all__}
