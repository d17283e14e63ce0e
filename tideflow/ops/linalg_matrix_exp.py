"""The matrix exponential, `linalg.matrix_exp` (torch.matrix_exp): SciPy's expm (scaling and
squaring with Pade approximants), batched, float and complex. Its gradient is PyTorch's: the
upper-right block of exp([[A^H, G], [0, A^H]]) (Najfeld and Havel 1995), so it is again a
matrix exponential and differentiates as far as needed.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sl

from ..framework.tensor import Tensor
from ._rules import Meta, checked, defop, dispatch, methods
from .linalg import LINALG_NAMESPACE, _batch_sbp, _check_square, _lapack, _mH
from .shape import cat, narrow

__all__ = ["matrix_exp"]


def _matrix_exp_meta(x: Meta) -> Meta:
    _check_square("linalg.matrix_exp", x)
    return Meta(x.shape, x.dtype)


def _expm(x):
    if x.shape[-1] == 0:
        return x.copy()
    return np.asarray(sl.expm(x), x.dtype)


def _matrix_exp_grad(ctx, gy):
    a = _mH(ctx.input)
    n = a.shape[-1]
    top = cat([a, gy], -1)
    block = cat([top, cat([gy.new_zeros(gy.shape), a], -1)], -2)
    return (narrow(narrow(matrix_exp(block), -2, 0, n), -1, n, n),)


_matrix_exp = defop(
    "linalg_matrix_exp",
    inputs=("input",),
    meta=_matrix_exp_meta,
    sbp=_batch_sbp(),
    kernels={"cpu": _lapack("linalg.matrix_exp", _expm)},
    grad=_matrix_exp_grad,
    saves=("input",),
)


@checked
def matrix_exp(A: Tensor):
    """The exponential of a square matrix (or of each in a batch): sum of A^k / k!.

    >>> flow.linalg.matrix_exp(flow.tensor([[0.0, 1.0], [0.0, 0.0]]))
    tensor([[1., 1.],
            [0., 1.]])
    """
    return dispatch(_matrix_exp, (A,), {})


LINALG_NAMESPACE.update(matrix_exp=matrix_exp)
methods(matrix_exp=matrix_exp)
