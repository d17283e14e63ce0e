"""The fused attention op's kernels (NumPy's and the generated one) and its backward against
PyTorch's scaled_dot_product_attention, computed in float64 from the same values: causal and
not, one query row, rows that straddle tiles, more rows than keys and more keys than rows,
one feature, zero to three batch dims, heads as transposed views of (B, T, H, D), also with
rows strided over a wider projection. Tolerances grow with the dtype's epsilon and the
longest sum behind each value."""

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.functional as F
from tideflow.backends import jit
from tideflow.framework.errors import Rejected
from tideflow.framework.registry import get_op

torch = pytest.importorskip("torch")

BACKENDS = [
    "cpu",
    pytest.param(
        jit.KERNEL_KEY,
        marks=pytest.mark.skipif(not jit.available(), reason="numba unavailable"),
    ),
]

# (batch dims, query rows, keys, features, value features)
SHAPES = [
    ((), 1, 1, 1, 1),
    ((2,), 33, 33, 8, 5),
    ((1, 2), 130, 130, 16, 16),
    ((2, 3), 5, 9, 4, 3),  # causal: keys 5..8 are seen by no row
    ((3, 1, 2), 40, 6, 3, 2),  # more rows than keys
    ((8, 4), 128, 128, 64, 64),  # the GPT benchmark's heads
]


def _kernels(backend: str):
    return get_op("attention").kernels[backend], get_op("attention_backward").kernels[backend]


def _operands(rng, batch, rows, keys, d, dv, dtype, layout="contiguous"):
    """q, k, v, and an output gradient, laid out as attention heads come: "contiguous";
    "heads", each (..., H, T, D) a transposed view of a (..., T, H, D) array, as heads split
    from a projection; "packed", besides that, rows strided over a wider array (a slice of a
    fused query/key/value projection)."""

    def make(n, features):
        shape = (*batch, n, features)
        if layout == "contiguous" or not batch:
            return rng.standard_normal(shape).astype(dtype)
        stored = (*shape[:-3], n, shape[-3], features + (3 if layout == "packed" else 0))
        heads = rng.standard_normal(stored).astype(dtype).swapaxes(-2, -3)
        return heads[..., :features]

    return make(rows, d), make(keys, d), make(keys, dv), make(rows, dv)


def _torch_reference(q, k, v, g, scale, causal):
    """out, probs and the gradients of q, k, v in float64."""
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(
        tq, tk, tv, is_causal=causal, scale=scale
    )
    out.backward(torch.tensor(g, dtype=torch.float64))
    scores = (tq @ tk.transpose(-1, -2)) * scale
    if causal:
        seen = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
        scores = scores.masked_fill(~seen, -torch.inf)
    probs = torch.softmax(scores, -1)
    return [t.detach().numpy() for t in (out, probs, tq.grad, tk.grad, tv.grad)]


def _close(actual, expected, dtype, n_terms: int, what: str):
    """|actual - expected| within a sum of n_terms' rounding error, relative to the largest
    magnitude of the expected values."""
    assert actual.shape == expected.shape, what
    assert actual.dtype == dtype, what
    bound = np.finfo(dtype).eps * (8 + 2 * n_terms) * max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(actual, expected, rtol=0, atol=bound, err_msg=what)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["contiguous", "heads", "packed"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_forward_and_backward_match_torch(backend, dtype, causal, layout, shape):
    batch, rows, keys, d, dv = shape
    rng = np.random.default_rng(len(batch) * 1000 + rows)
    q, k, v, g = _operands(rng, batch, rows, keys, d, dv, dtype, layout)
    scale = 0.7 / np.sqrt(d)
    forward, backward = _kernels(backend)
    out, probs = forward(q, k, v, scale=scale, is_causal=causal)
    dq, dk, dv_ = backward(g, q, k, v, probs, scale=scale, is_causal=causal)
    ref_out, ref_probs, ref_dq, ref_dk, ref_dv = _torch_reference(q, k, v, g, scale, causal)
    _close(probs, ref_probs, dtype, d, "probs")
    _close(out, ref_out, dtype, d + keys, "out")
    # dS sums over value features; dq over keys, dk and dv over rows
    _close(dq, ref_dq, dtype, dv + keys + d, "grad query")
    _close(dk, ref_dk, dtype, dv + keys + rows, "grad key")
    _close(dv_, ref_dv, dtype, keys + rows, "grad value")


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_keep_the_operands_memory_order(backend):
    """Heads split from (B, T, H, D) come back in that order: merging them is a view."""
    rng = np.random.default_rng(0)
    q, k, v, g = _operands(rng, (2, 3), 7, 7, 4, 4, np.float32, layout="heads")
    forward, backward = _kernels(backend)
    out, probs = forward(q, k, v, scale=0.5, is_causal=True)
    assert out.swapaxes(-2, -3).flags.c_contiguous
    for grad in backward(g, q, k, v, probs, scale=0.5, is_causal=True):
        assert grad.swapaxes(-2, -3).flags.c_contiguous


@pytest.mark.skipif(not jit.available(), reason="numba unavailable")
@pytest.mark.parametrize("causal", [False, True])
def test_generated_kernel_propagates_nan_as_numpy_does(causal):
    """A NaN makes NaN what depends on it. With causal attention the generated kernel's
    probabilities of keys a row does not see stay 0 in a NaN row (NumPy's are NaN), so its
    gradients are compared without the causal mask only."""
    rng = np.random.default_rng(1)
    q, k, v, g = _operands(rng, (2,), 37, 37, 4, 3, np.float32, layout="contiguous")
    q[0, 3, 1] = np.nan  # one query row
    k[1, 20, 0] = np.nan  # one key: every row that sees it
    v[0, 30, 2] = np.nan
    results = {}
    for backend in ("cpu", jit.KERNEL_KEY):
        forward, backward = _kernels(backend)
        with np.errstate(invalid="ignore"):
            out, probs = forward(q, k, v, scale=0.5, is_causal=causal)
            grads = backward(g, q, k, v, probs, scale=0.5, is_causal=causal)
            results[backend] = (out,) if causal else (out, probs, *grads)
    for ours, numpys in zip(results[jit.KERNEL_KEY], results["cpu"], strict=True):
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(numpys))


@pytest.mark.skipif(not jit.available(), reason="numba unavailable")
def test_generated_kernel_leaves_float64_and_mismatched_operands_to_numpy():
    rng = np.random.default_rng(2)
    q, k, v, _ = _operands(rng, (2,), 5, 6, 3, 2, np.float64, layout="contiguous")
    forward, _ = _kernels(jit.KERNEL_KEY)
    numpy_forward, _ = _kernels("cpu")
    for a, b in zip(forward(q, k, v, scale=0.5, is_causal=False),
                    numpy_forward(q, k, v, scale=0.5, is_causal=False), strict=True):  # fmt: skip
        np.testing.assert_array_equal(a, b)
    q32, k32 = q.astype(np.float32), k[:1].astype(np.float32)
    with pytest.raises(Rejected, match="attention"):
        forward(q32, k32, v.astype(np.float32), scale=0.5, is_causal=False)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention_through_autograd(dtype, causal):
    """The public function, eager autograd: bfloat16 is computed in float32, rounded once."""
    rng = np.random.default_rng(3)
    q, k, v, g = _operands(rng, (2, 4), 33, 33, 16, 16, np.float32, layout="heads")
    ours = [flow.tensor(a).to(getattr(flow, dtype)).requires_grad_() for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ours, is_causal=causal)
    out.backward(flow.tensor(g).to(getattr(flow, dtype)))
    theirs = [torch.tensor(a).to(getattr(torch, dtype)).requires_grad_() for a in (q, k, v)]
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, is_causal=causal)
    ref.backward(torch.tensor(g).to(getattr(torch, dtype)))
    # one rounding to the output dtype on each side, from float32 results
    eps = 2.0**-7 if dtype == "bfloat16" else np.finfo(np.float32).eps * (8 + 2 * 33)
    for mine, expected in zip([out, *(t.grad for t in ours)],
                              [ref, *(t.grad for t in theirs)], strict=True):  # fmt: skip
        expected = expected.detach().float().numpy()
        actual = mine.detach().float().numpy()
        np.testing.assert_allclose(actual, expected, rtol=0, atol=eps * np.abs(expected).max())
