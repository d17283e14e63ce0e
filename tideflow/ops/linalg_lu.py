"""Triangular solves and the LU decomposition: `linalg.solve_triangular`, `linalg.lu_factor`
(SciPy's getrf, pivots 1-based as LAPACK's and PyTorch's), `linalg.lu`, `lu_unpack`,
`linalg.lu_solve`, and the solvers built on Cholesky factors (`cholesky_solve`,
`cholesky_inverse`), with torch's older spellings (`lu`, `lu_solve`, `triangular_solve`).

Primitives are the triangular solve, the factorization and the pivots' permutation; the rest
are compositions, so their gradients come from those (the factorization's is PyTorch's
`linalg_lu_backward`, square, wide and tall).
"""

from __future__ import annotations

import warnings
from collections import namedtuple

import numpy as np
import scipy.linalg as sl

from ..framework import dtype as dtypes
from ..framework.errors import DTypeError, LinAlgError, Rejected, ShapeError, TideflowError
from ..framework.tensor import Tensor
from ._rules import B, Meta, S, Signature, broadcast_shapes, checked, defop, dispatch, methods
from .creation import eye, on_placement_of
from .linalg import _SOLVER_NP, LINALG_NAMESPACE, _batch_sbp, _check_square, _mH, matmul
from .shape import cat, narrow, tril, triu

__all__ = [
    "cholesky_inverse",
    "cholesky_solve",
    "lu",
    "lu_solve",
    "lu_unpack",
    "triangular_solve",
]

LUFactorResult = namedtuple("linalg_lu_factor", ["LU", "pivots"])
LUFactorExResult = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
LUResult = namedtuple("linalg_lu", ["P", "L", "U"])
LUUnpackResult = namedtuple("lu_unpack", ["P", "L", "U"])
TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def _dims(shape) -> list:
    return list(shape)


# -- triangular solves --------------------------------------------------------------------------
def _triangular_meta(a: Meta, b: Meta, *, upper, left, unitriangular) -> Meta:
    op = "linalg.solve_triangular"
    _check_square(op, a)
    if b.dtype is not a.dtype:
        raise DTypeError(
            f"{op}: expected A and B of the same dtype, got {a.dtype.name} and {b.dtype.name}"
        )
    if b.ndim < 2:
        raise ShapeError(f"{op}: B must have at least 2 dimensions, got shape {_dims(b.shape)}")
    if b.shape[-2 if left else -1] != a.shape[-1]:
        equation = "AX = B" if left else "XA = B"
        raise ShapeError(
            f"{op}: incompatible shapes of A and B for the equation {equation} "
            f"({_dims(a.shape)} and {_dims(b.shape)})"
        )
    batch = broadcast_shapes(op, a.shape[:-2], b.shape[:-2])
    return Meta((*batch, *b.shape[-2:]), a.dtype)


def _triangular_kernel(a, b, *, upper, left, unitriangular):
    if a.dtype not in _SOLVER_NP or b.dtype != a.dtype or a.ndim < 2 or b.ndim < 2:
        raise Rejected("linalg.solve_triangular: operands rejected")
    if a.shape[-1] != a.shape[-2] or b.shape[-2 if left else -1] != a.shape[-1]:
        raise Rejected("linalg.solve_triangular: shapes rejected")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, (*batch, *a.shape[-2:]))
    b = np.broadcast_to(b, (*batch, *b.shape[-2:]))
    if left:
        return _solve_left(a, b, upper, unitriangular)
    # X A = B is A^T X^T = B^T: the transpose swaps the triangle
    x = _solve_left(np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2), not upper, unitriangular)
    return np.ascontiguousarray(np.swapaxes(x, -1, -2))


def _solve_left(a, b, upper: bool, unitriangular: bool):
    if a.shape[-1] == 0 or b.shape[-1] == 0:
        return np.zeros(b.shape, b.dtype)
    try:
        x = sl.solve_triangular(
            a, b, lower=not upper, unit_diagonal=unitriangular, check_finite=False
        )
        return np.asarray(x, dtype=b.dtype)
    except np.linalg.LinAlgError:  # a zero on the diagonal: SciPy's trtrs refuses
        return _trsm(a, b, upper, unitriangular)


def _trsm(a, b, upper: bool, unitriangular: bool):
    """BLAS's trsm, which does not check for a singular A (PyTorch's: a zero on the diagonal
    gives inf/nan, not an error). One call per matrix: only singular batches come here."""
    trsm = sl.blas.get_blas_funcs("trsm", (a, b))
    flat_a = a.reshape(-1, *a.shape[-2:])
    flat_b = b.reshape(-1, *b.shape[-2:])
    with np.errstate(divide="ignore", invalid="ignore"):
        solved = [
            trsm(1.0, m, rhs, lower=not upper, diag=int(unitriangular))
            for m, rhs in zip(flat_a, flat_b, strict=True)
        ]
    return np.stack(solved).reshape(b.shape).astype(b.dtype)


def _triangular_sbp(a: Meta, b: Meta, **_) -> list[Signature]:
    """Batch axes split (an operand broadcast along one stays B); X is linear in B, so the
    right-hand sides (B's columns, or rows for XA = B) split too."""
    out = _triangular_meta(a, b, **_)
    n_batch = len(out.shape) - 2
    sigs = [Signature((B, B), (B,))]
    for j in range(n_batch):
        ins = []
        for m in (a, b):
            i = j - (n_batch - (m.ndim - 2))
            ins.append(S(i) if i >= 0 and m.shape[i] == out.shape[j] else B)
        sigs.append(Signature(tuple(ins), (S(j),)))
    axis = -1 if _["left"] else -2
    sigs.append(Signature((B, S(b.ndim + axis)), (S(n_batch + 2 + axis),)))
    return sigs


def _triangular_grad(ctx, gx):
    """PyTorch's: gB solves the adjoint system (A^H, the other triangle); gA = -gB X^H (AX = B)
    or -X^H gB (XA = B), kept to A's triangle (strictly, if unitriangular)."""
    a, x = ctx.input, ctx.out
    upper, left, unit = ctx.upper, ctx.left, ctx.unitriangular
    attrs = {"upper": not upper, "left": left, "unitriangular": unit}
    gb = dispatch(_solve_triangular, (_mH(a), gx), attrs)
    ga = None
    if ctx.needs_input_grad[0]:
        ga = -(matmul(gb, _mH(x)) if left else matmul(_mH(x), gb))
        ga = triu(ga, 1 if unit else 0) if upper else tril(ga, -1 if unit else 0)
    return ga, gb if ctx.needs_input_grad[1] else None


_solve_triangular = defop(
    "linalg_solve_triangular",
    inputs=("input", "other"),
    meta=_triangular_meta,
    sbp=_triangular_sbp,
    kernels={"cpu": _triangular_kernel},
    grad=_triangular_grad,
    saves=("input", "out"),
)


@checked
def solve_triangular(A: Tensor, B: Tensor, *, upper, left=True, unitriangular=False):
    """X with A X = B (left=False: X A = B) for triangular A, read from its upper or lower
    triangle (its diagonal taken as ones if unitriangular). Batch dims broadcast.

    >>> flow.linalg.solve_triangular(flow.tensor([[2.0, 1.0], [0.0, 1.0]]),
    ...                              flow.tensor([[3.0], [1.0]]), upper=True)
    tensor([[1.],
            [1.]])
    """
    attrs = {"upper": bool(upper), "left": bool(left), "unitriangular": bool(unitriangular)}
    return dispatch(_solve_triangular, (A, B), attrs)


@checked
def triangular_solve(b: Tensor, A: Tensor, upper=True, transpose=False, unitriangular=False):
    """torch.triangular_solve: `(X, A)` with op(A) X = b, op transposing A when `transpose`."""
    a = A.mT if transpose else A
    x = solve_triangular(a, b, upper=bool(upper) != bool(transpose), unitriangular=unitriangular)
    return TriangularSolveResult(x, A.clone())


# -- LU -----------------------------------------------------------------------------------------
def _lu_meta(x: Meta) -> tuple:
    _check_square("linalg.lu_factor", x, square=False)
    *batch, m, n = x.shape
    return (
        Meta(x.shape, x.dtype),
        Meta((*batch, min(m, n)), dtypes.int32),
        Meta(tuple(batch), dtypes.int32),
    )


def _lu_kernel(x):
    if x.dtype not in _SOLVER_NP or x.ndim < 2:
        raise Rejected("linalg.lu_factor: operand rejected")
    k = min(x.shape[-2:])
    if k == 0:
        batch = x.shape[:-2]
        return x.copy(), np.zeros((*batch, 0), np.int32), np.zeros(batch, np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.LinAlgWarning)  # singular: reported in info
        lu, piv = sl.lu_factor(x, check_finite=False)
    zero = np.diagonal(lu, axis1=-2, axis2=-1) == 0
    # LAPACK's info: the 1-based index of the first zero on U's diagonal, 0 if none
    info = np.where(zero.any(-1), zero.argmax(-1) + 1, 0).astype(np.int32)
    return np.asarray(lu, x.dtype), (piv + 1).astype(np.int32), info


def _unpacked(lu, k: int):
    """L (unit lower, m x k) and U (upper, k x n) from LAPACK's packed LU."""
    m = lu.shape[-2]
    lower = tril(narrow(lu, -1, 0, k), -1) + eye(m, k, dtype=lu.dtype, **on_placement_of(lu))
    return lower, triu(narrow(lu, -2, 0, k))


def _lu_square_grad(lower, upper, g_lower, g_upper):
    """A = L U square (Â = P^T A): gÂ = L^-H (tril(L^H gL, -1) + triu(gU U^H)) U^-H."""
    inner = tril(matmul(_mH(lower), g_lower), -1) + triu(matmul(g_upper, _mH(upper)))
    left = solve_triangular(_mH(lower), inner, upper=True, unitriangular=True)
    return solve_triangular(_mH(upper), left, upper=False, left=False)


def _lu_factor_grad(ctx, g_lu, *_):
    """PyTorch's linalg_lu_backward on the packed factors. Wide A = P L [U1 U2]: U2 = L^-1 P^T A2
    adds -L^-H gU2 U2^H to gL, and A2 gets P L^-H gU2. Tall A = P [L1; L2] U: L2 = Â2 U^-1
    adds -L2^H gL2 U^-H to gU, and Â2 gets gL2 U^-H."""
    lu, pivots = ctx.out, ctx.out1
    m, n = lu.shape[-2:]
    k = min(m, n)
    lower, upper = _unpacked(lu, k)
    g_lower, g_upper = tril(narrow(g_lu, -1, 0, k), -1), triu(narrow(g_lu, -2, 0, k))
    perm = lu_permutation(pivots, m, lu.dtype)
    if m == n:
        return (matmul(perm, _lu_square_grad(lower, upper, g_lower, g_upper)),)
    if m < n:
        u1, u2 = narrow(upper, -1, 0, k), narrow(upper, -1, k, n - k)
        g_u1, g_u2 = narrow(g_upper, -1, 0, k), narrow(g_upper, -1, k, n - k)
        g_a2 = solve_triangular(_mH(lower), g_u2, upper=True, unitriangular=True)
        g_lower = g_lower - tril(matmul(g_a2, _mH(u2)), -1)
        g_a1 = _lu_square_grad(lower, u1, g_lower, g_u1)
        return (matmul(perm, cat([g_a1, g_a2], -1)),)
    l1, l2 = narrow(lower, -2, 0, k), narrow(lower, -2, k, m - k)
    g_l1, g_l2 = narrow(g_lower, -2, 0, k), narrow(g_lower, -2, k, m - k)
    g_a2 = solve_triangular(_mH(upper), g_l2, upper=False, left=False)
    g_upper = g_upper - triu(matmul(_mH(l2), g_a2))
    g_a1 = _lu_square_grad(l1, upper, g_l1, g_upper)
    return (matmul(perm, cat([g_a1, g_a2], -2)),)


_lu_factor = defop(
    "linalg_lu_factor",
    inputs=("input",),
    meta=_lu_meta,
    sbp=_batch_sbp(n_out=3),
    kernels={"cpu": _lu_kernel},
    grad=_lu_factor_grad,
    saves=("out", "out1"),
    n_out=3,
)


def _permutation_meta(pivots: Meta, *, m, dtype) -> Meta:
    if pivots.dtype not in (dtypes.int32, dtypes.int64) or pivots.ndim < 1:
        raise DTypeError(
            f"lu_unpack: expected integer pivots of at least one dim, got {pivots.dtype.name} "
            f"of shape {_dims(pivots.shape)}"
        )
    return Meta((*pivots.shape[:-1], m, m), dtype)


def _permutation_kernel(pivots, *, m, dtype):
    """P with A = P L U from LAPACK's row interchanges (row i swapped with row pivots[i], in
    order): P[perm[j], j] = 1 for the rows' final order perm. A loop over the k interchanges,
    vectorized over the batch."""
    batch, k = pivots.shape[:-1], pivots.shape[-1]
    if k > m or (k and (pivots.min() < 1 or pivots.max() > m)):
        raise TideflowError(f"lu_unpack: pivots must lie in [1, {m}], got {pivots.tolist()}")
    np_dtype = dtypes.to_dtype(dtype).np
    if k == 0:  # no interchanges
        return np.broadcast_to(np.eye(m, dtype=np_dtype), (*batch, m, m)).copy()
    flat = np.broadcast_to(np.arange(m), (*batch, m)).reshape(-1, m).copy()
    targets = (pivots.reshape(-1, k) - 1).astype(np.intp)
    every = np.arange(flat.shape[0])
    for i in range(k):
        swapped = flat[every, targets[:, i]]
        flat[every, targets[:, i]] = flat[every, i]
        flat[every, i] = swapped
    out = np.zeros((flat.shape[0], m, m), np_dtype)
    out[every[:, None], flat, np.arange(m)] = 1
    return out.reshape(*batch, m, m)


_lu_permutation = defop(
    "lu_permutation",
    inputs=("pivots",),
    meta=_permutation_meta,
    sbp=lambda pivots, **_: (
        [Signature((B,), (B,))] + [Signature((S(i),), (S(i),)) for i in range(pivots.ndim - 1)]
    ),
    kernels={"cpu": _permutation_kernel},
    differentiable=False,
)


def lu_permutation(pivots, m: int, dtype):
    """The m x m permutation matrix of LAPACK's 1-based pivots."""
    return dispatch(_lu_permutation, (pivots,), {"m": m, "dtype": dtype})


def _raise_for_info(op: str, info: Tensor) -> None:
    """PyTorch's check of getrf's info: a zero on U's diagonal (read eagerly, from the data)."""
    if not isinstance(info._data, np.ndarray) or not info._data.any():
        return
    flat = info._data.reshape(-1)
    first = int(np.flatnonzero(flat)[0])
    where = f"(Batch element {first}): " if info.ndim else ""
    raise LinAlgError(
        f"{op}: {where}U[{flat[first]},{flat[first]}] is zero and using it on lu_solve would "
        "result in a division by zero. If you still want to perform the factorization, "
        "consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"
    )


def _refuse_no_pivoting(op: str, pivot) -> None:
    if not pivot:
        raise TideflowError(f"{op}: LU without pivoting is not implemented on the CPU")


@checked
def lu_factor_ex(A: Tensor, *, pivot=True, check_errors=False):
    """`(LU, pivots, info)`: `lu_factor` that reports a singular U in `info` (the 1-based
    index of its first zero diagonal entry, 0 if none) instead of raising, unless
    check_errors."""
    _refuse_no_pivoting("linalg.lu_factor_ex", pivot)
    result = LUFactorExResult(*dispatch(_lu_factor, (A,), {}))
    if check_errors:
        _raise_for_info("linalg.lu_factor_ex", result.info)
    return result


@checked
def lu_factor(A: Tensor, *, pivot=True):
    """`(LU, pivots)`: A = P L U packed as LAPACK's getrf packs it (L's unit diagonal
    implied), pivots 1-based int32. Raises LinAlgError where U is singular.

    >>> flow.linalg.lu_factor(flow.tensor([[1.0, 2.0], [3.0, 4.0]])).pivots
    tensor([2, 2], dtype=tideflow.int32)
    """
    _refuse_no_pivoting("linalg.lu_factor", pivot)
    lu_, pivots, info = dispatch(_lu_factor, (A,), {})
    _raise_for_info("linalg.lu_factor", info)
    return LUFactorResult(lu_, pivots)


@checked
def lu_unpack(LU_data: Tensor, LU_pivots: Tensor, unpack_data=True, unpack_pivots=True):
    """`(P, L, U)` from `lu_factor`'s output; the parts not unpacked are empty tensors."""
    m, n = LU_data.shape[-2:]
    empty = LU_data.new_zeros(0)
    p = lu_permutation(LU_pivots, m, LU_data.dtype) if unpack_pivots else empty
    lower, upper = _unpacked(LU_data, min(m, n)) if unpack_data else (empty, empty)
    return LUUnpackResult(p, lower, upper)


@checked
def linalg_lu(A: Tensor, *, pivot=True):
    """`(P, L, U)` with A = P L U: P a permutation, L unit lower triangular (m x k), U upper
    (k x n), k = min(m, n). Exists for singular A too.

    >>> flow.linalg.lu(flow.tensor([[1.0, 2.0], [3.0, 4.0]])).U
    tensor([[3.0000, 4.0000],
            [0.0000, 0.6667]])
    """
    _refuse_no_pivoting("linalg.lu", pivot)
    lu_, pivots, _ = dispatch(_lu_factor, (A,), {})
    return LUResult(*lu_unpack(lu_, pivots))


@checked
def lu(A: Tensor, pivot=True, get_infos=False):
    """torch.lu: `(LU, pivots)`, or `(LU, pivots, infos)` with get_infos (which then does not
    raise for a singular U)."""
    if get_infos:
        return tuple(lu_factor_ex(A, pivot=pivot))
    return tuple(lu_factor(A, pivot=pivot))


@checked
def linalg_lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left=True, adjoint=False):
    """X with A X = B (left=False: X A = B; adjoint: A^H in place of A) for A = P L U given by
    `lu_factor`. Batch dims broadcast."""
    m = LU.shape[-1]
    _check_square("linalg.lu_solve", LU)
    perm = lu_permutation(pivots, m, LU.dtype)
    lower, upper = _unpacked(LU, m)
    if left and not adjoint:  # X = U^-1 L^-1 P^T B
        y = solve_triangular(lower, matmul(perm.mT, B), upper=False, unitriangular=True)
        return solve_triangular(upper, y, upper=True)
    if left:  # A^H X = B: X = P L^-H U^-H B
        y = solve_triangular(_mH(upper), B, upper=False)
        return matmul(perm, solve_triangular(_mH(lower), y, upper=True, unitriangular=True))
    if not adjoint:  # X A = B: X = B U^-1 L^-1 P^T
        y = solve_triangular(upper, B, upper=True, left=False)
        y = solve_triangular(lower, y, upper=False, left=False, unitriangular=True)
        return matmul(y, perm.mT)
    # X A^H = B: X = B P L^-H U^-H
    y = solve_triangular(_mH(lower), matmul(B, perm), upper=True, left=False, unitriangular=True)
    return solve_triangular(_mH(upper), y, upper=False, left=False)


@checked
def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor):
    """torch.lu_solve: `linalg.lu_solve(LU_data, LU_pivots, b)`."""
    return linalg_lu_solve(LU_data, LU_pivots, b)


# -- Cholesky factors -----------------------------------------------------------------------------
@checked
def cholesky_solve(B: Tensor, L: Tensor, upper=False):
    """X with A X = B for A = L L^H (or U^H U when upper) given its Cholesky factor."""
    lower = _mH(L) if upper else L
    y = solve_triangular(lower, B, upper=False)
    return solve_triangular(_mH(lower), y, upper=True)


@checked
def cholesky_inverse(L: Tensor, upper=False):
    """The inverse of A = L L^H (or U^H U when upper) from its Cholesky factor."""
    _check_square("cholesky_inverse", L)
    identity = eye(L.shape[-1], dtype=L.dtype, **on_placement_of(L))
    return cholesky_solve(identity, L, upper)  # batch dims broadcast


LINALG_NAMESPACE.update(
    solve_triangular=solve_triangular,
    lu_factor=lu_factor,
    lu_factor_ex=lu_factor_ex,
    lu=linalg_lu,
    lu_solve=linalg_lu_solve,
)
methods(
    lu=lu,
    lu_solve=lu_solve,
    triangular_solve=triangular_solve,
    cholesky_solve=cholesky_solve,
    cholesky_inverse=cholesky_inverse,
)
