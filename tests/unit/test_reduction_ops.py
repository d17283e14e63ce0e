"""Reductions: user-facing errors, named results, in-place scans, and gradient edge cases
(zeros in prod/cumprod, ties, NaN, zero spread) that the op database records cannot state."""

import math

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework.errors import AutogradError, DTypeError, ShapeError
from tideflow.framework.registry import Meta, get_op
from tideflow.framework.sbp import P, S
from tideflow.testing.sbp_sim import Call, check_signature


def _t(values, dtype=np.float64, **kw):
    return flow.tensor(np.asarray(values, dtype=dtype), **kw)


def _grad(fn, x):
    (g,) = flow.autograd.grad(fn(x), [x])
    return g.numpy()


# -- errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [flow.mean, flow.nanmean, flow.var, flow.std])
def test_float_only_reductions_reject_integers(fn):
    with pytest.raises(
        DTypeError, match=rf"{fn.__name__}: expected a floating point input, got int64"
    ):
        fn(flow.arange(6))


def test_mean_of_integers_with_a_float_dtype():
    out = flow.mean(flow.arange(4), dtype=flow.float64)
    assert out.dtype == flow.float64 and out.item() == 1.5
    with pytest.raises(DTypeError, match=r"mean: .*got int32"):
        flow.mean(flow.arange(4, dtype=flow.int32), dtype=flow.int32)


def test_repeated_dims():
    with pytest.raises(ShapeError, match=r"mean: dim \[0, -2\] names a dimension twice"):
        flow.mean(flow.zeros(2, 3), (0, -2))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda x: flow.sum(x, 2), r"sum: dimension 2 is out of range for a 2-d tensor"),
        (lambda x: flow.amax(x, -3), r"amax: dimension -3 is out of range"),
        (lambda x: flow.cumsum(x, 2), r"cumsum: dimension 2 is out of range"),
    ],
)
def test_dim_out_of_range(call, message):
    with pytest.raises(IndexError, match=message):
        call(flow.zeros(2, 3))


@pytest.mark.parametrize(
    ("call", "op"),
    [
        (lambda x: flow.amax(x, 1), "amax"),
        (lambda x: flow.amin(x), "amin"),
        (lambda x: flow.max(x, 1), "max"),
        (lambda x: flow.argmax(x), "argmax"),
        (lambda x: flow.argmin(x, 1), "argmin"),
        (lambda x: flow.median(x, 1), "median"),
        (lambda x: flow.mode(x, 1), "mode"),
    ],
)
def test_reductions_without_identity_reject_empty_dims(call, op):
    with pytest.raises(IndexError, match=rf"{op}: expected reduction dim \d to have non-zero size"):
        call(flow.zeros(2, 0))


def test_reductions_over_nonempty_dims_of_empty_tensors():
    x = flow.zeros(0, 3)
    assert flow.amax(x, 1).shape == (0,)
    assert flow.max(x, 1).indices.shape == (0,)
    assert flow.sum(x).item() == 0 and flow.prod(x).item() == 1
    assert math.isnan(flow.mean(x).item())
    assert flow.logsumexp(x, 0).tolist() == [-math.inf] * 3


def test_argmax_rejects_bool():
    with pytest.raises(DTypeError, match="argmax: bool inputs are not supported"):
        flow.argmax(flow.tensor([True, False]))


def test_var_arguments():
    x = _t([1.0, 2.0, 3.0, 4.0])
    assert flow.var(x, False).item() == pytest.approx(1.25)  # the (input, unbiased) overload
    assert flow.var(x, 0, False, True).shape == (1,)  # (input, dim, unbiased, keepdim)
    assert flow.var(x, correction=0.5).item() == pytest.approx(5 / 3.5)
    with pytest.raises(TypeError, match="var: pass either unbiased or correction, not both"):
        flow.var(x, unbiased=True, correction=1)
    with pytest.raises(TypeError, match="std: got unbiased twice"):
        flow.std(x, True, True)
    assert math.isnan(flow.var(_t([1.0])).item())  # one element, correction 1: 0 / 0


def test_prod_takes_one_dim():
    with pytest.raises(TypeError, match=r"prod: dim must be an int or None, got \(0, 1\)"):
        flow.prod(flow.ones(2, 2), (0, 1))


def test_norm_errors():
    with pytest.raises(DTypeError, match=r"linalg\.vector_norm: expected a floating point"):
        flow.linalg.vector_norm(flow.arange(3))
    with pytest.raises(TypeError, match=r"linalg\.vector_norm: ord must be a number, got 'fro'"):
        flow.linalg.vector_norm(flow.ones(3), "fro")
    with pytest.raises(ShapeError, match=r"vector_norm: cannot compute the inf norm over an empty"):
        flow.linalg.vector_norm(flow.zeros(0), math.inf)
    assert flow.linalg.vector_norm(flow.zeros(2, 0), math.inf, dim=0).shape == (0,)
    with pytest.raises(DTypeError, match="float64 cannot be converted to dtype=float32"):
        flow.linalg.vector_norm(flow.ones(3, dtype=flow.float64), dtype=flow.float32)
    with pytest.raises(ShapeError, match=r"matrix_norm: the input must have at least 2 dim.*\[3\]"):
        flow.linalg.matrix_norm(flow.ones(3))
    with pytest.raises(ValueError, match="matrix_norm: order 3 is not supported"):
        flow.linalg.matrix_norm(flow.ones(3, 3), 3)
    with pytest.raises(ShapeError, match=r"matrix_norm: dim \[0, -2\] names dimension 0 twice"):
        flow.linalg.matrix_norm(flow.ones(3, 3), dim=(0, -2))
    with pytest.raises(ShapeError, match=r"linalg.norm: .*1-D or 2-D input, got shape \[2, 2, 2\]"):
        flow.linalg.norm(flow.ones(2, 2, 2), 2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_singular_value_norms_refuse_half_precision_as_pytorch(dtype):
    torch = pytest.importorskip("torch")
    data = np.arange(6.0).reshape(2, 3)
    t, x = torch.tensor(data).to(getattr(torch, dtype)), flow.tensor(data).to(getattr(flow, dtype))
    calls = [
        lambda lib, a: lib.linalg.matrix_norm(a, "nuc"),
        lambda lib, a: lib.linalg.matrix_norm(a, -2, dtype=lib.float32),  # the input's dtype
        lambda lib, a: lib.linalg.norm(a, 2),
        lambda lib, a: lib.norm(a, "nuc"),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="matrix_norm: Low precision dtypes not supported"):
            call(torch, t)
        with pytest.raises(DTypeError, match=rf"^linalg\.matrix_norm: low precision .* {dtype}$"):
            call(flow, x)
    # the norms without singular values compute in half precision in both
    assert flow.linalg.matrix_norm(x, 1).dtype is getattr(flow, dtype)


# -- results --------------------------------------------------------------------------------
def test_named_results():
    x = _t([[1.0, 5.0, 5.0], [7.0, 2.0, 0.0]])
    values, indices = flow.max(x, 1)
    out = x.max(dim=1)
    assert type(out).__name__ == "max" and out.values.tolist() == values.tolist() == [5.0, 7.0]
    assert out.indices.tolist() == indices.tolist() == [1, 0]  # the first of tied maxima
    assert out.indices.dtype == flow.int64 and not out.indices.requires_grad
    assert flow.min(x, 0, keepdim=True).indices.tolist() == [[0, 1, 1]]
    assert type(flow.median(x, 1)).__name__ == "median"
    mm = flow.aminmax(x, dim=0)
    assert (mm.min.tolist(), mm.max.tolist()) == ([1.0, 2.0, 0.0], [7.0, 5.0, 5.0])
    cm = flow.cummax(_t([1.0, 3.0, 3.0, 2.0]), 0)
    assert (cm.values.tolist(), cm.indices.tolist()) == ([1, 3, 3, 3], [0, 1, 2, 2])


def test_max_of_two_tensors_is_elementwise():
    a, b = _t([1.0, 5.0]), _t([3.0, 2.0])
    assert flow.max(a, b).tolist() == [3.0, 5.0]
    assert flow.min(a, other=b).tolist() == [1.0, 2.0]
    assert a.max(b).tolist() == [3.0, 5.0]


def test_full_reductions_return_tensors():
    x = _t([[4.0, 1.0], [3.0, 2.0]])
    assert flow.max(x).item() == 4.0 and x.min().item() == 1.0
    assert flow.median(x).item() == 2.0  # the lower of the two middle values
    assert flow.argmax(x).item() == 0 and flow.argmax(x, keepdim=True).shape == (1, 1)


def test_mode_prefers_the_smallest_value_and_its_last_index():
    out = flow.mode(flow.tensor([[2, 1, 2, 1, 3], [0, 0, 4, 4, 4]]))
    assert out.values.tolist() == [1, 4] and out.indices.tolist() == [3, 4]


def test_dtypes_of_results():
    ints = flow.tensor([1, 2, 3], dtype=flow.int32)
    assert flow.sum(ints).dtype == flow.int64 and flow.prod(ints).dtype == flow.int64
    assert flow.cumsum(ints, 0).dtype == flow.int64
    assert flow.amax(ints).dtype == flow.int32
    assert flow.logsumexp(ints, 0).dtype == flow.float32
    assert flow.count_nonzero(ints).dtype == flow.int64
    assert flow.all(flow.tensor([1, 2], dtype=flow.uint8)).dtype == flow.uint8
    assert flow.any(ints).dtype == flow.bool


def test_half_precision_accumulates_in_float32():
    x = flow.full((4096,), 0.1, dtype=flow.float16)
    # float16 running sums stall at 256 (its spacing there exceeds 0.1)
    assert flow.sum(x).item() == pytest.approx(409.6, rel=1e-3)
    assert flow.mean(x).item() == pytest.approx(0.1, rel=1e-3)
    assert flow.cumsum(x, 0)[-1].item() == pytest.approx(409.6, rel=1e-3)


def test_dims_may_be_lists():
    x = flow.arange(24.0).reshape(2, 3, 4)
    assert flow.sum(x, [0, 2]).tolist() == flow.sum(x, (0, 2)).tolist()
    assert flow.amax(x, [-1, 0], keepdim=True).shape == (1, 3, 1)
    assert flow.linalg.vector_norm(x, dim=[1]).shape == (2, 4)


def test_methods_are_bound():
    x = _t([[1.0, -2.0], [3.0, 4.0]])
    assert x.sum(1).tolist() == [-1.0, 7.0]
    assert x.argmax(1, keepdim=True).tolist() == [[0], [1]]
    assert x.norm().item() == pytest.approx(math.sqrt(30))
    assert x.logsumexp(0).shape == (2,)
    assert x.std(0, correction=0).tolist() == [1.0, 3.0]
    assert x.count_nonzero(0).tolist() == [2, 2]
    assert flow.linalg.norm(x, 1).item() == 6.0


# -- in place -------------------------------------------------------------------------------
def test_cumsum_in_place():
    x = _t([1.0, 2.0, 3.0])
    version = x._version_count
    assert x.cumsum_(0) is x and x.tolist() == [1.0, 3.0, 6.0]
    assert x._version_count == version + 1
    with pytest.raises(AutogradError, match="cumprod_: a leaf Variable that requires grad"):
        _t([1.0, 2.0], requires_grad=True).cumprod_(0)


def test_in_place_change_of_a_saved_input_is_detected():
    x = _t([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 1
    out = flow.prod(y)
    y.mul_(2)
    with pytest.raises(AutogradError, match="ProdBackward0 saved 'input'"):
        out.backward()


# -- gradients at special points ------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([2.0, 3.0, 4.0], [12.0, 8.0, 6.0]),
        ([2.0, 0.0, 4.0], [0.0, 8.0, 0.0]),
        ([0.0, 3.0, 0.0], [0.0, 0.0, 0.0]),
    ],
)
def test_prod_gradient_with_zeros(values, expected):
    np.testing.assert_allclose(_grad(flow.prod, _t(values, requires_grad=True)), expected)


def test_prod_second_derivative_at_a_zero():
    x = _t([2.0, 0.0, 4.0], requires_grad=True)
    (g,) = flow.autograd.grad(flow.prod(x), [x], create_graph=True)
    (h,) = flow.autograd.grad(g[0], [x])  # d/dx (x1 * x2) = [0, x2, x1]
    np.testing.assert_allclose(h.numpy(), [0.0, 4.0, 0.0])


def test_cumprod_gradient_paths_agree():
    """The O(n) first-order form with zeros and the polynomial create_graph form."""
    rng = np.random.default_rng(0)
    values = rng.uniform(-2, 2, (3, 6))
    values[0, 2] = values[1, 0] = values[1, 4] = values[2, 5] = 0.0
    gy = flow.tensor(rng.standard_normal((3, 6)))
    grads = []
    for create_graph in (False, True):
        x = flow.tensor(values, requires_grad=True)
        (g,) = flow.autograd.grad(flow.cumprod(x, 1), [x], [gy], create_graph=create_graph)
        grads.append(g.detach().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-12)


def test_std_gradient_is_zero_where_std_is_zero():
    x = _t([[2.0, 2.0, 2.0], [1.0, 2.0, 3.0]], requires_grad=True)
    g = _grad(lambda t: flow.std(t, 1).sum(), x)
    np.testing.assert_allclose(g, [[0.0, 0.0, 0.0], [-0.5, 0.0, 0.5]])


def test_norm_gradient_at_zero_is_zero():
    for ord in (2, 1, 3, 0.5, math.inf):
        x = flow.zeros(3, dtype=flow.float64, requires_grad=True)
        np.testing.assert_array_equal(_grad(lambda t, o=ord: flow.linalg.vector_norm(t, o), x), 0)


def test_ties_share_the_gradient_evenly():
    x = _t([1.0, 3.0, 3.0, 0.0], requires_grad=True)
    np.testing.assert_allclose(_grad(flow.amax, x), [0.0, 0.5, 0.5, 0.0])
    np.testing.assert_allclose(_grad(flow.max, x), [0.0, 0.5, 0.5, 0.0])
    np.testing.assert_allclose(_grad(lambda t: flow.max(t, 0).values, x), [0.0, 1.0, 0.0, 0.0])
    np.testing.assert_allclose(
        _grad(flow.median, _t([1.0, 1.0, 5.0], requires_grad=True)), [0.5, 0.5, 0.0]
    )


def test_a_nan_maximum_takes_the_gradient():
    x = _t([1.0, math.nan, 2.0, math.nan], requires_grad=True)
    assert math.isnan(flow.amax(x).item())
    np.testing.assert_allclose(_grad(flow.amax, x), [0.0, 0.5, 0.0, 0.5])


def test_logsumexp_is_stable():
    x = _t([1000.0, 1000.0, -math.inf])
    assert flow.logsumexp(x, 0).item() == pytest.approx(1000 + math.log(2))
    assert flow.logsumexp(_t([math.inf, 0.0]), 0).item() == math.inf
    assert flow.logsumexp(_t([-math.inf, -math.inf]), 0).item() == -math.inf


def test_mean_over_a_split_axis_is_a_partial_sum():
    """S(reduced) -> P for mean: each rank divides its sum by the logical count."""
    op = get_op("mean")
    x = np.arange(15.0).reshape(5, 3)
    attrs = {"dim": 0, "keepdim": False, "dtype": None}
    (sig,) = [s for s in op.sbp(Meta((5, 3), flow.float64), **attrs) if s.ins == (S(0),)]
    assert sig.outs == (P,)
    call = Call(op, (x,), attrs, (x.mean(0),))
    assert check_signature(call, sig, n=3) is None  # shards of 2, 2 and 1 rows


@pytest.mark.parametrize("dtype", [flow.float16, flow.bfloat16])
def test_sum_to_size_accumulates_half_precision_in_float32(dtype):
    """A bias gradient of a half-precision activation, as PyTorch computes it: summed in
    float32 and rounded once (within one ulp of the exact sum; accumulated in the half dtype
    it is off by 13 ulps in float16, 200 in bfloat16)."""
    data = np.random.default_rng(3).random((4096, 8))
    x = flow.tensor(data, dtype=dtype)
    exact = x.double().numpy().sum(0, keepdims=True)
    got = x.sum_to_size(1, 8)
    assert got.dtype == dtype
    ulp = np.spacing(np.abs(exact).astype(np.float32))  # half dtypes: 2^13 or 2^16 times it
    ulp *= 2.0 ** (23 - (10 if dtype == flow.float16 else 7))
    assert (np.abs(got.double().numpy() - exact) <= ulp).all()
