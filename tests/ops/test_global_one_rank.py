"""Every op the database's samples reach, on global tensors of a one-rank placement: the
result (values, dtype, shape) and the gradients equal the local call's, and tensor results
are global. One rank runs the same kernels on the same arrays as the local call, so the
comparison is exact; what it checks is the global path itself: layout choice, boxing,
wrapping, the composites' own constants (they must be made on the operands' placement) and
autograd through all of it. Operands are all broadcast, or all split along dim 0 (0-d ones
broadcast); real multi-rank layouts are checked by test_meta_sbp (simulated) and tests/dist.
"""

import numpy as np
import pytest

import tideflow as flow
from tideflow.testing.accuracy import operand_bounds, unit_roundoff
from tideflow.testing.harness import flatten, flow_fn, to_flow

from .conftest import cases, samples

ONE_RANK = flow.placement("cpu", ranks=[0])

# Records whose op returns a Python value, which the record wraps in a (local) tensor.
_HOST_VALUES = frozenset({"allclose", "allclose.equal_nan", "equal"})

# (record, layout or None for both) -> why it cannot run here.
_CANNOT = {
    ("optim.LAMB", "split"): "lamb_update's trust ratio needs whole parameters (broadcast only)",
}

pytestmark = pytest.mark.usefixtures("local_dispatch")


def _layout(t, how: str):
    return flow.sbp.split(0) if how == "split" and t.ndim > 0 else flow.sbp.broadcast


def _as_global(value, how: str):
    """Tensor operands, and the NumPy constants records pass as keywords, made global."""
    if isinstance(value, np.ndarray):
        value = flow.tensor(value)
    if isinstance(value, flow.Tensor):
        return value.to_global(ONE_RANK, _layout(value, how))
    return value


def _dtype(info):
    return ["float64" if "float64" in info.dtypes else info.dtypes[0]]


def _run(info, args, kwargs, grad: bool):
    """(outputs, gradients of the float operands) of one call; the gradients are those of
    the sum of every differentiable output."""
    if grad:
        for a in args:
            if isinstance(a, flow.Tensor) and a.dtype.is_floating_point:
                a.requires_grad_(True)
    outs = flatten(flow_fn(info)(*args, **kwargs))
    if grad:
        roots = [o for o in outs if isinstance(o, flow.Tensor) and o.requires_grad]
        if roots:
            sum(o.sum() for o in roots).backward()
    return outs, [a.grad if isinstance(a, flow.Tensor) else None for a in args]


def _same(actual, expected, what: str, atol: float = 0.0) -> None:
    if isinstance(expected, flow.Tensor):
        assert isinstance(actual, flow.Tensor) and actual.is_global, f"{what}: not global"
        got = actual.to_local().detach().numpy()
        want = expected.detach().numpy()
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
        close = np.allclose(got, want, rtol=0.0, atol=atol, equal_nan=True)
        assert close if atol else np.array_equal(got, want, equal_nan=True), f"{what}: values"
    else:
        assert type(actual) is type(expected) and (actual == expected or actual != actual), what


def _reordering_error(sample, dtype: str, grads: list) -> float:
    """How far a gradient may move when its contributions are added in another order (the
    global path accumulates them through its own nodes): no element sums more terms than
    the longest operand has elements (n), each at most the larger of the operands' products
    (M) and the gradient itself."""
    n, magnitude = operand_bounds(sample.args)
    largest = max((float(np.abs(g.numpy()).max(initial=0.0)) for g in grads if g is not None),
                  default=0.0)  # fmt: skip
    return 2 * n * unit_roundoff(dtype) * max(magnitude, largest)


@pytest.mark.parametrize("how", ["broadcast", "split"])
@pytest.mark.parametrize(("info", "dtype"), cases(dtypes_of=_dtype, where=lambda i: not i.random))
def test_one_rank_global_equals_local(info, dtype, how):
    reason = _CANNOT.get((info.id, how)) or _CANNOT.get((info.id, None))
    if reason:
        pytest.skip(reason)
    checked = 0
    for sample in samples(info, dtype):
        if not any(isinstance(a, np.ndarray) for a in sample.args):
            continue  # creators: their placement=/sbp= keywords are tested in tests/unit
        grad = info.grad and sample.grad
        local_outs, local_grads = _run(info, to_flow(sample, False), sample.kwargs, grad)
        args = tuple(_as_global(a, how) for a in to_flow(sample, False))
        kwargs = {k: _as_global(v, how) for k, v in sample.kwargs.items()}
        outs, grads = _run(info, args, kwargs, grad)
        assert len(outs) == len(local_outs), f"{sample}: {len(outs)} outputs"
        if info.id not in _HOST_VALUES:
            for i, (o, want) in enumerate(zip(outs, local_outs, strict=True)):
                _same(o, want, f"{sample} output {i}")
        if any(g is not None for g in local_grads):
            atol = _reordering_error(sample, dtype, local_grads)
        for i, (g, want) in enumerate(zip(grads, local_grads, strict=True)):
            if want is None:
                assert g is None, f"{sample}: operand {i} got a gradient the local call lacks"
            else:
                _same(g, want, f"{sample} gradient of operand {i}", atol)
        checked += 1
    if not checked:
        pytest.skip("no sample has a tensor operand")
