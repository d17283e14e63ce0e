"""In-place ops on views that take part in autograd (framework/views.py), against PyTorch.

The views come from the op database's records of view ops; each is written by each in-place
op of a set (arithmetic, fills, copies, clamps, subscript assignments and index_put_), on a
base that requires grad through its history, or that starts requiring grad by the write.
Values of the base and of the view, and the gradients reaching the leaves, must match
PyTorch's. Every gradient element is a product of at most a few factors accumulated from two
cotangents (no reductions), so float64 results agree to a few units of roundoff.
"""

from __future__ import annotations

import numpy as np
import pytest

import tideflow as flow
from tideflow.framework.errors import AutogradError, TideflowError
from tideflow.testing.accuracy import unit_roundoff
from tideflow.testing.harness import call_torch, flow_fn
from tideflow.testing.op_db import OP_DB

torch = pytest.importorskip("torch")

RTOL = 8 * unit_roundoff("float64")
ATOL = 8 * unit_roundoff("float64") * 10  # values and cotangents are below 10 in magnitude

VIEW_RECORDS = (
    "getitem.basic",
    "narrow",
    "select",
    "diagonal",
    "transpose",
    "t",
    "permute",
    "movedim",
    "view",
    "reshape",
    "flatten",
    "unflatten",
    "unsqueeze",
    "squeeze",
    "split",
    "chunk",
    "unbind",
    "as_strided",
)


def _overlapping(a: np.ndarray) -> bool:
    """Whether two elements of `a` share memory (in-place writes to it are undefined)."""
    offsets = np.zeros(a.shape, np.int64)
    for d, (n, s) in enumerate(zip(a.shape, a.strides, strict=True)):
        offsets = offsets + (np.arange(n) * s).reshape([-1 if i == d else 1 for i in range(a.ndim)])
    return np.unique(offsets).size != offsets.size


def _view_cases(min_rows: int = 0):
    """(record, sample) of the view records whose view PyTorch also makes (x[True] copies)
    and whose elements do not overlap, with at least `min_rows` rows."""
    by_id = {r.id: r for r in OP_DB}
    rng = np.random.default_rng(0)
    cases = []
    for rid in VIEW_RECORDS:
        info = by_id[rid]
        for k, sample in enumerate(info.samples(rng, "float64")):
            x = sample.args[0]
            if not isinstance(x, np.ndarray):
                continue
            base = torch.tensor(x)
            view = _first(call_torch(torch, info, (base, *sample.args[1:]), sample.kwargs))
            rows = view.shape[0] if view.dim() else 0
            if view._base is base and not _overlapping(view.numpy()) and rows >= min_rows:
                cases.append(pytest.param((info, sample), id=f"{rid}-{k}"))
    return cases


def _first(out):
    return out[0] if isinstance(out, tuple | list) else out


# The in-place ops: f(lib, view, w) writes into `view`; `w` has the view's shape and requires
# grad. The index forms need a view with a first dim of at least 2.
def _index(lib, v):
    return lib.tensor([v.shape[0] - 1, 0])


def _mask(lib, v):
    return lib.tensor(np.arange(v.numel()).reshape(tuple(v.shape)) % 3 == 0)


INPLACE = {
    "add_": lambda lib, v, w: v.add_(w),
    "mul_": lambda lib, v, w: v.mul_(w),
    "zero_": lambda lib, v, w: v.zero_(),
    "fill_": lambda lib, v, w: v.fill_(2.5),
    "copy_": lambda lib, v, w: v.copy_(w),
    "clamp_": lambda lib, v, w: v.clamp_(-1.0, 1.0),
    "iadd": lambda lib, v, w: v.__iadd__(w * w),
}
INDEXED = {
    "setitem_int": lambda lib, v, w: v.__setitem__(0, w[1]),
    "setitem_slice": lambda lib, v, w: v.__setitem__(slice(1, None), w[1:]),
    "setitem_mask": lambda lib, v, w: v.__setitem__(_mask(lib, v), w[_mask(lib, v)]),
    "setitem_tensor": lambda lib, v, w: v.__setitem__(_index(lib, v), w[_index(lib, v)]),
    "setitem_number": lambda lib, v, w: v.__setitem__((slice(None), Ellipsis), 1.5),
    "index_put_": lambda lib, v, w: v.index_put_((_index(lib, v),), w[_index(lib, v)]),
    "index_put_acc": lambda lib, v, w: v.index_put_(
        (_index(lib, v),), w[_index(lib, v)], accumulate=True
    ),
}


def _run(lib, info, sample, write, base_requires_grad: bool, seed: int = 1):
    """Base (from a leaf through an op when `base_requires_grad`, else a plain tensor), a
    view of it written in place with a value from the leaf `w`; backward from both."""
    rng = np.random.default_rng(seed)
    x0 = sample.args[0]
    x = lib.tensor(x0, requires_grad=True)
    base = x * 1.5 if base_requires_grad else lib.tensor(x0)
    call = (lambda *a, **k: call_torch(lib, info, a, k)) if lib is torch else flow_fn(info)
    view = _first(call(base, *sample.args[1:], **sample.kwargs))
    w = lib.tensor(rng.uniform(-2, 2, tuple(view.shape)), requires_grad=True)
    write(lib, view, w)
    outs = [base, view]
    cotangents = [lib.tensor(rng.uniform(-1, 1, tuple(o.shape))) for o in outs]
    lib.autograd.backward(outs, cotangents)
    return [o.detach().numpy() for o in outs], [
        None if t.grad is None else t.grad.numpy() for t in (x, w)
    ]


def _compare(info, sample, write, base_requires_grad: bool) -> None:
    """Values and gradients as PyTorch's, or an AutogradError about the view where PyTorch
    refuses the write (outputs of split, chunk, unbind)."""
    try:
        expected = _run(torch, info, sample, write, base_requires_grad)
    except RuntimeError as e:
        assert "view" in str(e)
        with pytest.raises(AutogradError, match="is a view"):
            _run(flow, info, sample, write, base_requires_grad)
        return
    actual = _run(flow, info, sample, write, base_requires_grad)
    for what, a_list, e_list in zip(("value", "grad"), actual, expected, strict=True):
        for name, a, e in zip(("base/x", "view/w"), a_list, e_list, strict=True):
            # NOTE: no gradient and a zero gradient are the same (PyTorch's copy_ passes
            # zeros to what it overwrites, tideflow's nothing)
            if e is None or a is None:
                assert not np.any(a if e is None else e), f"{what} of {name}: missing"
                continue
            np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL, err_msg=f"{what} of {name}")


@pytest.mark.parametrize("case", _view_cases())
@pytest.mark.parametrize("op", sorted(INPLACE))
def test_inplace_on_view_matches_pytorch(case, op):
    info, sample = case
    _compare(info, sample, INPLACE[op], base_requires_grad=True)


@pytest.mark.parametrize("case", _view_cases(min_rows=2))
@pytest.mark.parametrize("op", sorted(INDEXED))
def test_indexed_writes_on_view_match_pytorch(case, op):
    info, sample = case
    _compare(info, sample, INDEXED[op], base_requires_grad=True)


@pytest.mark.parametrize("case", _view_cases())
def test_write_makes_the_base_require_grad(case):
    """A base that did not require grad does after a value that does is written into its
    view, and the value's gradient flows through the base."""
    info, sample = case
    _compare(info, sample, INPLACE["copy_"], base_requires_grad=False)


# -- programs of several writes, against PyTorch --------------------------------------------
def _overlapping_views(lib, x, w):
    b = x * 1.0
    b[..., :2].mul_(w[..., :2])  # two overlapping views, written one after the other
    b[1:].t().add_(w[1:].t() * 2)
    return [b]


def _sibling_views(lib, x, w):
    b = x * 1.0
    row, col = b[1], b[:, 2]  # made before the writes: they must see the new history
    b.diagonal().add_(w[0, :3])
    col.mul_(w[:, 0])
    return [b, row, col]


def _nested_views(lib, x, w):
    b = x * 1.0
    v = b.t()[1:].unsqueeze(0)  # a view of a view of a view
    v.narrow(2, 0, 2).copy_(w[:2, 1:].t().unsqueeze(0))
    v.squeeze(0).clamp_(-0.5, 0.5)
    return [b, v]


def _base_then_view(lib, x, w):
    b = x * 1.0
    v = b[:, 1:3]
    b.mul_(w)  # the base written directly: the older view derives its history again
    v.add_(1.0)
    return [b, v]


def _write_into_plain_tensor(lib, x, w):
    b = lib.zeros(3, 4, dtype=lib.float64)
    b[0:2] = x[0:2] * w[0:2]  # b starts requiring grad
    b[2].copy_(w[2])
    return [b, b[1:]]


def _view_of_input_to_saved_op(lib, x, w):
    b = x * 1.0
    y = b.exp()  # saves its output, not b: writing b afterwards is allowed
    b[0].fill_(1.0)
    b[1:, 1].mul_(w[1:, 1])
    return [b, y]


PROGRAMS = [
    _overlapping_views,
    _sibling_views,
    _nested_views,
    _base_then_view,
    _write_into_plain_tensor,
    _view_of_input_to_saved_op,
]


def _run_program(lib, program):
    rng = np.random.default_rng(2)
    x = lib.tensor(rng.uniform(-2, 2, (3, 4)), requires_grad=True)
    w = lib.tensor(rng.uniform(-2, 2, (3, 4)), requires_grad=True)
    outs = program(lib, x, w)
    cotangents = [lib.tensor(rng.uniform(-1, 1, tuple(o.shape))) for o in outs]
    lib.autograd.backward(outs, cotangents)
    return [o.detach().numpy() for o in outs] + [x.grad.numpy(), w.grad.numpy()]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_programs_of_writes_match_pytorch(program):
    expected = _run_program(torch, program)
    actual = _run_program(flow, program)
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL, err_msg=f"result {i}")


def test_second_order_gradients_match_pytorch():
    """The rewritten history is made of ops with grad rules, so it differentiates again."""

    def grads(lib):
        x = lib.tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4), requires_grad=True)
        b = x * x
        b[:, 1:3].mul_(x[:, :2])
        b.diagonal().copy_(x[0, :3] ** 3)
        (gx,) = lib.autograd.grad((b * b).sum(), x, create_graph=True)
        (ggx,) = lib.autograd.grad((gx * gx).sum(), x)
        return gx.detach().numpy(), ggx.numpy()

    for a, e in zip(grads(flow), grads(torch), strict=True):
        np.testing.assert_allclose(a, e, rtol=RTOL * 4, atol=ATOL * 100)


# -- errors ---------------------------------------------------------------------------------
def test_writing_a_leaf_or_its_view_raises_pytorchs_error():
    x = flow.zeros(3, 4, requires_grad=True)
    with pytest.raises(AutogradError, match="a leaf Variable that requires grad is being used"):
        x.add_(1)
    with pytest.raises(AutogradError, match="setitem: a leaf Variable that requires grad"):
        x[0] = 1.0
    for write in (lambda v: v.mul_(2), lambda v: v.__setitem__(0, 1.0)):
        with pytest.raises(AutogradError, match=r"a view of a leaf Variable .* \[4\], leaf .*"):
            write(x[1])
    with flow.no_grad():  # outside autograd the write is plain
        x[1].fill_(2.0)
    assert x.numpy()[1].tolist() == [2.0] * 4 and x.grad_fn is None


def test_a_saved_tensor_written_through_a_view_raises_at_backward():
    x = flow.ones(3, requires_grad=True)
    b = x * 1.0
    y = b * b  # saves b
    b[1:].mul_(2)
    with pytest.raises(AutogradError, match=r"modified by an inplace operation: MulBackward0"):
        y.sum().backward()


def test_outputs_of_multi_view_ops_refuse_writes_and_stale_histories():
    b = flow.ones(4, requires_grad=True) * 1.0
    with pytest.raises(AutogradError, match="output 1 of split is a view"):
        b.split(2)[1].add_(1)
    first = b.unbind()[0]
    b.mul_(2)
    with pytest.raises(AutogradError, match="its base or another view of its base has been"):
        first * 2


def test_view_made_without_grad_written_with_grad_raises():
    b = flow.ones(4, requires_grad=True) * 1.0
    with flow.no_grad():
        v = b[:2]
    with pytest.raises(AutogradError, match="created in no_grad mode"):
        v.add_(flow.ones(2, requires_grad=True))


def test_expanded_views_are_read_only():
    b = flow.ones(3, requires_grad=True) * 1.0
    with pytest.raises(TideflowError, match="read-only"):
        b.expand(2, 3).add_(1)


def test_in_place_write_to_a_view_inside_a_graph_raises():
    linear = flow.nn.Linear(4, 4)

    class Step(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.linear = linear

        def build(self, x):
            h = self.linear(x)
            h[:, :2].mul_(2)
            return h.sum()

    with pytest.raises(AutogradError, match=r"not in nn\.Graph"):
        Step()(flow.ones(2, 4))


def test_real_and_imag_views_of_a_complex_tensor_match_pytorch():
    """The views change the dtype: their transposes give a real gradient its complex base."""

    def run(lib):
        z = np.arange(6).reshape(2, 3) + 1j * np.arange(6, 12).reshape(2, 3)
        x = lib.tensor(z, requires_grad=True)
        w = lib.tensor(np.linspace(-1.0, 1.0, 3), requires_grad=True)
        b = x * (1 + 1j)
        b.real[0].mul_(w)
        b.imag[1].add_(w)
        b.backward(lib.tensor(np.full((2, 3), 0.5 + 0.25j)))
        return b.detach().numpy(), x.grad.numpy(), w.grad.numpy()

    for a, e in zip(run(flow), run(torch), strict=True):
        np.testing.assert_allclose(a, e, rtol=RTOL, atol=ATOL)


def test_in_place_write_to_a_view_of_a_global_tensor_raises():
    placement = flow.placement("cpu", ranks=[0])
    x = flow.ones(4, 3, requires_grad=True).to_global(placement=placement, sbp=flow.sbp.broadcast)
    with pytest.raises(AutogradError, match="on global tensors"):
        (x * 1.0)[:, :2].mul_(2)
