"""Float64 numerical gradient checks (first and second order) for every differentiable op, and
complex128 ones (real and imaginary parts perturbed apart) for records of complex dtypes."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.testing.harness import flatten, flow_fn, to_flow

from .conftest import cases, samples

_MAX_NUMEL = 64  # finite differences cost one forward per element


_DOUBLES = ("float64", "complex128")


def _checkable(info):
    return info.grad and info.gradcheck and not info.random and _doubles(info)


def _doubles(info):
    return [d for d in _DOUBLES if d in info.dtypes]


def _fn(info, sample, args):
    positions = [i for i, a in enumerate(args) if isinstance(a, flow.Tensor) and a.requires_grad]

    def f(*xs):
        full = list(args)
        for p, x in zip(positions, xs, strict=True):
            full[p] = x
        outs = flatten(flow_fn(info)(*full, **sample.kwargs))
        return tuple(
            o
            for o in outs
            if isinstance(o, flow.Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex)
        )

    return f, tuple(args[p] for p in positions)


def _small(sample):
    return sum(a.size for a in sample.args if isinstance(a, np.ndarray)) <= _MAX_NUMEL


@pytest.mark.parametrize(("info", "dtype"), cases(dtypes_of=_doubles, where=_checkable))
def test_gradcheck(info, dtype):
    for sample in samples(info, dtype):
        if not sample.grad or not _small(sample):
            continue
        f, inputs = _fn(info, sample, to_flow(sample, True))
        if inputs:
            assert flow.autograd.gradcheck(f, inputs), sample


@pytest.mark.parametrize(("info", "dtype"), cases(dtypes_of=_doubles, where=_checkable))
def test_gradgradcheck(info, dtype):
    if "gradgrad" in info.skips:
        pytest.skip(info.skips["gradgrad"])
    for sample in samples(info, dtype):
        if not sample.grad or not _small(sample):
            continue
        f, inputs = _fn(info, sample, to_flow(sample, True))
        if inputs and all(x.numel() > 0 for x in inputs):
            assert flow.autograd.gradgradcheck(f, inputs), sample
            return  # one sample is enough for second order
