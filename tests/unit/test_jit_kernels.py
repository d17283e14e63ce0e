"""Generated CPU kernels (backends/jit_kernels) against the NumPy kernels they stand in for:
same outputs (shapes, dtypes, in-place writes), values equal (optimizer updates: bit for bit)
or within a float sum's error bound, for float32 and float64, odd and empty shapes, NaN and
inf; bfloat16 through the float32 loops, rounded once; other dtypes and layouts go to the NumPy
kernel; TIDEFLOW_JIT=0 turns them all off."""

import math
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tideflow as flow
from tideflow.backends import jit
from tideflow.backends.jit_kernels import KERNELS
from tideflow.backends.jit_kernels import _math as jit_math
from tideflow.framework.registry import get_op, kernel_for, use_generated_kernels

pytestmark = pytest.mark.skipif(not jit.available(), reason="numba unavailable")

FLOATS = (np.float32, np.float64)


def _pair(name: str):
    """(generated kernel, NumPy kernel) of op `name`."""
    op = get_op(name)
    return op.kernels[jit.KERNEL_KEY], op.kernels["cpu"]


def _sum_tol(dtype, n: int) -> float:
    """Relative error bound of a float sum of n terms (either order), with headroom."""
    return float(np.finfo(dtype).eps) * (8 + 2 * n)


def _scale_loop(x, out):
    for i in range(x.size):
        out[i] = x[i] * np.float32(3.0)


def test_kernels_prefer_512_bit_vectors():
    """jit()'s kernels carry LLVM's "prefer-vector-width"="512": with AVX-512 their loops use
    zmm registers; numba's own compilations in the process keep numba's defaults."""
    import numba
    from llvmlite import binding

    x = np.arange(4096, dtype=np.float32)
    ours = numba.njit(pipeline_class=jit._wide_vector_compiler())(_scale_loop)
    theirs = numba.njit(_scale_loop)
    for fn in (ours, theirs):
        fn(x, np.empty_like(x))
    assert '"prefer-vector-width"="512"' in next(iter(ours.inspect_llvm().values()))
    assert "prefer-vector-width" not in next(iter(theirs.inspect_llvm().values()))
    if binding.get_host_cpu_features().get("avx512f"):
        assert "zmm" in next(iter(ours.inspect_asm().values()))


def test_kernel_cache_keyed_by_the_inlined_helpers(monkeypatch):
    """A cached kernel is found again only while vecmath and the kernels' sources are as they
    were: numba's own key sees the kernel's bytecode, not the helpers inlined into it."""
    import numba

    x = np.arange(16, dtype=np.float32)
    fn = numba.njit(_scale_loop)
    fn(x, np.empty_like(x))
    cache = jit._kernel_cache_class()(_scale_loop)
    key = cache._index_key(fn.signatures[0], fn.targetctx.codegen())
    assert key[-1] == jit._helpers_digest() and len(key[-1]) == 64
    monkeypatch.setattr(jit, "_helpers_digest", lambda: "vecmath edited")
    assert cache._index_key(fn.signatures[0], fn.targetctx.codegen()) != key


def test_registered_and_chosen():
    for name in KERNELS:
        assert kernel_for(get_op(name)) is get_op(name).kernels[jit.KERNEL_KEY]
    before = use_generated_kernels(False)
    try:
        for name in KERNELS:
            assert kernel_for(get_op(name)) is get_op(name).kernels["cpu"]
    finally:
        use_generated_kernels(before)


# -- optimizer updates: bit for bit ----------------------------------------------------------
def _states(rng, shape, dtype, n, nonneg=()):
    out = []
    for i in range(n):
        a = np.asarray(rng.standard_normal(shape), dtype)  # 0-d arrays stay arrays
        out.append(np.asarray(np.abs(a)) if i in nonneg else a)
    return out


def _same_update(name, arrays, absent, **attrs):
    """Run both kernels on copies; every operand (written in place) must be identical."""
    gen, ref = _pair(name)
    mine = [None if i in absent else a.copy() for i, a in enumerate(arrays)]
    theirs = [None if i in absent else a.copy() for i, a in enumerate(arrays)]
    assert gen(*mine, **attrs) is None
    with np.errstate(all="ignore"):
        ref(*theirs, **attrs)
    for a, b in zip(mine, theirs, strict=True):
        if a is not None:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1001,), (3, 5), (), (0,), (2, 3, 4)])
@pytest.mark.parametrize(
    "options",
    [
        dict(weight_decay=0.0, decoupled=False, amsgrad=False, maximize=False),
        dict(weight_decay=0.1, decoupled=False, amsgrad=False, maximize=True),
        dict(weight_decay=0.01, decoupled=True, amsgrad=False, maximize=False),
        dict(weight_decay=0.01, decoupled=True, amsgrad=True, maximize=True),
    ],
)
def test_adam(dtype, shape, options):
    rng = np.random.default_rng(0)
    arrays = _states(rng, shape, dtype, 5, nonneg=(3, 4))
    for beta1, step in ((0.9, 1), (0.9, 7), (0.6, 3)):  # 0.6: the other lerp formula
        attrs = dict(lr=1e-3, beta1=beta1, beta2=0.999, eps=1e-8, step=step, **options)
        _same_update("adam_update", arrays, () if options["amsgrad"] else (4,), **attrs)


@pytest.mark.parametrize("dtype", FLOATS)
def test_adam_nonfinite(dtype):
    rng = np.random.default_rng(1)
    arrays = _states(rng, (64,), dtype, 5, nonneg=(3, 4))
    arrays[1][:4] = [np.nan, np.inf, -np.inf, 1e30]
    arrays[4][4] = np.nan  # a NaN in max_exp_avg_sq stays (np.maximum)
    attrs = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, decoupled=True,
                 amsgrad=True, maximize=False, step=2)  # fmt: skip
    _same_update("adam_update", arrays, (), **attrs)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1001,), (3, 5), (), (0,)])
@pytest.mark.parametrize(
    "options",
    [
        dict(momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False),
        dict(momentum=0.9, dampening=0.0, weight_decay=1e-4, nesterov=False, maximize=False),
        dict(momentum=0.9, dampening=0.1, weight_decay=0.0, nesterov=False, maximize=True),
        dict(momentum=0.9, dampening=0.0, weight_decay=0.01, nesterov=True, maximize=False),
    ],
)
def test_sgd(dtype, shape, options):
    rng = np.random.default_rng(2)
    arrays = _states(rng, shape, dtype, 3)
    absent = () if options["momentum"] else (2,)
    for first in (True, False):
        _same_update("sgd_update", arrays, absent, lr=0.01, first=first, **options)


def test_updates_fall_back():
    """Half precision, mismatched dtypes and non-contiguous operands run the NumPy kernel,
    which also rejects mismatched shapes before writing anything."""
    rng = np.random.default_rng(3)
    attrs = dict(lr=0.01, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False, first=False)  # fmt: skip
    for arrays in (
        _states(rng, (7,), np.float16, 3),
        [a[::2] for a in _states(rng, (14,), np.float32, 3)],
    ):
        _same_update("sgd_update", arrays, (), **attrs)
    gen, _ = _pair("sgd_update")
    p, g, buf = _states(rng, (4,), np.float32, 3)
    before = p.copy()
    with pytest.raises(flow.framework.errors.Rejected):
        gen(p, g[:3], buf, **attrs)
    np.testing.assert_array_equal(p, before)


def test_optimizer_steps_match_numpy_kernels():
    """AdamW and SGD with momentum through the optimizers: generated == NumPy, bit for bit."""
    rng = np.random.default_rng(4)
    init = [rng.standard_normal(s).astype(np.float32) for s in ((33, 17), (17,))]
    grads = [[rng.standard_normal(a.shape).astype(np.float32) for a in init] for _ in range(3)]
    results = []
    for generated in (True, False):
        before = use_generated_kernels(generated)
        try:
            out = []
            for make in (
                lambda ps: flow.optim.AdamW(ps, lr=1e-2, amsgrad=True),
                lambda ps: flow.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
            ):
                params = [flow.nn.Parameter(flow.tensor(a.copy())) for a in init]
                opt = make(params)
                for step in grads:
                    for p, g in zip(params, step, strict=True):
                        p.grad = flow.tensor(g)
                    opt.step()
                out += [p.detach().numpy() for p in params]
            results.append(out)
        finally:
            use_generated_kernels(before)
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)


# -- layer_norm ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "shape, normalized",
    [((3, 5), (5,)), ((2, 3, 7), (3, 7)), ((4,), (4,)), ((0, 4), (4,)), ((2, 0), (0,)),
     ((9, 1), (1,)), ((5, 1000), (1000,))],
)  # fmt: skip
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_layer_norm(dtype, shape, normalized, affine):
    rng = np.random.default_rng(5)
    # NOTE: a large offset: the variance is taken of the centered row, as in NumPy.
    x = (rng.standard_normal(shape) * 3 + 1e3).astype(dtype)
    w = rng.standard_normal(normalized).astype(dtype) if affine in ("both", "weight") else None
    b = rng.standard_normal(normalized).astype(dtype) if affine in ("both", "bias") else None
    gen, ref = _pair("layer_norm")
    attrs = dict(normalized_shape=normalized, eps=1e-5)
    with np.errstate(all="ignore"):
        expected = ref(x, w, b, **attrs)
    got = gen(x, w, b, **attrs)
    n = math.prod(normalized)
    # The mean's error (relative to the row's magnitude, 1e3) over the std (3) carries into
    # every normalized value.
    tol = _sum_tol(dtype, n) * 1e3
    for a, e in zip(got, expected, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_nonfinite_and_fallback(dtype):
    gen, ref = _pair("layer_norm")
    x = np.random.default_rng(6).standard_normal((4, 8)).astype(dtype)
    x[0, 1], x[1, 2], x[2, 3] = np.nan, np.inf, -np.inf
    attrs = dict(normalized_shape=(8,), eps=1e-5)
    with np.errstate(all="ignore"):
        expected = ref(x, None, None, **attrs)
    for a, e in zip(gen(x, None, None, **attrs), expected, strict=True):
        np.testing.assert_allclose(a, e, rtol=_sum_tol(dtype, 8), atol=_sum_tol(dtype, 8))
    # non-contiguous, half precision, and a float32 weight for a half input: NumPy kernel
    for xs, w in ((x[:, ::2], None), (x.astype(np.float16), np.ones(8, np.float32))):
        ns = xs.shape[-1:]
        with np.errstate(all="ignore"):
            expected = ref(xs, w, None, normalized_shape=ns, eps=1e-5)
            got = gen(xs, w, None, normalized_shape=ns, eps=1e-5)
        for a, e in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, e)


def test_layer_norm_through_dispatch_and_autograd():
    rng = np.random.default_rng(7)
    data = rng.standard_normal((2, 6, 16)).astype(np.float32)
    results = []
    for generated in (True, False):
        before = use_generated_kernels(generated)
        try:
            x = flow.tensor(data, requires_grad=True)
            ln = flow.nn.LayerNorm(16)
            y = ln(x)
            (y * y).sum().backward()
            results.append((y.detach().numpy(), x.grad.numpy(), ln.weight.grad.numpy()))
        finally:
            use_generated_kernels(before)
    tol = _sum_tol(np.float32, 16) * 16
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# -- layer_norm_backward -----------------------------------------------------------------------
def _layer_norm_backward_operands(rng, shape, normalized, dtype, weight, stat_grads):
    fwd = get_op("layer_norm").kernels["cpu"]
    x = (rng.standard_normal(shape) * 3 + 10).astype(dtype)
    w = rng.standard_normal(normalized).astype(dtype) if weight else None
    _, mean, rstd = fwd(x, w, None, normalized_shape=normalized, eps=1e-5)
    gy = rng.standard_normal(shape).astype(dtype)
    gm, gr = (rng.standard_normal(mean.shape).astype(dtype) for _ in range(2))
    return gy, x, w, mean, rstd, (gm if stat_grads else None), (gr if stat_grads else None)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "shape, normalized",
    [((3, 5), (5,)), ((2, 3, 7), (3, 7)), ((4,), (4,)), ((0, 4), (4,)), ((2, 0), (0,)),
     ((9, 1), (1,)), ((64, 256), (256,))],
)  # fmt: skip
@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("stat_grads", [True, False])
def test_layer_norm_backward(dtype, shape, normalized, weight, stat_grads):
    rng = np.random.default_rng(11)
    args = _layer_norm_backward_operands(rng, shape, normalized, dtype, weight, stat_grads)
    gen, ref = _pair("layer_norm_backward")
    with np.errstate(all="ignore"):
        expected = ref(*args, normalized_shape=normalized)
    got = gen(*args, normalized_shape=normalized)
    n = math.prod(normalized)
    rows = math.prod(shape) // max(n, 1)
    gy, w, rstd = args[0], args[2], args[4]
    # gx's terms (g * rstd minus per-row coefficients) cancel: its error is relative to them
    terms = np.abs(gy * (1 if w is None else w) * rstd).max(initial=0)
    scales = (terms, np.abs(expected[1]).max(initial=0), np.abs(expected[2]).max(initial=0))
    for a, e, count, scale in zip(got, expected, (n, rows, rows), scales, strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype
        tol = _sum_tol(dtype, count) * max(1.0, float(scale))
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_backward_nonfinite_and_fallback(dtype):
    rng = np.random.default_rng(12)
    gy, x, w, mean, rstd, _, _ = _layer_norm_backward_operands(rng, (4, 8), (8,), dtype, 1, 0)
    gy[0, 1], gy[1, 2], x[2, 3] = np.nan, np.inf, -np.inf
    gen, ref = _pair("layer_norm_backward")
    with np.errstate(all="ignore"):
        expected = ref(gy, x, w, mean, rstd, None, None, normalized_shape=(8,))
        got = gen(gy, x, w, mean, rstd, None, None, normalized_shape=(8,))
    tol = _sum_tol(dtype, 8) * 10
    for a, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e))
        np.testing.assert_allclose(a, e, rtol=tol, atol=tol)
    # half precision (float32 statistics) goes to the NumPy kernel
    h = (gy.astype(np.float16), x.astype(np.float16), None, mean.astype(np.float32))
    h += (rstd.astype(np.float32), None, None)
    with np.errstate(all="ignore"):
        got, expected = gen(*h, normalized_shape=(8,)), ref(*h, normalized_shape=(8,))
        for a, e in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, e)


def test_layer_norm_backward_through_autograd():
    """Double backward through the fused forward and backward agrees with the NumPy kernels."""
    rng = np.random.default_rng(13)
    data = rng.standard_normal((3, 5, 16))
    results = []
    for generated in (True, False):
        before = use_generated_kernels(generated)
        try:
            x = flow.tensor(data, requires_grad=True)
            ln = flow.nn.LayerNorm(16).double()
            (gx,) = flow.autograd.grad((ln(x) ** 3).sum(), (x,), create_graph=True)
            (gx * gx).sum().backward()
            results.append((gx.detach().numpy(), x.grad.numpy(), ln.weight.grad.numpy()))
        finally:
            use_generated_kernels(before)
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# -- softmax family --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "safe_softmax"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "shape", [(3, 5), (2, 3, 7), (4,), (0, 4), (2, 0), (), (6, 1), (3, 48), (3, 500)]
)
def test_softmax(name, dtype, shape):
    rng = np.random.default_rng(8)
    x = np.asarray(rng.standard_normal(shape) * 20, dtype)
    if len(shape) == 2 and shape[0] >= 3 and shape[1] >= 2:
        x[0, 0] = -np.inf
        x[1] = -np.inf  # a fully masked row: nan (safe_softmax: 0)
        x[2, 1] = np.nan
    gen, ref = _pair(name)
    dim = x.ndim - 1 if x.ndim else 0
    with np.errstate(all="ignore"):
        expected = ref(x, dim=dim)
    got = gen(x, dim=dim)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    n = shape[-1] if shape else 1
    # log_softmax: |x - max| reaches ~150 here, the log-sum-exp's error is relative to 1
    scale = 200 if name == "log_softmax" else 1
    tol = _sum_tol(dtype, n) * scale
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_other_axes_and_large_go_to_numpy(name):
    gen, ref = _pair(name)
    x = np.random.default_rng(9).standard_normal((5, 7, 3)).astype(np.float32)
    np.testing.assert_array_equal(gen(x, dim=1), ref(x, dim=1))
    if not jit_math.VECTORIZED:  # float64 over the scalar-exp limit (float32: vecmath's exp)
        big = np.random.default_rng(9).standard_normal((8, 1024))
        np.testing.assert_array_equal(gen(big, dim=1), ref(big, dim=1))
    half = x.astype(np.float16)
    np.testing.assert_array_equal(gen(half, dim=2), ref(half, dim=2))


@pytest.mark.parametrize("name", ["softmax_backward", "log_softmax_backward"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 7), (4,), (0, 4), (2, 0), (6, 1), (3, 500)])
def test_softmax_backward(name, dtype, shape):
    rng = np.random.default_rng(14)
    gy = rng.standard_normal(shape).astype(dtype)
    low, high = (-30.0, 0.0) if name == "log_softmax_backward" else (0.0, 1.0)
    y = rng.uniform(low, high, shape).astype(dtype)
    if len(shape) == 2 and shape[0] >= 3 and shape[1] >= 2:
        gy[0, 0] = np.nan
        gy[1, 1] = np.inf
        y[2, 0] = -np.inf  # log_softmax of a masked entry: exp gives 0
    gen, ref = _pair(name)
    with np.errstate(all="ignore"):
        expected = ref(gy, y, dim=-1)
        got = gen(gy, y, dim=-1)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    # exp32's error (a few ulps) scales the row sum in log_softmax_backward's product
    tol = _sum_tol(dtype, shape[-1]) * 4
    scale = np.abs(np.nan_to_num(expected, posinf=0, neginf=0)).max(initial=0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol * max(1.0, float(scale)))


@pytest.mark.parametrize("name", ["softmax_backward", "log_softmax_backward"])
def test_softmax_backward_other_axes_and_halves_go_to_numpy(name):
    gen, ref = _pair(name)
    rng = np.random.default_rng(15)
    gy, y = (rng.standard_normal((5, 7, 3)).astype(np.float32) for _ in range(2))
    np.testing.assert_array_equal(gen(gy, y, dim=1), ref(gy, y, dim=1))
    h = (gy.astype(np.float16), y.astype(np.float16))
    np.testing.assert_array_equal(gen(*h, dim=2), ref(*h, dim=2))
    # float64 log_softmax_backward above the scalar-exp limit: NumPy's exp loop is faster
    big = (rng.standard_normal((8, 1024)), rng.standard_normal((8, 1024)))
    if name == "log_softmax_backward" and not jit_math.VECTORIZED:
        np.testing.assert_array_equal(gen(*big, dim=1), ref(*big, dim=1))


# -- gelu ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(dtype, approximate):
    gen, ref = _pair("gelu")
    x = (np.random.default_rng(10).standard_normal(1001) * 5).astype(dtype)
    x[:4] = [np.nan, np.inf, -np.inf, 0.0]
    with np.errstate(all="ignore"):
        expected = ref(x, approximate=approximate)
    got = gen(x, approximate=approximate)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    if dtype == np.float64:  # float64 runs the NumPy kernel
        np.testing.assert_array_equal(got, expected)
        return
    eps = float(np.finfo(dtype).eps)
    xf = np.nan_to_num(x.astype(np.float64), posinf=0, neginf=0)
    # erfc's relative error grows like 2 z^2 eps in the tail (z = -x / sqrt 2, from the
    # rounding of its argument); the tanh form's 1 + tanh cancels: absolute eps * |x|
    tol = eps * (4 + xf * xf) * np.abs(np.nan_to_num(expected.astype(np.float64)))
    # where Phi(x) is denormal (x < -13) its error is absolute, a few of the smallest
    # denormals, which x / 2 scales
    tol += 4 * float(np.finfo(dtype).smallest_subnormal) * np.abs(xf)
    if approximate == "tanh":
        tol += 2 * eps * np.abs(xf)
    diff = np.abs(got.astype(np.float64) - expected)
    ok = (diff <= tol) | (np.isnan(got) & np.isnan(expected)) | (got == expected)
    assert ok.all(), (x[~ok], got[~ok], expected[~ok])
    ints = np.arange(5)
    with pytest.raises(flow.framework.errors.TideflowError):
        gen(ints, approximate=approximate)


def test_gelu_float32_within_ulps_of_float64():
    """The erf form against x Phi(x) in float64 over every binade and where Phi is tiny,
    denormal results included: vecmath.gelu32's bound, 6 ulps."""
    gen, _ = _pair("gelu")
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([bits.view(np.float32), rng.uniform(-15, 15, 200_000).astype(np.float32)])
    x = x[np.isfinite(x)]
    x64 = x.astype(np.float64)
    want = x64 * np.array([math.erfc(-v / math.sqrt(2)) / 2 for v in x64.tolist()])
    got = gen(x, approximate="none").astype(np.float64)
    tol = 6 * np.spacing(np.abs(want.astype(np.float32))).astype(np.float64)
    assert (np.abs(got - want) <= tol).all()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(1001,), (3, 0), (), (7, 33)])
def test_gelu_backward(dtype, approximate, shape):
    gen, ref = _pair("gelu_backward")
    rng = np.random.default_rng(16)
    x = np.asarray(rng.standard_normal(shape) * 5, dtype)
    gy = np.asarray(rng.standard_normal(shape), dtype)
    if x.size > 8:
        x.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, 0.0, -12.0]
        gy.reshape(-1)[5:7] = [np.inf, np.nan]
    with np.errstate(all="ignore"):
        expected = ref(gy, x, approximate=approximate)
        got = gen(gy, x, approximate=approximate)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    # gelu' is within [-0.13, 1.13]: vecmath's few-ulp errors are absolute, relative to |gy|
    eps = float(np.finfo(dtype).eps)
    finite = np.isfinite(expected)
    diff = np.abs(got[finite].astype(np.float64) - expected[finite])
    assert (diff <= 16 * eps * (np.abs(gy[finite]) + np.abs(expected[finite]))).all()


def test_gelu_backward_falls_back_and_runs_in_autograd():
    gen, ref = _pair("gelu_backward")
    rng = np.random.default_rng(17)
    h = (rng.standard_normal(9).astype(np.float16), rng.standard_normal(9).astype(np.float16))
    np.testing.assert_array_equal(gen(*h, approximate="none"), ref(*h, approximate="none"))
    d = (rng.standard_normal(9), rng.standard_normal(9))
    if not jit_math.VECTORIZED:  # float64's tanh form: NumPy's loop is faster
        np.testing.assert_array_equal(gen(*d, approximate="tanh"), ref(*d, approximate="tanh"))
    data = rng.standard_normal((4, 64)).astype(np.float32)
    grads = []
    for generated in (True, False):
        before = use_generated_kernels(generated)
        try:
            x = flow.tensor(data, requires_grad=True)
            (flow.nn.functional.gelu(x) ** 2).sum().backward()
            grads.append(x.grad.numpy())
        finally:
            use_generated_kernels(before)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


# -- without numba ---------------------------------------------------------------------------
def test_tideflow_jit_0_uses_numpy_kernels():
    code = (
        "import sys, numpy as np, tideflow as flow\n"
        "from tideflow.framework.registry import get_op, kernel_for\n"
        "names = ['adam_update', 'sgd_update', 'layer_norm', 'softmax', 'log_softmax',\n"
        "         'layer_norm_backward', 'softmax_backward', 'log_softmax_backward']\n"
        "assert all(kernel_for(get_op(n)) is get_op(n).kernels['cpu'] for n in names)\n"
        "p = flow.nn.Parameter(flow.ones(3)); p.grad = flow.ones(3)\n"
        "flow.optim.AdamW([p], lr=0.1).step()\n"
        "print(float(p.sum()), 'numba' in sys.modules)\n"
    )
    env = {**os.environ, "TIDEFLOW_JIT": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()  # fmt: skip
    assert math.isclose(float(out[0]), 3 * (1 - 0.1 * 0.01) - 3 * 0.1, rel_tol=1e-5)
    assert out[1] == "False"  # numba never imported


# -- bfloat16 through float32 ---------------------------------------------------------------------
def test_bfloat16_casts_match_ml_dtypes_on_every_value():
    gen, ref = _pair("cast")
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)
    wide = gen(every, dtype=flow.float32)
    np.testing.assert_array_equal(wide, ref(every, dtype=flow.float32))
    # float32 values: random bit patterns (NaNs, infs, denormals included), exact ties
    # between two bfloat16s (nearest even decides), values that round up to inf
    rng = np.random.default_rng(21)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    ties = (np.arange(2**16, dtype=np.uint32) << 16) | 0x8000
    x = np.concatenate([bits, ties]).view(np.float32)
    x = np.concatenate([x, np.float32([3.4e38, -3.4e38, np.inf, -np.inf, 0.0, -0.0])])
    narrow = gen(x, dtype=flow.bfloat16)
    want = ref(x, dtype=flow.bfloat16)
    assert narrow.dtype == want.dtype
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(narrow.astype(np.float32)), nan)
    np.testing.assert_array_equal(narrow.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    # other conversions are NumPy's
    np.testing.assert_array_equal(gen(x[:10], dtype=flow.float64), ref(x[:10], dtype=flow.float64))


@pytest.mark.parametrize(
    ("name", "attrs", "n_in"),
    [
        ("gelu", {"approximate": "none"}, 1),
        ("gelu_backward", {"approximate": "none"}, 2),
        ("gelu_backward", {"approximate": "tanh"}, 2),
        ("softmax", {"dim": -1}, 1),
        ("log_softmax_backward", {"dim": -1}, 2),
        ("sum_to_size", {"shape": (50,)}, 1),
        ("relu", {}, 1),
    ],
)
def test_bfloat16_operands_compute_in_float32_and_round_once(name, attrs, n_in):
    gen, ref = _pair(name)
    rng = np.random.default_rng(22)
    args = [(rng.standard_normal((6, 50)) * 3).astype(ml_dtypes.bfloat16) for _ in range(n_in)]
    got = gen(*args, **attrs)
    assert got.dtype == ml_dtypes.bfloat16
    # the float32 loop, rounded once, against the NumPy kernel's float32 result rounded once:
    # the two float32 results differ by the loops' float32 error (a few ulps of the operands'
    # scale: the tanh form cancels), so they round alike or one bfloat16 ulp apart
    want = ref(*args, **attrs).astype(np.float32)
    ulp = np.spacing(np.abs(want).astype(ml_dtypes.bfloat16)).astype(np.float32)
    scale = sum(np.abs(a.astype(np.float32)) for a in args) + np.abs(want)
    tol = ulp + 16 * float(np.finfo(np.float32).eps) * scale
    assert (np.abs(got.astype(np.float32) - want) <= tol).all()
    halves = [a.astype(np.float16) for a in args]  # float16: the NumPy kernel
    np.testing.assert_array_equal(gen(*halves, **attrs), ref(*halves, **attrs))


@pytest.mark.parametrize(("name", "n_in"), [("gelu", 1), ("gelu_backward", 2)])
@pytest.mark.parametrize("shape", [(7, 33), (), (3, 0)])
def test_bfloat16_gelu_erf_loop_is_the_float32_loop_rounded_once(name, n_in, shape):
    """The erf form's one-pass bfloat16 loops give the bits of widen -> float32 kernel ->
    round, special values included."""
    gen, _ = _pair(name)
    rng = np.random.default_rng(23)
    args = [np.asarray(rng.standard_normal(shape) * 5, np.float32) for _ in range(n_in)]
    if args[-1].size > 5:
        args[-1].reshape(-1)[:5] = [np.nan, np.inf, -np.inf, -0.0, -14.0]
    halves = [a.astype(ml_dtypes.bfloat16) for a in args]
    got = gen(*halves, approximate="none")
    assert got.dtype == ml_dtypes.bfloat16 and got.shape == shape
    want = gen(*(h.astype(np.float32) for h in halves), approximate="none")
    nan = np.isnan(want)  # (NaN's sign bit aside)
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    rounded = want.astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], rounded.view(np.uint16)[~nan])


def test_bfloat16_max_pool_and_its_scatter_run_their_numpy_kernels_in_float32():
    rng = np.random.default_rng(23)
    x = rng.standard_normal((2, 3, 8, 8)).astype(ml_dtypes.bfloat16)
    attrs = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1))
    gen, ref = _pair("max_pool")
    (values, indices), (want_values, want_indices) = (
        f(x, **attrs, ceil_mode=False) for f in (gen, ref)
    )
    assert values.dtype == ml_dtypes.bfloat16 and indices.dtype == np.int64
    np.testing.assert_array_equal(values.view(np.uint16), want_values.view(np.uint16))
    np.testing.assert_array_equal(indices, want_indices)
    gen, ref = _pair("pool_scatter")
    g = rng.standard_normal(values.shape).astype(ml_dtypes.bfloat16)
    got, want = (f(g, indices, size=(8, 8)) for f in (gen, ref))
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
