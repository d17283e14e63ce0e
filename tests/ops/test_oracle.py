"""Every op database record against PyTorch (or its NumPy reference): values, dtypes and
shapes forward; gradients for a random cotangent backward; non-contiguous inputs.

Half-precision outputs are held to their error bound around the op's float64 value on the
same inputs (`tideflow.testing.accuracy`), not to PyTorch's half result: PyTorch's half
kernels take other paths on other CPUs (some sum in half precision), so its own error is not
ours to match. Agreeing with PyTorch within its error follows from both being within theirs
of the exact value; dtypes and shapes are still compared with PyTorch's half call."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.testing.accuracy import HALVES, assert_accurate, operand_bounds
from tideflow.testing.harness import (
    as_numpy,
    assert_close,
    call_torch,
    dtype_name,
    flatten,
    flow_fn,
    is_float_array,
    to_flow,
    to_torch,
)
from tideflow.testing.opinfo import Sample

from .conftest import cases, samples

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def _expected(info, sample, requires_grad):
    if info.ref is not None:
        args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in sample.args)
        return None, flatten(info.ref(*args, **sample.kwargs))
    targs = to_torch(torch, sample, requires_grad)
    return targs, flatten(call_torch(torch, info, targs, sample.kwargs))


def _exact(info, sample):
    """The op in float64 on the sample's operands (half values are exact in float64)."""

    def widen(a):
        return a.astype(np.float64) if is_float_array(a) else a

    kwargs = {k: widen(v) for k, v in sample.kwargs.items()}
    return _expected(info, Sample(tuple(map(widen, sample.args)), kwargs), False)[1]


@pytest.mark.parametrize(("info", "dtype"), cases(where=lambda i: not i.random))
def test_forward(info, dtype):
    against_exact = dtype in HALVES and not info.dtype_dependent
    for sample in samples(info, dtype):
        got = flatten(flow_fn(info)(*to_flow(sample, False), **sample.kwargs))
        _, want = _expected(info, sample, False)
        assert len(got) == len(want), f"{sample}: {len(got)} outputs, expected {len(want)}"
        exact = _exact(info, sample) if against_exact else want
        for i, (g, w, e) in enumerate(zip(got, want, exact, strict=True)):
            what = f"{sample} output {i}"
            if info.ref is None:
                assert dtype_name(g) == dtype_name(w), f"{what}: dtype"
            # NOTE: by output dtype: exp(int) is compared as a float, argmax(half) exactly
            out_dtype = dtype_name(g) if isinstance(g, flow.Tensor) else dtype
            if against_exact and out_dtype in HALVES:
                n, magnitude = operand_bounds((*sample.args, *sample.kwargs.values()))
                assert_accurate(as_numpy(g), as_numpy(e), out_dtype, n, magnitude, what)
            else:
                assert_close(g, w, *info.tolerance(out_dtype), what)


@pytest.mark.parametrize(("info", "dtype"), cases(where=lambda i: not i.random))
def test_noncontiguous(info, dtype):
    if "noncontiguous" in info.skips:
        pytest.skip(info.skips["noncontiguous"])
    rtol, atol = info.tolerance(dtype)
    for sample in samples(info, dtype):
        fn = flow_fn(info)
        base = flatten(fn(*to_flow(sample, False), **sample.kwargs))
        nc = flatten(fn(*to_flow(sample, False, noncontiguous=True), **sample.kwargs))
        for i, (a, b) in enumerate(zip(nc, base, strict=True)):
            assert_close(a, b, rtol, atol, f"{sample} output {i} (non-contiguous)")


_GRAD_DTYPES = ("float32", "float64", "complex64", "complex128")


def _cotangent(rng, shape, np_dtype):
    """A random cotangent; complex outputs get complex ones (both parts drawn)."""
    values = rng.standard_normal(shape)
    if np_dtype.kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return np.asarray(values).astype(np_dtype)


def _grad_cases():
    return cases(
        dtypes_of=lambda i: [d for d in i.dtypes if d in _GRAD_DTYPES],
        where=lambda i: i.grad and i.ref is None and not i.random,
    )


@pytest.mark.parametrize(("info", "dtype"), _grad_cases())
def test_backward(info, dtype):
    rtol, atol = info.tolerance(dtype)
    rtol, atol = max(rtol, 1e-5), max(atol, 1e-5)
    rng = np.random.default_rng(1)
    for sample in samples(info, dtype):
        if not sample.grad:
            continue
        fargs = to_flow(sample, True)
        fin = [a for a in fargs if isinstance(a, flow.Tensor) and a.requires_grad]
        if not fin:
            continue
        fout = [o for o in flatten(flow_fn(info)(*fargs, **sample.kwargs)) if o.requires_grad]
        targs, tout = _expected(info, sample, True)
        tin = [a for a in targs if isinstance(a, torch.Tensor) and a.requires_grad]
        tout = [o for o in tout if isinstance(o, torch.Tensor) and o.requires_grad]
        assert len(fout) == len(tout), f"{sample}: differentiable outputs differ"
        if not fout:
            continue
        cots = [_cotangent(rng, tuple(o.shape), as_numpy(o).dtype) for o in tout]
        fg = flow.autograd.grad(fout, fin, [flow.tensor(c) for c in cots], allow_unused=True)
        tg = torch.autograd.grad(tout, tin, [torch.from_numpy(c) for c in cots], allow_unused=True)
        for i, (a, b, x) in enumerate(zip(fg, tg, fin, strict=True)):
            a = np.zeros(x.shape, as_numpy(x).dtype) if a is None else a
            b = np.zeros(x.shape, as_numpy(x).dtype) if b is None else b
            assert_close(a, b, rtol, atol, f"{sample} grad of input {i}")
