"""The AVX512-BF16 GEMM (backends/bf16_gemm.py) and the ops that use it for bfloat16.

Bounds: bfloat16 inputs are exact in float64 and their products exact in float32 (8-bit
significands), so the kernel's only error is float32 summation over K terms:
|c - ref| <= (K + 1) u32 (|a| @ |b|) with u32 = 2^-24. An op rounds that to bfloat16 once,
adding half a bfloat16 ulp of the result (2^-8 relative).
"""

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.functional as F
from tideflow.backends import bf16_gemm

BF16 = bf16_gemm.BF16
U32, U16 = 2.0**-24, 2.0**-8  # unit roundoff of float32 and of bfloat16 (8-bit significand)

needs_kernel = pytest.mark.skipif(
    not bf16_gemm.available(), reason="no avx512_bf16 CPU (or llvmlite) here"
)


def _bf16(rng, *shape):
    return rng.standard_normal(shape).astype(BF16)


def _bound(a, b, rounded: bool):
    """Allowed |result - float64 product| elementwise."""
    a64, b64 = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    k = a.shape[-1]
    bound = (k + 1) * U32 * np.matmul(a64, b64)
    if rounded:
        exact = np.abs(np.matmul(a.astype(np.float64), b.astype(np.float64)))
        bound = bound + U16 * (exact + bound)
    return bound + 1e-30


@needs_kernel
@pytest.mark.parametrize(
    ("m", "k", "n"),
    [(1, 1, 1), (5, 3, 7), (12, 2, 32), (13, 33, 31), (37, 129, 65), (100, 300, 70)],
)
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_gemm_within_float32_summation(m, k, n, ta, tb):
    rng = np.random.default_rng(m * k * n)
    a = _bf16(rng, k, m).T if ta else _bf16(rng, m, k)  # transposed views, not copies
    b = _bf16(rng, n, k).T if tb else _bf16(rng, k, n)
    c = bf16_gemm.bf16_gemm(a, b)
    assert c.dtype == np.float32 and c.shape == (m, n)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(c - ref) <= _bound(a, b, rounded=False))


@needs_kernel
def test_gemm_long_k_crosses_k_blocks():
    # K = 600 pairs > one k block of 128 pairs: later blocks add into C instead of storing
    rng = np.random.default_rng(0)
    a, b = _bf16(rng, 24, 1200), _bf16(rng, 1200, 64)
    c = bf16_gemm.bf16_gemm(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.all(np.abs(c - ref) <= _bound(a, b, rounded=False))


@needs_kernel
@pytest.mark.parametrize(
    ("sa", "sb"), [((3, 20, 40), (3, 40, 50)), ((2, 3, 20, 40), (40, 50)), ((20, 40), (4, 40, 9))]
)
def test_gemm_batches_broadcast(sa, sb):
    rng = np.random.default_rng(1)
    a, b = _bf16(rng, *sa), _bf16(rng, *sb)
    c = bf16_gemm.bf16_gemm(a, b)
    ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert c.shape == ref.shape
    assert np.all(np.abs(c - ref) <= _bound(a, b, rounded=False))


def test_gemm_zero_k():
    if not bf16_gemm.available():
        pytest.skip("no avx512_bf16 kernel")
    c = bf16_gemm.bf16_gemm(np.zeros((3, 0), BF16), np.zeros((0, 4), BF16))
    assert c.shape == (3, 4) and not c.any()


@pytest.fixture(params=[True, False], ids=["kernel", "fallback"])
def path(request, monkeypatch):
    """Each op test runs on the kernel (where the CPU has it) and on the float32 path; with
    the kernel on, the op must really call it (counted)."""
    if request.param and not bf16_gemm.available():
        pytest.skip("no avx512_bf16 kernel")
    old = bf16_gemm.set_enabled(request.param)
    calls = []
    real = bf16_gemm.bf16_gemm

    def counted(a, b):
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(bf16_gemm, "bf16_gemm", counted)
    yield request.param, calls
    bf16_gemm.set_enabled(old)
    if request.param:
        assert calls, "the bfloat16 op did not use the kernel"
    else:
        assert not calls


def _tensor(x):
    return flow.tensor(x.astype(np.float32)).to(flow.bfloat16)


def _check(out, ref64, bound):
    got = out.detach().float().numpy().astype(np.float64)
    assert out.dtype == flow.bfloat16
    assert np.all(np.abs(got - ref64) <= bound)


@pytest.mark.parametrize(("sa", "sb"), [((64, 96), (96, 80)), ((2, 3, 50, 70), (70, 40))])
def test_matmul_bf16(path, sa, sb):
    rng = np.random.default_rng(2)
    a, b = _bf16(rng, *sa), _bf16(rng, *sb)
    out = flow.matmul(_tensor(a), _tensor(b))
    _check(out, np.matmul(a.astype(np.float64), b.astype(np.float64)), _bound(a, b, True))


def test_bmm_and_grads_bf16(path):
    rng = np.random.default_rng(3)
    a, b = _bf16(rng, 4, 48, 64), _bf16(rng, 4, 64, 56)
    ta, tb = _tensor(a).requires_grad_(), _tensor(b).requires_grad_()
    out = flow.bmm(ta, tb)
    _check(out, np.matmul(a.astype(np.float64), b.astype(np.float64)), _bound(a, b, True))
    gy = _bf16(rng, 4, 48, 56)
    out.backward(_tensor(gy))
    bt = np.swapaxes(b, -1, -2)  # grad_a = gy @ b^T: a transposed operand of the kernel
    _check(ta.grad, np.matmul(gy.astype(np.float64), bt.astype(np.float64)), _bound(gy, bt, True))


def test_linear_bf16(path):
    rng = np.random.default_rng(4)
    x, w, bias = _bf16(rng, 3, 40, 64), _bf16(rng, 48, 64), _bf16(rng, 48)
    out = F.linear(_tensor(x), _tensor(w), _tensor(bias))
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + bias.astype(np.float64)
    bound = _bound(x, w.T, True) + U16 * np.abs(bias.astype(np.float64)) + U32 * np.abs(ref)
    _check(out, ref, bound)


def test_conv2d_bf16(path):
    rng = np.random.default_rng(5)
    x, w = _bf16(rng, 2, 8, 12, 12), _bf16(rng, 16, 8, 3, 3)
    out = F.conv2d(_tensor(x), _tensor(w), padding=1)
    ref = F.conv2d(flow.tensor(x.astype(np.float64)), flow.tensor(w.astype(np.float64)), padding=1)
    # as a GEMM: K = 8 * 3 * 3 terms; the |x| * |w| sum is the conv of the absolute values
    abs_sum = F.conv2d(
        flow.tensor(np.abs(x.astype(np.float64))),
        flow.tensor(np.abs(w.astype(np.float64))),
        padding=1,
    ).numpy()
    bound = (72 + 1) * U32 * abs_sum
    ref = ref.numpy()
    _check(out, ref, bound + U16 * (np.abs(ref) + bound) + 1e-30)
