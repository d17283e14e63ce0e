"""Decompositions and solvers beyond what the op database checks: LinAlgError where LAPACK
fails, PyTorch's refusal of ill-defined gradients, and arguments PyTorch refuses."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework.errors import DTypeError, ShapeError, TideflowError


def _complex(*shape, seed=0):
    rng = np.random.default_rng(seed)
    return flow.from_numpy(rng.standard_normal(shape) + 1j * rng.standard_normal(shape))


def test_linalg_error_is_exposed_and_a_runtime_error():
    with pytest.raises(flow.linalg.LinAlgError, match=r"linalg\.inv: the input matrix is singular"):
        flow.linalg.inv(flow.zeros(2, 2))
    assert issubclass(flow.linalg.LinAlgError, RuntimeError)


def test_svd_gradient_refuses_a_loss_that_depends_on_the_phase():
    a = _complex(3, 2).requires_grad_()
    u, _, _ = flow.linalg.svd(a, full_matrices=False)
    with pytest.raises(TideflowError, match="singular vector pairs are defined up to a phase"):
        u.real.sum().backward()


def test_svd_gradient_of_a_phase_free_loss_is_finite():
    a = _complex(3, 2).requires_grad_()
    u, s, vh = flow.linalg.svd(a, full_matrices=False)
    (u @ flow.diag_embed(s.to(u.dtype)) @ vh).abs().sum().backward()
    assert np.isfinite(a.grad.numpy()).all()


def test_svd_refuses_cusolver_drivers():
    with pytest.raises(TideflowError, match="driver= is only supported on CUDA"):
        flow.linalg.svd(flow.eye(2), driver="gesvd")


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: flow.linalg.lstsq(flow.eye(3), flow.zeros(3, 2), driver="gesv"),
            TideflowError,
            r"linalg\.lstsq: driver should be one of gels, gelsy, gelsd, gelss, got 'gesv'",
        ),
        (
            lambda: flow.linalg.lstsq(flow.eye(3), flow.zeros(4, 2)),
            ShapeError,
            r"linalg\.lstsq: the rows of A and B differ \(shapes \[3, 3\] and \[4, 2\]\)",
        ),
        (
            lambda: flow.linalg.lstsq(flow.eye(3), flow.zeros(3, 2, dtype=flow.float64)),
            DTypeError,
            r"linalg\.lstsq: expected A and B of the same dtype, got float32 and float64",
        ),
        (
            lambda: flow.linalg.pinv(flow.eye(3), 0.1, atol=0.2),
            TideflowError,
            r"linalg\.pinv: give either the positional tolerance or atol/rtol, not both",
        ),
        (
            lambda: flow.linalg.matrix_rank(flow.zeros(2, 3), hermitian=True),
            ShapeError,
            r"linalg\.matrix_rank: expected a square matrix or a batch of them, got shape \[2, 3\]",
        ),
    ],
)
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_lu_factor_raises_linalg_error_naming_the_zero_pivot():
    a = flow.ones(2, 3, 3)
    with pytest.raises(
        flow.linalg.LinAlgError, match=r"linalg\.lu_factor: \(Batch element 0\): U\[2,2\] is zero"
    ):
        flow.linalg.lu_factor(a)
    info = flow.linalg.lu_factor_ex(a).info
    assert info.tolist() == [2, 2]


def test_lu_without_pivoting_is_refused_as_pytorch_refuses_it_on_cpu():
    with pytest.raises(TideflowError, match="LU without pivoting is not implemented on the CPU"):
        flow.linalg.lu_factor(flow.eye(2), pivot=False)


def test_solve_triangular_needs_a_matrix_right_hand_side():
    with pytest.raises(ShapeError, match="B must have at least 2 dimensions, got shape \\[3\\]"):
        flow.linalg.solve_triangular(flow.eye(3), flow.ones(3), upper=True)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
@pytest.mark.parametrize("shape", [(6, 4), (2, 3, 5)])
def test_svd_lowrank_reproduces_a_matrix_of_rank_q(shape, dtype):
    """Whatever the random sketch, a matrix of rank q is reproduced, with its singular values
    (the op database compares the same against PyTorch, without the RNG's values)."""
    rng = np.random.default_rng(0)
    *batch, m, n = shape
    left = rng.standard_normal((*batch, m, 2)).astype(dtype)
    a = left @ rng.standard_normal((*batch, 2, n)).astype(dtype)
    u, s, v = flow.svd_lowrank(flow.from_numpy(a), q=2)
    rebuilt = (u.numpy() * s.numpy()[..., None, :]) @ np.conj(np.swapaxes(v.numpy(), -1, -2))
    np.testing.assert_allclose(rebuilt, a, atol=1e-10)
    np.testing.assert_allclose(s.numpy(), np.linalg.svd(a, compute_uv=False)[..., :2], rtol=1e-10)


def test_pca_lowrank_centers_the_columns():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 2)) @ rng.standard_normal((2, 5)) + rng.standard_normal(5)
    u, s, v = flow.pca_lowrank(flow.from_numpy(a), q=2)
    centered = a - a.mean(0)
    np.testing.assert_allclose((u.numpy() * s.numpy()) @ v.numpy().T, centered, atol=1e-10)


@pytest.mark.parametrize(
    ("decompose", "op"),
    [
        (lambda a: flow.linalg.eigh(a + a.mH).eigenvectors, "linalg.eigh"),
        (lambda a: flow.linalg.eig(a).eigenvectors, "linalg.eig"),
    ],
)
def test_eigenvector_gradients_refuse_a_loss_that_depends_on_the_phase(decompose, op):
    a = _complex(3, 3).requires_grad_()
    with pytest.raises(TideflowError, match=rf"{op}: the eigenvectors are defined up to a phase"):
        decompose(a).real.sum().backward()
