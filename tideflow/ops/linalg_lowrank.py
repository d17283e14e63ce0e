"""Randomized low-rank decompositions, as PyTorch composes them (Halko, Martinsson and Tropp
2009, algorithms 4.4 and 5.1): `svd_lowrank` and `pca_lowrank`. A Gaussian sketch of A's range
refined by `niter` power iterations (each re-orthonormalized by QR) gives a basis Q, and the
SVD of the small Q^H A gives the factors. Results depend on the random sketch, except for
matrices of rank at most q, which they reproduce.
"""

from __future__ import annotations

from ..framework.errors import TideflowError
from ..framework.tensor import Tensor
from ._rules import checked
from .creation import on_placement_of
from .linalg import _check_square, _mH, matmul
from .linalg import qr as linalg_qr
from .linalg_svd import linalg_svd
from .random import randn

__all__ = ["pca_lowrank", "svd_lowrank"]


def _orthonormal(x):
    return linalg_qr(x).Q


def _approximate_basis(A, q: int, niter: int, M):
    """An orthonormal m x q basis approximating the range of A - M."""
    sketch = randn(A.shape[-1], q, dtype=A.dtype, **on_placement_of(A))

    def times(x):
        return matmul(A, x) if M is None else matmul(A, x) - matmul(M, x)

    def adjoint_times(x):
        return matmul(_mH(A), x) if M is None else matmul(_mH(A), x) - matmul(_mH(M), x)

    basis = _orthonormal(times(sketch))
    for _ in range(niter):
        basis = _orthonormal(times(_orthonormal(adjoint_times(basis))))
    return basis


def _svd_lowrank(A, q: int, niter: int, M):
    m, n = A.shape[-2:]
    wide = m < n
    if M is not None:
        M = M.broadcast_to(A.shape)
    if wide:  # sketch the smaller side
        A, M = _mH(A), (None if M is None else _mH(M))
    basis = _approximate_basis(A, q, niter, M)
    small = matmul(_mH(basis), A if M is None else A - M)
    u, s, vh = linalg_svd(small, full_matrices=False)
    u, v = matmul(basis, u), _mH(vh)
    return (v, s, u) if wide else (u, s, v)


def _check(op: str, A: Tensor, q, niter) -> None:
    _check_square(op, A, square=False)
    if niter < 0:
        raise TideflowError(f"{op}: niter(={niter}) must be a non-negative integer")
    if q is not None and not 0 <= q <= min(A.shape[-2:]):
        raise TideflowError(
            f"{op}: q(={q}) must be a non-negative integer not greater than min(m, n)="
            f"{min(A.shape[-2:])}"
        )


@checked
def svd_lowrank(A: Tensor, q=6, niter=2, M: Tensor | None = None):
    """`(U, S, V)`: an approximate rank-q SVD of A - M (M broadcast to A; None: 0), with
    A - M ~ U diag(S) V^H, from a random sketch refined by `niter` power iterations."""
    _check("svd_lowrank", A, None, niter)  # PyTorch bounds no q here: QR caps the basis
    q = 6 if q is None else q
    return _svd_lowrank(A, q, niter, M)


@checked
def pca_lowrank(A: Tensor, q=None, center=True, niter=2):
    """`(U, S, V)`: the principal components of the rows of A, an approximate rank-q SVD of A
    with its column means subtracted (when `center`); q defaults to min(6, m, n)."""
    _check("pca_lowrank", A, q, niter)
    q = min(6, *A.shape[-2:]) if q is None else q
    if center:
        A = A - A.mean(-2, keepdim=True)
    return _svd_lowrank(A, q, niter, None)
