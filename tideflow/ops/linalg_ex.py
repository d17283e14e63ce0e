"""PyTorch's `_ex` solvers: `linalg.inv_ex`, `linalg.solve_ex` and `linalg.cholesky_ex`, which
report LAPACK's `info` (0 on success; for LU the 1-based index of U's first zero pivot, for
Cholesky the order of the first leading minor that is not positive-definite) instead of
raising, unless check_errors. inv_ex and solve_ex compose the LU factorization and its solve
(their gradients are inv's and solve's); cholesky_ex is the Cholesky factorization with its
info, sharing linalg.cholesky's gradient.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from scipy.linalg import lapack

from ..framework import dtype as dtypes
from ..framework.errors import LinAlgError, Rejected
from ..framework.tensor import Tensor
from ._rules import Meta, checked, defop, dispatch
from .creation import eye, on_placement_of
from .linalg import (
    _SOLVER_NP,
    LINALG_NAMESPACE,
    _batch_sbp,
    _check_square,
    _cholesky_grad,
    _is_vector_rhs,
)
from .linalg_lu import _raise_for_info, linalg_lu_solve, lu_factor_ex

InvExResult = namedtuple("linalg_inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("linalg_solve_ex", ["result", "info"])
CholeskyExResult = namedtuple("linalg_cholesky_ex", ["L", "info"])


@checked
def inv_ex(A: Tensor, *, check_errors=False):
    """`(inverse, info)`: `linalg.inv` that reports a singular matrix in `info` (its values are
    then not finite) instead of raising, unless check_errors."""
    _check_square("linalg.inv_ex", A)
    lu, pivots, info = lu_factor_ex(A)
    if check_errors:
        _raise_for_info("linalg.inv_ex", info)
    identity = eye(A.shape[-1], dtype=A.dtype, **on_placement_of(A))
    return InvExResult(linalg_lu_solve(lu, pivots, identity), info)


@checked
def solve_ex(A: Tensor, B: Tensor, *, left=True, check_errors=False):
    """`(result, info)`: `linalg.solve` that reports a singular A in `info` instead of raising,
    unless check_errors. B is a batch of columns as in `linalg.solve`."""
    _check_square("linalg.solve_ex", A)
    lu, pivots, info = lu_factor_ex(A)
    if check_errors:
        _raise_for_info("linalg.solve_ex", info)
    vector = _is_vector_rhs(tuple(A.shape), tuple(B.shape))
    x = linalg_lu_solve(lu, pivots, B.unsqueeze(-1) if vector else B, left=left)
    return SolveExResult(x.squeeze(-1) if vector else x, info)


def _cholesky_ex_meta(x: Meta, *, upper) -> tuple:
    _check_square("linalg.cholesky_ex", x)
    return Meta(x.shape, x.dtype), Meta(x.shape[:-2], dtypes.int32)


def _potrf(x, upper: bool):
    """One matrix's factor and LAPACK's info (the factor is partial where info > 0)."""
    potrf = lapack.get_lapack_funcs("potrf", (x,))
    factor, info = potrf(x, lower=not upper, clean=True)
    return factor, info


def _cholesky_ex_kernel(x, *, upper):
    if x.dtype not in _SOLVER_NP or x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise Rejected("linalg.cholesky_ex: operand rejected")
    batch = x.shape[:-2]
    try:
        return np.linalg.cholesky(x, upper=upper), np.zeros(batch, np.int32)
    except np.linalg.LinAlgError:
        pass
    # NOTE: only where some matrix is not positive-definite: one LAPACK call per matrix
    flat = x.reshape(-1, *x.shape[-2:])
    factors, infos = zip(*(_potrf(m, upper) for m in flat), strict=True)
    factor = np.stack(factors).reshape(x.shape).astype(x.dtype)
    return factor, np.asarray(infos, np.int32).reshape(batch)


_cholesky_ex = defop(
    "linalg_cholesky_ex",
    inputs=("input",),
    meta=_cholesky_ex_meta,
    sbp=_batch_sbp(n_out=2),
    kernels={"cpu": _cholesky_ex_kernel},
    grad=lambda ctx, gy, _: _cholesky_grad(ctx, gy),
    saves=("out",),
    n_out=2,
)


@checked
def cholesky_ex(A: Tensor, *, upper=False, check_errors=False):
    """`(L, info)`: `linalg.cholesky` that reports a matrix that is not positive-definite in
    `info` (the order of its first such leading minor) instead of raising, unless
    check_errors."""
    factor, info = dispatch(_cholesky_ex, (A,), {"upper": bool(upper)})
    if check_errors and isinstance(info._data, np.ndarray) and info._data.any():
        flat = info._data.reshape(-1)
        first = int(np.flatnonzero(flat)[0])
        where = f"(Batch element {first}): " if info.ndim else ""
        raise LinAlgError(
            f"linalg.cholesky_ex: {where}The factorization could not be completed because the "
            f"input is not positive-definite (the leading minor of order {flat[first]} is not "
            "positive-definite)."
        )
    return CholeskyExResult(factor, info)


LINALG_NAMESPACE.update(inv_ex=inv_ex, solve_ex=solve_ex, cholesky_ex=cholesky_ex)
