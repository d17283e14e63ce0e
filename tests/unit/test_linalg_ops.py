"""Linear algebra beyond what the op database checks: user-facing errors, dtype rules, in-place
methods, higher-order gradients of einsum's pieces, and the SBP signatures and meta rules of
the private transpose flags that only gradients use."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework.errors import AutogradError, DTypeError, ShapeError, TideflowError
from tideflow.ops import linalg
from tideflow.testing.sbp_sim import Call, check_meta, check_signature, metas_of


def _randn(*shape, dtype=np.float64, seed=0):
    return flow.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _well_conditioned(n, seed=0):
    a = np.random.default_rng(seed).uniform(-1, 1, (n, n)) + 3 * np.eye(n)
    return flow.from_numpy(a)


# -- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: flow.matmul(flow.zeros(2, 3), flow.zeros(4, 5)),
            ShapeError,
            r"matmul: shapes \[2, 3\] and \[4, 5\] cannot be multiplied \(3 != 4\)",
        ),
        (
            lambda: flow.zeros(3) @ flow.zeros(4, 5),
            ShapeError,
            r"matmul: shapes \[3\] and \[4, 5\] cannot be multiplied \(3 != 4\)",
        ),
        (
            lambda: flow.matmul(flow.zeros(2, 2, 3), flow.zeros(3, 3, 4)),
            ShapeError,
            r"matmul: batch dimensions \[2\] and \[3\] of shapes \[2, 2, 3\] and \[3, 3, 4\] "
            "cannot be broadcast",
        ),
        (
            lambda: flow.matmul(flow.tensor(2.0), flow.zeros(3)),
            ShapeError,
            r"matmul: both arguments need to be at least 1-D, got shapes \[\] and \[3\]",
        ),
        (
            lambda: flow.matmul(flow.zeros(2, 3, dtype=flow.int64), flow.zeros(3, 2)),
            DTypeError,
            "matmul: expected operands of the same dtype, got int64 and float32",
        ),
        (
            lambda: flow.matmul(flow.zeros(2, 3, dtype=flow.bool), flow.zeros(3, dtype=flow.bool)),
            DTypeError,
            "matmul: bool operands are not supported",
        ),
        (
            lambda: flow.mm(flow.zeros(2, 3), flow.zeros(4, 5)),
            ShapeError,
            r"mm: shapes \[2, 3\] and \[4, 5\] cannot be multiplied \(3 != 4\)",
        ),
        (
            lambda: flow.mm(flow.zeros(2, 2, 3), flow.zeros(3, 4)),
            ShapeError,
            r"mm: expected two 2-D matrices, got shapes \[2, 2, 3\] and \[3, 4\]",
        ),
        (
            lambda: flow.bmm(flow.zeros(2, 3, 4), flow.zeros(1, 4, 5)),
            ShapeError,
            r"bmm: batch sizes of shapes \[2, 3, 4\] and \[1, 4, 5\] differ \(\[2\] != \[1\]\)",
        ),
        (
            lambda: flow.mv(flow.zeros(2, 3), flow.zeros(4)),
            ShapeError,
            r"mv: shapes \[2, 3\] and \[4\] cannot be multiplied \(3 != 4\)",
        ),
        (
            lambda: flow.dot(flow.zeros(3, dtype=flow.int64), flow.zeros(3)),
            DTypeError,
            "dot: expected operands of the same dtype, got int64 and float32",
        ),
        (
            lambda: flow.outer(flow.zeros(2, 2), flow.zeros(3)),
            ShapeError,
            r"outer: expected two 1-D tensors, got shapes \[2, 2\] and \[3\]",
        ),
        (
            lambda: flow.addmm(flow.zeros(4), flow.zeros(2, 3), flow.zeros(3, 3)),
            ShapeError,
            r"addmm: input of shape \[4\] cannot be broadcast to the product's shape \[2, 3\]",
        ),
        (
            lambda: flow.addmm(flow.zeros(2, 1, 3), flow.zeros(2, 3), flow.zeros(3, 3)),
            ShapeError,
            r"addmm: input of shape \[2, 1, 3\] cannot be broadcast to the product's shape",
        ),
        (
            lambda: flow.addmm(
                flow.zeros(3, dtype=flow.float64), flow.zeros(2, 3), flow.zeros(3, 3)
            ),
            DTypeError,
            "addmm: expected input of the product's dtype float32, got float64",
        ),
        (
            lambda: flow.einsum("ij,jk->ik", flow.zeros(2, 3)),
            TideflowError,
            "einsum: the equation 'ij,jk->ik' has 2 operand subscripts but 1 operands",
        ),
        (
            lambda: flow.einsum("ij->i", flow.zeros(2, 3, 4)),
            ShapeError,
            r"einsum: subscripts 'ij' of operand 0 name 2 dimensions but the operand has shape "
            r"\[2, 3, 4\]",
        ),
        (
            lambda: flow.einsum("ij,jk->ik", flow.zeros(2, 3), flow.zeros(4, 5)),
            ShapeError,
            r"einsum: subscript 'j' has sizes 3 and 4 in operands of shapes \[2, 3\] and \[4, 5\]",
        ),
        (
            lambda: flow.einsum("ii->i", flow.zeros(2, 3)),
            ShapeError,
            r"einsum: subscript 'i' is repeated in operand 0 \(shape \[2, 3\]\) with different "
            "sizes 2 and 3",
        ),
        (
            lambda: flow.einsum("ij->ii", flow.zeros(2, 2)),
            TideflowError,
            "einsum: output subscript 'i' appears more than once",
        ),
        (
            lambda: flow.einsum("ij->k", flow.zeros(2, 2)),
            TideflowError,
            "einsum: output subscript 'k' does not appear",
        ),
        (
            lambda: flow.einsum("i.j->i", flow.zeros(2, 2)),
            TideflowError,
            r"einsum: invalid subscripts 'i\.j'",
        ),
        (
            lambda: flow.einsum("i,i->", flow.zeros(2), flow.zeros(2, dtype=flow.float64)),
            DTypeError,
            "einsum: expected operands of the same dtype, got float32 and float64",
        ),
        (
            lambda: flow.tensordot(flow.zeros(2, 3), flow.zeros(4, 2), dims=([1], [0])),
            ShapeError,
            r"tensordot: contracted dims must match, but a \(shape \[2, 3\]\) has size 3 in dim 1 "
            r"and b \(shape \[4, 2\]\) has size 4 in dim 0",
        ),
        (
            lambda: flow.tensordot(flow.zeros(2, 3), flow.zeros(3, 2), dims=3),
            ShapeError,
            r"tensordot: dims=3 must be in \[0, 2\]",
        ),
        (
            lambda: flow.einsum(flow.zeros(2), [52]),
            TideflowError,
            r"einsum: sublist subscript 52 is not within the valid range \[0, 52\)",
        ),
        (
            lambda: flow.inner(flow.zeros(2, 3), flow.zeros(2)),
            ShapeError,
            r"inner: the last dims must match, got shapes \[2, 3\] and \[2\]",
        ),
        (
            lambda: flow.linalg.multi_dot([flow.zeros(2, 3)]),
            TideflowError,
            "linalg.multi_dot: expected at least 2 tensors, got 1",
        ),
        (
            lambda: flow.linalg.multi_dot([flow.zeros(2, 3), flow.zeros(3), flow.zeros(3)]),
            ShapeError,
            r"linalg.multi_dot: tensor 1 must be 2-D, got shape \[3\]",
        ),
        (
            lambda: flow.linalg.multi_dot([flow.zeros(2, 3), flow.zeros(4, 2)]),
            ShapeError,
            r"linalg.multi_dot: tensors 0 and 1 with shapes \[2, 3\] and \[4, 2\] cannot be "
            "multiplied",
        ),
        (
            lambda: flow.linalg.matrix_power(flow.zeros(2, 3), 2),
            ShapeError,
            r"linalg.matrix_power: expected a square matrix or a batch of them, got shape "
            r"\[2, 3\]",
        ),
        (
            lambda: flow.trace(flow.zeros(2, 2, 2)),
            ShapeError,
            r"trace: expected a 2-D matrix, got shape \[2, 2, 2\]",
        ),
        (
            lambda: flow.linalg.cross(flow.zeros(2, 2), flow.zeros(2, 2)),
            ShapeError,
            r"linalg.cross: dim 1 must have length 3 in both inputs, got shapes \[2, 2\] and "
            r"\[2, 2\]",
        ),
        (
            lambda: flow.linalg.cross(flow.zeros(3), flow.zeros(2, 3)),
            ShapeError,
            "linalg.cross: inputs must have the same number of dims",
        ),
        (
            lambda: flow.linalg.inv(flow.zeros(2, 3)),
            ShapeError,
            r"linalg.inv: expected a square matrix or a batch of them, got shape \[2, 3\]",
        ),
        (
            lambda: flow.linalg.inv(flow.zeros(2, 2, dtype=flow.float16)),
            DTypeError,
            "linalg.inv: expected a float32, float64, complex64 or complex128 tensor, got float16",
        ),
        (
            lambda: flow.linalg.det(flow.zeros(2, 2, dtype=flow.int64)),
            DTypeError,
            "linalg.det: expected a float32, float64, complex64 or complex128 tensor, got int64",
        ),
        (
            lambda: flow.linalg.inv(flow.zeros(2, 2)),
            TideflowError,
            "linalg.inv: the input matrix is singular",
        ),
        (
            lambda: flow.linalg.solve(flow.eye(3), flow.zeros(4)),
            ShapeError,
            r"linalg.solve: incompatible shapes of A and B for the equation AX = B \(\[3, 3\] "
            r"and \[4\]\)",
        ),
        (
            lambda: flow.linalg.solve(flow.eye(3), flow.zeros(3), left=False),
            ShapeError,
            r"linalg.solve: incompatible shapes of A and B for the equation XA = B",
        ),
        (
            lambda: flow.linalg.solve(flow.zeros(3, 3), flow.zeros(3)),
            TideflowError,
            "linalg.solve: the input matrix is singular",
        ),
        (
            lambda: flow.linalg.cholesky(-flow.eye(2)),
            TideflowError,
            "linalg.cholesky: the factorization could not be completed because the input is not "
            "positive-definite",
        ),
        (
            lambda: flow.linalg.qr(flow.zeros(3, 2), mode="full"),
            TideflowError,
            "linalg.qr: mode must be 'reduced', 'complete' or 'r', got 'full'",
        ),
        (
            lambda: flow.linalg.eigh(flow.eye(2), UPLO="X"),
            TideflowError,
            "linalg.eigh: UPLO must be 'L' or 'U', got 'X'",
        ),
    ],
)
def test_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_products_keep_precision_and_do_not_promote():
    x32 = flow.ones(2, 3)
    assert (x32 @ flow.ones(3, 2)).dtype is flow.float32
    half = flow.ones(2, 3, dtype=flow.bfloat16) @ flow.ones(3, dtype=flow.bfloat16)
    assert half.dtype is flow.bfloat16
    ints = flow.ones(2, 3, dtype=flow.int32) @ flow.ones(3, 2, dtype=flow.int32)
    assert ints.dtype is flow.int32
    np.testing.assert_array_equal(ints.numpy(), np.full((2, 2), 3))


def test_half_precision_accumulates_in_float32():
    # 4097 ones sum exactly in float32 but not in float16 (whose spacing at 4096 is 4)
    x = flow.ones(4097, dtype=flow.float16)
    assert flow.dot(x, x).item() == 4096.0  # one rounding of 4097 to float16


def test_grad_fn_names_follow_pytorch():
    a = _randn(2, 3).requires_grad_()
    b = _randn(3, 4, seed=1)
    assert flow.mm(a, b).grad_fn.name() == "MmBackward0"
    assert flow.matmul(a, b).grad_fn.name() == "MatmulBackward0"
    assert flow.linalg.inv(_well_conditioned(3).requires_grad_()).grad_fn.name() == (
        "LinalgInvBackward0"
    )


def test_matmul_operator_and_methods():
    a, b, v = _randn(2, 3), _randn(3, 4, seed=1), _randn(3, seed=2)
    expected = a.numpy() @ b.numpy()
    for got in (a @ b, a.matmul(b), a.mm(b), flow.linalg.matmul(a, b)):
        np.testing.assert_allclose(got.numpy(), expected)
    np.testing.assert_allclose(a.mv(v).numpy(), a.numpy() @ v.numpy())
    np.testing.assert_allclose(v.dot(v).numpy(), v.numpy() @ v.numpy())
    np.testing.assert_allclose(v.outer(v).numpy(), np.outer(v.numpy(), v.numpy()))


def test_addmm_beta_zero_ignores_nan_in_input():
    nan = flow.full((2, 2), float("nan"))
    out = flow.addmm(nan, flow.eye(2), flow.eye(2), beta=0)
    np.testing.assert_array_equal(out.numpy(), np.eye(2))


def test_addmm_family_in_place():
    x = flow.ones(2, 2)
    version = x._version_count
    assert x.addmm_(flow.eye(2), flow.eye(2), beta=2, alpha=3) is x
    np.testing.assert_allclose(x.numpy(), 2 + 3 * np.eye(2))
    assert x._version_count == version + 1
    y = flow.zeros(2)
    y.addmv_(flow.ones(2, 3), flow.ones(3))
    np.testing.assert_allclose(y.numpy(), [3.0, 3.0])


def test_backward_after_in_place_change_of_a_saved_operand_raises():
    a = _randn(2, 3).requires_grad_()
    b = _randn(3, 2, seed=1)
    out = flow.matmul(a, b)
    b.add_(1.0)
    with pytest.raises(AutogradError, match="MatmulBackward0 saved 'other'"):
        out.sum().backward()


def test_einsum_accepts_a_list_of_operands():
    a, b = _randn(2, 3), _randn(3, 4, seed=1)
    np.testing.assert_allclose(
        flow.einsum("ij,jk", [a, b]).numpy(), np.einsum("ij,jk", a.numpy(), b.numpy())
    )


def test_einsum_one_operand_sums_integers_in_int64():
    x = flow.ones(3, 3, dtype=flow.int32)
    assert flow.einsum("ij->i", x).dtype is flow.int64  # a sum, as in PyTorch
    assert flow.einsum("ii->i", x).dtype is flow.int32  # a diagonal
    two = flow.einsum("ij,jk->i", x, x)  # a one-sided sum inside a contraction
    assert two.dtype is flow.int32
    np.testing.assert_array_equal(two.numpy(), [9, 9, 9])


def test_einsum_output_does_not_alias_its_input():
    x = _randn(2, 3)
    y = flow.einsum("ij->ji", x)
    y.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), _randn(2, 3).numpy())


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ii->", [(3, 3)]),
        ("iij->ji", [(2, 2, 3)]),
        ("...i->i", [(2, 3)]),
        ("ij,ij->ij", [(1, 3), (2, 3)]),
        ("ij,jk->ik", [(2, 1), (3, 2)]),
        ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
    ],
)
def test_einsum_second_order_gradients(equation, shapes):
    inputs = [_randn(*s, seed=i).requires_grad_() for i, s in enumerate(shapes)]
    assert flow.autograd.gradgradcheck(lambda *xs: flow.einsum(equation, *xs), inputs)


def test_tensordot_matches_numpy():
    a, b = _randn(3, 2, 4), _randn(2, 3, 5, seed=1)
    got = flow.tensordot(a, b, dims=([1, 0], [0, 1]))
    np.testing.assert_allclose(got.numpy(), np.tensordot(a.numpy(), b.numpy(), ([1, 0], [0, 1])))


def test_cross_without_dim_warns_and_uses_the_first_dim_of_size_3():
    a, b = _randn(3, 3), _randn(3, 3, seed=1)
    with pytest.warns(UserWarning, match="without specifying the dim"):
        got = flow.cross(a, b)
    np.testing.assert_allclose(got.numpy(), np.cross(a.numpy(), b.numpy(), axis=0))


def test_decomposition_results_are_named():
    a = _well_conditioned(3)
    result = flow.linalg.slogdet(a)
    assert result._fields == ("sign", "logabsdet")
    np.testing.assert_allclose(
        result.sign.item() * np.exp(result.logabsdet.item()), np.linalg.det(a.numpy())
    )
    result = flow.linalg.qr(a)
    assert result._fields == ("Q", "R")
    np.testing.assert_allclose((result.Q @ result.R).numpy(), a.numpy(), atol=1e-12)
    sym = a + a.mT
    result = flow.linalg.eigh(sym)
    assert result._fields == ("eigenvalues", "eigenvectors")
    values, vectors = result
    rebuilt = vectors.numpy() @ np.diag(values.numpy()) @ vectors.numpy().T
    np.testing.assert_allclose(rebuilt, sym.numpy(), atol=1e-12)


def test_qr_gradient_errors():
    x = _randn(3, 2).requires_grad_()
    _, r = flow.linalg.qr(x, mode="r")
    with pytest.raises(TideflowError, match="mode='r' does not compute"):
        r.sum().backward()
    q, _ = flow.linalg.qr(x, mode="complete")
    with pytest.raises(TideflowError, match="mode='complete' is not differentiable"):
        q.sum().backward()


def test_linalg_namespace():
    for name in ("inv", "solve", "det", "slogdet", "cholesky", "qr", "eigh", "cross", "vecdot"):
        assert callable(getattr(flow.linalg, name)), name
    assert flow.det is flow.linalg.det


# -- the private flags: meta and SBP (the database only reaches them through gradients) ------
def _flagged_calls():
    rng = np.random.default_rng(0)

    def arr(*shape):
        return rng.standard_normal(shape)

    a_shapes = {False: (2, 4, 3), True: (2, 3, 4)}  # op(a) is (2, 4, 3)
    b_shapes = {False: (1, 3, 6), True: (1, 6, 3)}  # op(b) is (1, 3, 6)
    for ta in (False, True):
        for tb in (False, True):
            a, b = arr(*a_shapes[ta]), arr(*b_shapes[tb])
            out = linalg._matmul_arrays(a, b, ta, tb)
            yield Call(linalg._matmul, (a, b), {"ta": ta, "tb": tb}, (out,))
    a, b = np.eye(4) * 3 + arr(2, 4, 4) * 0.1, arr(2, 4, 2)
    for left in (False, True):
        rhs = b if left else np.swapaxes(b, -1, -2)
        attrs = {"left": left, "adjoint": True}
        yield Call(linalg._solve, (a, rhs), attrs, (linalg._solve_arrays(a, rhs, **attrs),))


@pytest.mark.parametrize("call", list(_flagged_calls()), ids=lambda c: f"{c.op.name}{c.attrs}")
def test_flagged_calls_meta_and_sbp(call):
    expected = call.outs[0]
    if call.op is linalg._matmul:
        a, b = call.args
        a = np.swapaxes(a, -1, -2) if call.attrs["ta"] else a
        b = np.swapaxes(b, -1, -2) if call.attrs["tb"] else b
        np.testing.assert_allclose(expected, a @ b)
    assert check_meta(call) is None
    sigs = call.op.sbp(*metas_of(call.args), **call.attrs)
    assert len(sigs) > 3
    for sig in sigs:
        assert check_signature(call, sig) is None, sig
