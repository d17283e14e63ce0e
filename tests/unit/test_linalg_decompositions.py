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
    with pytest.raises(TideflowError, match="defined up to a phase"):
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
