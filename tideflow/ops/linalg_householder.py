"""Householder reflectors in LAPACK's storage: `geqrf` (the QR decomposition as getrf-style
packed reflectors and their scales), and the products of such reflectors,
`linalg.householder_product` (torch.orgqr) and `ormqr`. geqrf is not differentiable, as in
PyTorch; the products are compositions of matrix products, differentiable in A and tau.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..framework.errors import Rejected, ShapeError
from ..framework.tensor import Tensor
from ._rules import Meta, checked, defop, dispatch, methods
from .creation import eye, on_placement_of
from .linalg import _SOLVER_NP, LINALG_NAMESPACE, _batch_sbp, _check_square, _mH, matmul
from .shape import narrow, tril

__all__ = ["geqrf", "orgqr", "ormqr"]

GeqrfResult = namedtuple("geqrf", ["a", "tau"])


def _geqrf_meta(x: Meta) -> tuple:
    _check_square("geqrf", x, square=False)
    *batch, m, n = x.shape
    return Meta(x.shape, x.dtype), Meta((*batch, min(m, n)), x.dtype)


def _geqrf_kernel(x):
    if x.dtype not in _SOLVER_NP or x.ndim < 2:
        raise Rejected("geqrf: operand rejected")
    reflectors, tau = np.linalg.qr(x, mode="raw")  # NumPy returns LAPACK's array transposed
    return np.ascontiguousarray(np.swapaxes(reflectors, -1, -2)), tau.astype(x.dtype)


_geqrf = defop(
    "geqrf",
    inputs=("input",),
    meta=_geqrf_meta,
    sbp=_batch_sbp(n_out=2),
    kernels={"cpu": _geqrf_kernel},
    differentiable=False,
    n_out=2,
)


@checked
def geqrf(input: Tensor):
    """`(a, tau)`: LAPACK's geqrf QR of input: R on and above a's diagonal, the Householder
    vectors below it, their scales in tau (see `linalg.householder_product`)."""
    return GeqrfResult(*dispatch(_geqrf, (input,), {}))


def _reflectors(A: Tensor, tau: Tensor, columns: int):
    """The first `columns` columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H, v_i being A's
    i-th column below the diagonal with a unit diagonal entry (LAPACK's geqrf storage)."""
    op = "linalg.householder_product"
    if A.ndim < 2 or A.shape[-2] < A.shape[-1]:
        raise ShapeError(f"{op}: expected A of shape (*, m, n) with m >= n, got {list(A.shape)}")
    m, n = A.shape[-2:]
    k = tau.shape[-1] if tau.ndim else 0
    if tau.ndim != A.ndim - 1 or k > n or tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise ShapeError(
            f"{op}: expected tau of shape (*, k) with k <= {n} and A's batch dims, got "
            f"{list(tau.shape)} for A of shape {list(A.shape)}"
        )
    placed = on_placement_of(A)
    vectors = tril(A, -1) + eye(m, n, dtype=A.dtype, **placed)
    q = eye(m, columns, dtype=A.dtype, **placed).expand(*A.shape[:-2], m, columns)
    for i in reversed(range(k)):  # H_i (H_{i+1} ... H_k): each applied to the columns so far
        v = narrow(vectors, -1, i, 1)
        scale = narrow(tau, -1, i, 1).unsqueeze(-1)
        q = q - matmul(v * scale, matmul(_mH(v), q))
    return q


@checked
def householder_product(A: Tensor, tau: Tensor):
    """The first n columns of the product of Householder reflectors H_1 ... H_k stored as
    LAPACK's geqrf stores them (A's columns below the diagonal, scales tau): the Q of a QR
    decomposition from `geqrf`'s output."""
    return _reflectors(A, tau, A.shape[-1] if A.ndim >= 2 else 0)


@checked
def orgqr(input: Tensor, tau: Tensor):
    """torch.orgqr: `linalg.householder_product`."""
    return householder_product(input, tau)


@checked
def ormqr(input: Tensor, tau: Tensor, other: Tensor, left=True, transpose=False):
    """`other` multiplied by the full m x m Q of the reflectors in (input, tau): Q C (left) or
    C Q, with Q^H in place of Q when `transpose`."""
    q = _reflectors(input, tau, input.shape[-2] if input.ndim >= 2 else 0)
    if transpose:
        q = _mH(q)
    return matmul(q, other) if left else matmul(other, q)


LINALG_NAMESPACE.update(householder_product=householder_product)
methods(geqrf=geqrf, orgqr=orgqr, ormqr=ormqr)
