"""torch.linalg functions PyTorch composes of other ops, composed the same way here: the
condition number, tensor inverses and solves, Vandermonde matrices, `linalg.diagonal`, and
torch's older `qr` and `chain_matmul`. Their gradients are those of the ops they are made of.
"""

from __future__ import annotations

import math
from collections import namedtuple

from ..framework.errors import ShapeError, TideflowError
from ..framework.tensor import Tensor
from ._rules import checked, methods
from .binary import where
from .creation import ones_like
from .linalg import LINALG_NAMESPACE, _check_square, inv, multi_dot, solve
from .linalg import qr as linalg_qr
from .linalg_ex import inv_ex
from .linalg_svd import svdvals
from .reduction import cumprod, matrix_norm
from .shape import cat, diagonal, movedim, narrow

__all__ = ["chain_matmul", "qr"]

QRResult = namedtuple("qr", ["Q", "R"])
_SINGULAR_VALUE_ORDS = (None, 2, -2)
_NORM_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1)


@checked
def cond(A: Tensor, p=None):
    """The condition number of A in the norm `p`: the ratio of its extreme singular values for
    p = None or 2 (-2: the inverse ratio), else norm(A) * norm(A^-1), for square A only, inf
    where A is singular.

    >>> flow.linalg.cond(flow.tensor([[2.0, 0.0], [0.0, 0.5]]))
    tensor(4.)
    """
    op = "linalg.cond"
    if p in _SINGULAR_VALUE_ORDS:
        _check_square(op, A, square=False)
        s = svdvals(A)
        largest, smallest = narrow(s, -1, 0, 1), narrow(s, -1, s.shape[-1] - 1, 1)
        ratio = largest / smallest if p != -2 else smallest / largest
        return ratio.squeeze(-1)
    if p not in _NORM_ORDS:
        raise TideflowError(f"{op}: order {p!r} is not supported")
    if A.ndim >= 2 and A.shape[-1] != A.shape[-2]:
        m, n = A.shape[-2:]
        raise ShapeError(
            f"{op}(ord={p}): A must be batches of square matrices, but they are {m} by {n} matrices"
        )
    inverse, info = inv_ex(A)
    return where(info > 0, math.inf, _norm(A, p) * _norm(inverse, p))


def _norm(x: Tensor, p):
    """matrix_norm, also for complex x. NOTE: matrix_norm refuses complex input; the norms
    cond uses depend on the moduli only, but for the nuclear one (the singular values')."""
    if not x.dtype.is_complex:
        return matrix_norm(x, p)
    return svdvals(x).sum(-1) if p == "nuc" else matrix_norm(x.abs(), p)


@checked
def tensorinv(A: Tensor, ind=2):
    """The inverse of A read as a linear map from its last dims to its first `ind`:
    `tensordot(tensorinv(A, ind), A, ind)` is the identity. Shape: A.shape[ind:] +
    A.shape[:ind]."""
    op = "linalg.tensorinv"
    if not isinstance(ind, int) or ind <= 0:
        raise TideflowError(f"{op}: expected a strictly positive integer for 'ind', got {ind!r}")
    rows, cols = A.shape[:ind], A.shape[ind:]
    if math.prod(rows) != math.prod(cols):
        raise ShapeError(
            f"{op}: expected prod(A.shape[ind:]) == prod(A.shape[:ind]), got "
            f"{math.prod(cols)} != {math.prod(rows)} for shape {list(A.shape)} and ind={ind}"
        )
    n = math.prod(rows)
    return inv(A.reshape(n, n)).reshape(*cols, *rows)


@checked
def tensorsolve(A: Tensor, B: Tensor, dims=None):
    """X with `tensordot(A, X, X.ndim) == B`; X has shape A.shape[B.ndim:]. `dims` are dims of
    A moved to its end first."""
    if dims is not None:
        A = movedim(A, list(dims), list(range(A.ndim - len(dims), A.ndim)))
    result_shape = A.shape[B.ndim :]
    n = math.prod(result_shape)
    if math.prod(A.shape[: B.ndim]) != n or tuple(A.shape[: B.ndim]) != tuple(B.shape):
        raise ShapeError(
            f"linalg.tensorsolve: expected A's leading dims {list(A.shape[: B.ndim])} to equal "
            f"B's shape {list(B.shape)} and to hold as many elements as the result's "
            f"{list(result_shape)}"
        )
    return solve(A.reshape(n, n), B.reshape(n)).reshape(*result_shape)


@checked
def vander(x: Tensor, *, N=None):
    """The Vandermonde matrix of x's last dim: columns x^0, x^1, ..., x^(N-1) (N defaults to
    x.shape[-1]), built with a cumulative product (finite gradients at x = 0).

    >>> flow.linalg.vander(flow.tensor([1, 2, 3]))
    tensor([[1, 1, 1],
            [1, 2, 4],
            [1, 3, 9]])
    """
    if x.ndim < 1:
        raise ShapeError("linalg.vander: x must have at least one dimension, got a 0-d tensor")
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise TideflowError(f"linalg.vander: N must be greater than 1, got {n}")
    column = x.unsqueeze(-1)
    powers = cumprod(column.expand(*x.shape, n - 1), -1)
    return cat([ones_like(column), powers], -1)


@checked
def linalg_diagonal(A: Tensor, *, offset=0, dim1=-2, dim2=-1):
    """torch.diagonal with the matrices in the last two dims by default."""
    return diagonal(A, offset, dim1, dim2)


@checked
def qr(input: Tensor, some=True):
    """torch.qr: `linalg.qr` with mode 'reduced' (some=True) or 'complete'."""
    return QRResult(*linalg_qr(input, "reduced" if some else "complete"))


@checked
def chain_matmul(*matrices: Tensor):
    """torch.chain_matmul: the product of 2-D matrices in the cheapest order; PyTorch
    deprecates it for `linalg.multi_dot`."""
    for i, m in enumerate(matrices):
        if m.ndim != 2:
            raise ShapeError(
                f"chain_matmul: expected 2-D matrices, got shape {list(m.shape)} at {i}"
            )
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(list(matrices))


LINALG_NAMESPACE.update(
    cond=cond,
    tensorinv=tensorinv,
    tensorsolve=tensorsolve,
    vander=vander,
    diagonal=linalg_diagonal,
)
methods(qr=qr)
