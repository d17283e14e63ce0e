"""What rests on singular values cut at a tolerance, as PyTorch composes it: the pseudo-inverse
(`linalg.pinv`, torch.pinverse), `linalg.matrix_rank` and least squares (`linalg.lstsq`, whose
LAPACK drivers tideflow follows in what they return, computing every solution as the
minimum-norm one of the SVD, which is what gelsy, gelsd and gelss give).

Gradients come from the svd (or eigh, for hermitian=True) they are built on, so they need
distinct singular values; PyTorch's pinv and lstsq differentiate the same function.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..framework import dtype as dtypes
from ..framework.errors import DTypeError, ShapeError, TideflowError
from ..framework.tensor import Tensor
from ._rules import checked, methods
from .binary import maximum, where
from .creation import on_placement_of, zeros
from .linalg import LINALG_NAMESPACE, _check_square, _mH, eigh, eigvalsh, matmul
from .linalg_svd import linalg_svd, svdvals
from .reduction import amax

__all__ = ["pinverse"]

LstsqResult = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _eps(x: Tensor) -> float:
    return float(np.finfo(dtypes.to_real(x.dtype).np).eps)


def _batch_column(value):
    """A tolerance broadcast against the batch dims: tensors gain the singular-value axis."""
    return value.unsqueeze(-1) if isinstance(value, Tensor) else value


def _tolerance(A: Tensor, largest, atol, rtol):
    """PyTorch's rule: tol = max(atol, rtol * largest singular value); rtol defaults to
    eps * max(m, n), or to 0 where a positive atol is given."""
    if rtol is None:
        rtol = _eps(A) * max(A.shape[-2:])
        if isinstance(atol, Tensor):
            rtol = where(atol > 0, 0.0, rtol)
        elif atol is not None and atol > 0:
            rtol = 0.0
    tol = _batch_column(rtol) * largest
    if atol is None:
        return tol
    return maximum(tol, atol.unsqueeze(-1)) if isinstance(atol, Tensor) else tol.clamp_min(atol)


def _legacy_tolerance(op: str, legacy, atol, rtol):
    """PyTorch's older positional tolerance (pinv's rcond, matrix_rank's tol), which excludes
    the keyword ones."""
    if legacy is not None and (atol is not None or rtol is not None):
        raise TideflowError(f"{op}: give either the positional tolerance or atol/rtol, not both")
    return legacy


@checked
def pinv(A: Tensor, rcond=None, hermitian=False, *, atol=None, rtol=None):
    """The Moore-Penrose pseudo-inverse: singular values above tol = max(atol, rtol * the
    largest) inverted, the others dropped. hermitian=True reads A as Hermitian (eigh). The
    positional `rcond` is the older name of rtol.

    >>> flow.linalg.pinv(flow.tensor([[2.0, 0.0], [0.0, 0.0]]))
    tensor([[0.5000, 0.0000],
            [0.0000, 0.0000]])
    """
    if _legacy_tolerance("linalg.pinv", rcond, atol, rtol) is not None:
        atol, rtol = 0.0, rcond
    _check_square("linalg.pinv", A, square=bool(hermitian))
    m, n = A.shape[-2:]
    if min(m, n) == 0:  # no elements: A^H has the result's shape, and keeps A's graph
        return _mH(A).clone()
    if hermitian:
        values, vectors = eigh(A)
        largest = amax(values.abs(), -1, keepdim=True)
        kept = values.abs() > _tolerance(A, largest, atol, rtol)
        inverted = where(kept, 1 / where(kept, values, 1.0), 0.0)
        return matmul(vectors * inverted.unsqueeze(-2).to(A.dtype), _mH(vectors))
    u, s, vh = linalg_svd(A, full_matrices=False)
    return _svd_pinv(u, s, vh, s > _tolerance(A, s[..., :1], atol, rtol))


def _svd_pinv(u, s, vh, kept):
    """V diag(1/s) U^H over the `kept` singular values."""
    # NOTE: the inner where keeps 1/s finite where s is dropped, so its gradient is too
    inverted = where(kept, 1 / where(kept, s, 1.0), 0.0)
    return matmul(_mH(vh) * inverted.unsqueeze(-2).to(u.dtype), _mH(u))


@checked
def pinverse(input: Tensor, rcond=1e-15):
    """torch.pinverse: `linalg.pinv` with singular values below rcond * the largest dropped."""
    return pinv(input, rtol=rcond)


@checked
def matrix_rank(A: Tensor, tol=None, hermitian=False, *, atol=None, rtol=None):
    """The number of singular values (eigenvalue moduli, if hermitian) above tol =
    max(atol, rtol * the largest), as int64; the positional `tol` is an older atol.

    >>> flow.linalg.matrix_rank(flow.tensor([[1.0, 2.0], [2.0, 4.0]]))
    tensor(1)
    """
    if _legacy_tolerance("linalg.matrix_rank", tol, atol, rtol) is not None:
        atol, rtol = tol, 0.0
    _check_square("linalg.matrix_rank", A, square=bool(hermitian))
    values = eigvalsh(A).abs() if hermitian else svdvals(A)
    if values.shape[-1] == 0:
        return zeros(*values.shape[:-1], dtype=dtypes.int64, **on_placement_of(A))
    largest = amax(values, -1, keepdim=True)
    return (values > _tolerance(A, largest, atol, rtol)).sum(-1)


def _lstsq_check(A: Tensor, B: Tensor, driver) -> None:
    op = "linalg.lstsq"
    if driver not in (None, *_LSTSQ_DRIVERS):
        raise TideflowError(
            f"{op}: driver should be one of {', '.join(_LSTSQ_DRIVERS)}, got {driver!r}"
        )
    _check_square(op, A, square=False)
    if B.dtype is not A.dtype:
        raise DTypeError(
            f"{op}: expected A and B of the same dtype, got {A.dtype.name} and {B.dtype.name}"
        )
    rows = B.shape[-1] if B.ndim == A.ndim - 1 else (B.shape[-2] if B.ndim >= 2 else None)
    if rows != A.shape[-2]:
        raise ShapeError(
            f"{op}: the rows of A and B differ (shapes {list(A.shape)} and {list(B.shape)})"
        )


@checked
def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver=None):
    """The least-squares solution X of A X = B: `(solution, residuals, rank, singular_values)`.
    A B of one dim less than A is a batch of vectors. As PyTorch's drivers (gelsy by
    default): rank from gelsy/gelsd/gelss, singular values from gelsd/gelss, and residuals
    (squared column norms of A X - B) from gels/gelsd/gelss when m > n and every A has full
    rank; the others are empty. rcond (default eps * max(m, n)) cuts the singular values.

    >>> flow.linalg.lstsq(flow.tensor([[1.0], [1.0]]), flow.tensor([[1.0], [3.0]])).solution
    tensor([[2.]])
    """
    _lstsq_check(A, B, driver)
    driver = driver or "gelsy"
    vector = B.ndim == A.ndim - 1
    columns = B.unsqueeze(-1) if vector else B
    m, n = A.shape[-2:]
    if rcond is None or rcond < 0:  # LAPACK reads a negative rcond as machine precision
        rcond = _eps(A) * max(m, n)
    placed = on_placement_of(A)
    u, s, vh = linalg_svd(A, full_matrices=False)
    kept = s > rcond * s[..., :1]
    rank = kept.sum(-1)
    solution = matmul(_svd_pinv(u, s, vh, kept), columns)
    empty_real = zeros(0, dtype=dtypes.to_real(A.dtype), **placed)
    residuals = solution.abs().flatten()[:0]  # empty, but on A's and B's graph, as PyTorch's
    # NOTE: whether residuals exist depends on the values (every A of full rank), as in
    # PyTorch, so it is decided eagerly
    if driver != "gelsy" and m > n and bool((rank == n).all()):
        residuals = (matmul(A, solution) - columns).abs().square().sum(-2)
    if driver == "gels":
        rank = zeros(0, dtype=dtypes.int64, **placed)
    singular_values = s if driver in ("gelsd", "gelss") else empty_real
    if vector:
        solution = solution.squeeze(-1)
    return LstsqResult(solution, residuals, rank, singular_values)


LINALG_NAMESPACE.update(pinv=pinv, matrix_rank=matrix_rank, lstsq=lstsq)
methods(pinverse=pinverse)
