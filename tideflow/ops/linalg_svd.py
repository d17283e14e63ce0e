"""The singular value decomposition: `linalg.svd` and `linalg.svdvals` (LAPACK's gesdd through
NumPy, float32/float64/complex64/complex128), and torch.svd's older form, which returns V.

The gradient is PyTorch's (`svd_backward`): finite only for distinct nonzero singular values
where U or V are used; the columns of U and V are defined up to a sign (a phase when complex),
so a loss that depends on that phase has no gradient and raises, as in PyTorch.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..framework import dtype as dtypes
from ..framework.errors import TideflowError
from ..framework.tensor import Tensor
from ._rules import Meta, checked, defop, dispatch, methods
from .complex import imag
from .creation import eye, on_placement_of, zeros
from .linalg import (
    LINALG_NAMESPACE,
    _batch_sbp,
    _check_square,
    _lapack,
    _mH,
    _refuse_phase_dependence,
    matmul,
)
from .shape import diag_embed, diagonal, narrow

__all__ = ["svd"]

SVDResult = namedtuple("linalg_svd", ["U", "S", "Vh"])
LegacySVDResult = namedtuple("svd", ["U", "S", "V"])


def _svd_meta(x: Meta, *, full_matrices) -> tuple:
    _check_square("linalg.svd", x, square=False)
    *batch, m, n = x.shape
    k = min(m, n)
    u_cols, vh_rows = (m, n) if full_matrices else (k, k)
    return (
        Meta((*batch, m, u_cols), x.dtype),
        Meta((*batch, k), dtypes.to_real(x.dtype)),
        Meta((*batch, vh_rows, n), x.dtype),
    )


def _svdvals_meta(x: Meta) -> Meta:
    _check_square("linalg.svdvals", x, square=False)
    *batch, m, n = x.shape
    return Meta((*batch, min(m, n)), dtypes.to_real(x.dtype))


def _skew(x):
    return x - _mH(x)


def _svd_grad(ctx, gu, gs, gvh):
    """PyTorch's svd_backward (Townsend 2016, extended to complex): with E_ij = s_j^2 - s_i^2,
    inner = (skew(U^H gU) S + S skew(V^H gV)) / E + diag(gS) (+ the phase term if complex),
    grad_A = U inner V^H plus, for a tall (wide) A, gU's part outside span(U) (gV's outside
    span(V)). The extra columns full_matrices adds are arbitrary bases: ignored."""
    u, s, vh = ctx.out, ctx.out1, ctx.out2
    m, n = ctx.input_shape(0)[-2:]
    k = min(m, n)
    if ctx.full_matrices and m != n:
        u, gu = narrow(u, -1, 0, k), narrow(gu, -1, 0, k)
        vh, gvh = narrow(vh, -2, 0, k), narrow(gvh, -2, 0, k)
    uhgu = _skew(matmul(_mH(u), gu))
    vhgv = _skew(matmul(vh, _mH(gvh)))
    if uhgu.dtype.is_complex:  # U -> U e^{i phi}, V -> V e^{i phi} moves the loss by this
        phase = imag(diagonal(uhgu, 0, -2, -1) + diagonal(vhgv, 0, -2, -1))
        _refuse_phase_dependence("linalg.svd", "singular vector pairs", phase)
    s_row, s_col = s.reshape(*s.shape[:-1], 1, k), s.reshape(*s.shape, 1)
    squares = s * s
    # the off-diagonal part's diagonal is 0: shift the gaps' zero diagonal to 1 to keep it finite
    gaps = squares.reshape(*s.shape[:-1], 1, k) - squares.reshape(*s.shape, 1)
    inner = (uhgu * s_row + s_col * vhgv) / (gaps + eye(k, dtype=s.dtype)) + diag_embed(gs)
    if u.dtype.is_complex:
        inner = inner + diag_embed(diagonal(uhgu, 0, -2, -1) / (2 * s))
    if m > n:
        g_outside = gu / s_row
        return (matmul(matmul(u, inner) + g_outside - matmul(u, matmul(_mH(u), g_outside)), vh),)
    if m < n:
        g_outside = gvh / s_col
        return (matmul(u, matmul(inner, vh) + g_outside - matmul(matmul(g_outside, _mH(vh)), vh)),)
    return (matmul(matmul(u, inner), vh),)


_svd = defop(
    "linalg_svd",
    inputs=("input",),
    meta=_svd_meta,
    sbp=_batch_sbp(n_out=3),
    kernels={
        "cpu": _lapack(
            "linalg.svd",
            lambda x, *, full_matrices: tuple(np.linalg.svd(x, full_matrices=full_matrices)),
            "the SVD algorithm did not converge",
            square=False,
        )
    },
    grad=_svd_grad,
    saves=("out", "out1", "out2"),
    n_out=3,
)


def _svdvals_grad(ctx, gs):
    """d s_i = Re(u_i^H dA v_i): grad_A = U diag(gS) V^H, from a reduced SVD of A."""
    u, _, vh = dispatch(_svd, (ctx.input,), {"full_matrices": False})
    return (matmul(u * gs.reshape(*gs.shape[:-1], 1, gs.shape[-1]), vh),)


_svdvals = defop(
    "linalg_svdvals",
    inputs=("input",),
    meta=_svdvals_meta,
    sbp=_batch_sbp(),
    kernels={
        "cpu": _lapack(
            "linalg.svdvals",
            lambda x: np.linalg.svd(x, compute_uv=False),
            "the SVD algorithm did not converge",
            square=False,
        )
    },
    grad=_svdvals_grad,
    saves=("input",),
)


def _refuse_driver(op: str, driver) -> None:
    if driver is not None:  # PyTorch's drivers are cuSOLVER's
        raise TideflowError(
            f"{op}: keyword argument driver= is only supported on CUDA inputs with cuSOLVER, "
            f"got driver={driver!r}"
        )


@checked
def linalg_svd(A: Tensor, full_matrices=True, *, driver=None):
    """`(U, S, Vh)` with A = U diag(S) Vh: singular values S descending (real), U and Vh with
    orthonormal columns and rows. full_matrices=False keeps min(m, n) of them.

    >>> flow.linalg.svd(flow.tensor([[3.0, 0.0], [0.0, -2.0]])).S
    tensor([3., 2.])
    """
    _refuse_driver("linalg.svd", driver)
    return SVDResult(*dispatch(_svd, (A,), {"full_matrices": bool(full_matrices)}))


@checked
def svdvals(A: Tensor, *, driver=None):
    """The singular values of A, descending; cheaper than `linalg.svd`, and differentiable
    everywhere except where two of them meet at 0.

    >>> flow.linalg.svdvals(flow.tensor([[0.0, 2.0], [1.0, 0.0]]))
    tensor([2., 1.])
    """
    _refuse_driver("linalg.svdvals", driver)
    return dispatch(_svdvals, (A,), {})


@checked
def svd(input: Tensor, some=True, compute_uv=True):
    """torch.svd: `(U, S, V)` with input = U diag(S) V^H (V, not `linalg.svd`'s Vh); some=True
    keeps min(m, n) columns. compute_uv=False gives zero-filled U (m x m) and V (n x n).

    >>> flow.svd(flow.tensor([[2.0, 0.0], [0.0, 1.0]])).S
    tensor([2., 1.])
    """
    if not compute_uv:
        s = svdvals(input)  # first: it checks the input's shape and dtype
        *batch, m, n = input.shape
        like = {"dtype": input.dtype, **on_placement_of(input)}
        u, v = zeros(*batch, m, m, **like), zeros(*batch, n, n, **like)
        return LegacySVDResult(u, s, v)
    u, s, vh = linalg_svd(input, full_matrices=not some)
    return LegacySVDResult(u, s, _mH(vh))


LINALG_NAMESPACE.update(svd=linalg_svd, svdvals=svdvals)
methods(svd=svd)
