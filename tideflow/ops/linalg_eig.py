"""The eigendecomposition of general square matrices: `linalg.eig` and `linalg.eigvals`
(LAPACK's geev through NumPy). Results are complex for any input, as in PyTorch: a real
matrix may have complex eigenvalues. Eigenvectors have unit norm and are defined up to a
phase each; their gradient (PyTorch's `linalg_eig_backward`) needs distinct eigenvalues and
refuses a loss that depends on that phase.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..framework import dtype as dtypes
from ..framework.tensor import Tensor
from ._rules import Meta, checked, defop, dispatch
from .complex import imag, real
from .creation import eye
from .linalg import (
    LINALG_NAMESPACE,
    _batch_sbp,
    _check_square,
    _lapack,
    _mH,
    _refuse_phase_dependence,
    matmul,
    solve,
)
from .shape import diag_embed, diagonal

EigResult = namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])


def _eig_meta(x: Meta) -> tuple:
    _check_square("linalg.eig", x)
    complex_dtype = dtypes.to_complex(x.dtype)
    return Meta(x.shape[:-1], complex_dtype), Meta(x.shape, complex_dtype)


def _eig_arrays(x):
    values, vectors = np.linalg.eig(x)  # real where every eigenvalue is: made complex
    complex_dtype = np.result_type(x.dtype, np.complex64)
    return values.astype(complex_dtype), vectors.astype(complex_dtype)


def _eig_grad(ctx, gl, gv):
    """A = V diag(L) V^-1: with V^H gV projected onto the unit-norm columns' tangent space,
    grad_A = V^-H (V^H gV / conj(E) + diag(gL)) V^H, E_ij = L_j - L_i off the diagonal."""
    values, vectors = ctx.out, ctx.out1
    n = values.shape[-1]
    vhgv = matmul(_mH(vectors), gv)
    _refuse_phase_dependence("linalg.eig", "eigenvectors", imag(diagonal(vhgv, 0, -2, -1)))
    norms = real(diagonal(vhgv, 0, -2, -1))
    vhgv = vhgv - matmul(_mH(vectors), vectors * norms.reshape(*norms.shape[:-1], 1, n))
    conj_values = values.conj()
    gaps = conj_values.reshape(*values.shape[:-1], 1, n) - conj_values.reshape(*values.shape, 1)
    # the diagonal is replaced by gL below: shift the gaps' zero diagonal to 1 to keep it finite
    inner = vhgv / (gaps + eye(n, dtype=values.dtype))
    inner = inner - diag_embed(diagonal(inner, 0, -2, -1)) + diag_embed(gl)
    return (solve(_mH(vectors), matmul(inner, _mH(vectors))),)


_eig = defop(
    "linalg_eig",
    inputs=("input",),
    meta=_eig_meta,
    sbp=_batch_sbp(n_out=2),
    kernels={
        "cpu": _lapack("linalg.eig", _eig_arrays, "the eigenvalue algorithm did not converge")
    },
    grad=_eig_grad,
    saves=("out", "out1"),
    n_out=2,
)


@checked
def eig(A: Tensor):
    """`(eigenvalues, eigenvectors)` of a square matrix, complex, with A V = V diag(L); the
    eigenvectors (columns) have unit norm.

    >>> flow.linalg.eig(flow.tensor([[0.0, -1.0], [1.0, 0.0]])).eigenvalues
    tensor([0.+1.j, 0.-1.j])
    """
    return EigResult(*dispatch(_eig, (A,), {}))


@checked
def eigvals(A: Tensor):
    """The eigenvalues of a square matrix, complex; see `eig`."""
    return eig(A).eigenvalues


LINALG_NAMESPACE.update(eig=eig, eigvals=eigvals)
