"""Global tensors in a world of one process: placement and sbp objects, conversions that
degenerate to copies, op layouts, autograd, modules, and the error messages. The real
multi-process runs are in tests/dist/test_global_tensors.py."""

from __future__ import annotations

import collections
import copy
import subprocess
import sys

import numpy as np
import pytest

import tideflow as flow
import tideflow.parallel as par
from tideflow.framework.device import check_available
from tideflow.parallel import sbp as S

ONE = par.placement("cpu", [0])
GRID = par.placement("cpu", [[0]])


pytestmark = pytest.mark.usefixtures("local_dispatch")


def g(array, sbp, where=ONE, requires_grad=False):
    return par.create_global(
        lambda shape: flow.tensor(array), np.shape(array), where, sbp, requires_grad=requires_grad
    )


# -- placement ---------------------------------------------------------------------------------
def test_placement_repr_equality_and_hash():
    p = par.placement("cpu", ranks=[0])
    assert repr(p) == 'tideflow.placement(type="cpu", ranks=[0])'
    assert p == par.placement(type="cpu", ranks=range(1))
    assert hash(p) == hash(par.placement("cpu", [0]))
    assert p != GRID and p != par.placement("cuda", [0]) and p != "cpu"
    assert GRID.hierarchy == flow.Size([1, 1]) and GRID.ranks.tolist() == [[0]]
    assert par.placement.all("cpu") == p
    assert {p, par.placement("cpu", [0])} == {p}


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"type": "tpu", "ranks": [0]}, flow.TideflowError, "unknown device type 'tpu'"),
        ({"type": "cpu"}, TypeError, "`ranks` is required"),
        ({"type": "cpu", "ranks": []}, ValueError, "must not be empty"),
        ({"type": "cpu", "ranks": [0, 0]}, ValueError, r"ranks \[0\] appear more than once"),
        ({"type": "cpu", "ranks": [0, 1]}, ValueError, r"ranks \[1\] are outside the world of 1"),
        ({"type": "cpu", "ranks": [-1]}, ValueError, r"ranks \[-1\] are outside the world"),
        ({"type": "cpu", "ranks": [[0], [1, 2]]}, ValueError, "rectangular grid"),
        ({"type": "cpu", "ranks": [0.0]}, TypeError, "must be integers"),
    ],
)
def test_placement_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        par.placement(**kwargs)


def test_placement_on_an_unavailable_device_fails_when_a_tensor_is_placed():
    try:
        check_available("cuda")
    except flow.TideflowError:
        with pytest.raises(flow.TideflowError, match=r"placement.*cuda"):
            flow.ones(2).to_global(par.placement("cuda", [0]), S.broadcast)
    else:
        pytest.skip("a cuda backend is installed")


# -- sbp ---------------------------------------------------------------------------------------
def test_sbp_values():
    assert repr(S.split(1)) == "tideflow.sbp.split(dim=1)"
    assert repr(S.broadcast) == "tideflow.sbp.broadcast"
    assert repr(S.partial_sum) == "tideflow.sbp.partial_sum"
    assert S.split(0) == S.split(0) and S.split(0) != S.split(1) and S.broadcast != S.partial_sum
    assert hash(S.split(2)) == hash(S.split(2))
    assert S.split(3).dim == 3 and S.broadcast.dim is None
    assert isinstance(S.broadcast, S.sbp)
    with pytest.raises(TypeError, match="dim must be an integer"):
        S.split(1.5)


def test_negative_split_dims_count_from_the_end():
    x = flow.ones(2, 3).to_global(ONE, S.split(-1))
    assert x.sbp == (S.split(1),)


# -- local <-> global --------------------------------------------------------------------------
@pytest.mark.parametrize("layout", [S.split(0), S.split(1), S.broadcast, S.partial_sum])
def test_to_global_in_a_world_of_one_keeps_the_values(layout):
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = flow.tensor(a).to_global(ONE, layout)
    assert x.is_global and not x.is_local
    assert x.shape == flow.Size([2, 3]) and x.size(1) == 3 and x.ndim == 2 and x.numel() == 6
    assert x.placement == ONE and x.sbp == (layout,)
    np.testing.assert_array_equal(x.numpy(), a)
    np.testing.assert_array_equal(x.to_local().numpy(), a)
    for other in (S.split(0), S.split(1), S.broadcast, S.partial_sum):
        np.testing.assert_array_equal(x.to_global(sbp=other).numpy(), a)


def test_to_global_shares_memory_unless_copy():
    t = flow.zeros(3)
    x = t.to_global(ONE, S.split(0))
    t.add_(1)
    np.testing.assert_array_equal(x.numpy(), [1, 1, 1])
    y = t.to_global(ONE, S.split(0), copy=True)
    t.add_(1)
    np.testing.assert_array_equal(y.numpy(), [1, 1, 1])
    assert x.to_global(sbp=S.split(0)) is x
    assert x.to_global(sbp=S.split(0), copy=True) is not x


def test_value_methods_gather():
    x = flow.tensor([[1.5]]).to_global(ONE, S.broadcast)
    assert x.item() == 1.5 and float(x) == 1.5 and bool(x) and x.tolist() == [[1.5]]
    assert np.asarray(x).shape == (1, 1) and len(x) == 1
    r = repr(flow.tensor([1.0, 2.0]).to_global(ONE, S.split(0)))
    expected = (
        'tensor([1., 2.], placement=tideflow.placement(type="cpu", ranks=[0]), '
        "sbp=(tideflow.sbp.split(dim=0),))"
    )
    assert r == expected


def test_local_to_global_errors():
    t = flow.ones(2, 2)
    with pytest.raises(flow.TideflowError, match="needs both placement and sbp"):
        t.to_global(ONE)
    with pytest.raises(TypeError, match=r"placement must be a flow\.placement"):
        t.to_global("cpu", S.broadcast)
    with pytest.raises(IndexError, match=r"split\(dim=2\) is out of range for a 2-d tensor"):
        t.to_global(ONE, S.split(2))
    with pytest.raises(IndexError, match="a 0-d tensor cannot be split"):
        flow.tensor(1.0).to_global(ONE, S.split(0))
    with pytest.raises(ValueError, match="2 sbp given for a 1-d placement"):
        t.to_global(ONE, (S.split(0), S.broadcast))
    with pytest.raises(TypeError, match=r"expected flow\.sbp\.split"):
        t.to_global(ONE, "split")
    with pytest.raises(flow.TideflowError, match="already local"):
        t.to_local()


def test_global_to_global_errors():
    x = flow.ones(2, 2).to_global(ONE, S.broadcast)
    with pytest.raises(flow.TideflowError, match="grad_sbp applies to a local tensor"):
        x.to_global(sbp=S.split(0), grad_sbp=S.broadcast)
    with pytest.raises(flow.TideflowError, match="from a 1-d to a 2-d placement needs its new sbp"):
        x.to_global(GRID)
    moved = x.to_global(GRID, (S.split(0), S.split(1)))
    assert moved.placement == GRID and moved.sbp == (S.split(0), S.split(1))


# -- ops ---------------------------------------------------------------------------------------
def test_ops_mixing_local_and_global_or_placements_fail():
    x = flow.ones(2, 2).to_global(ONE, S.broadcast)
    with pytest.raises(
        flow.TideflowError, match=r"add: operand 1 is a local tensor \(shape \[2, 2\]\)"
    ):
        x + flow.ones(2, 2)
    y = flow.ones(2, 2).to_global(GRID, (S.broadcast, S.broadcast))
    with pytest.raises(flow.TideflowError, match="mul: operands are on different placements"):
        x * y
    with pytest.raises(flow.ShapeError, match=r"shapes \[2, 2\] and \[3\] cannot be broadcast"):
        x + flow.ones(3).to_global(ONE, S.broadcast)


@pytest.mark.parametrize(
    ("a_sbp", "b_sbp", "out"),
    [
        (S.split(0), S.broadcast, S.split(0)),  # data parallel
        (S.broadcast, S.split(1), S.split(1)),  # column parallel
        (S.split(1), S.split(0), S.partial_sum),  # row parallel
        (S.partial_sum, S.broadcast, S.partial_sum),
        (S.broadcast, S.broadcast, S.broadcast),
    ],
)
def test_matmul_keeps_the_operands_layout_when_the_op_accepts_it(a_sbp, b_sbp, out):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    y = g(a, a_sbp) @ g(b, b_sbp)
    assert y.sbp == (out,)
    np.testing.assert_allclose(y.numpy(), a @ b)


def test_reductions_over_a_split_dim_are_partial():
    a = np.arange(12.0).reshape(3, 4)
    x = g(a, S.split(0))
    assert x.sum(0).sbp == (S.partial_sum,) and x.sum(1).sbp == (S.split(0),)
    np.testing.assert_allclose(x.sum(0).numpy(), a.sum(0))
    np.testing.assert_allclose(
        (x.exp() + 1).softmax(1).numpy(), flow.softmax(flow.tensor(np.exp(a) + 1), 1).numpy()
    )


def test_backward_gives_gradients_in_each_leafs_layout():
    rng = np.random.default_rng(1)
    a, w = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    x = g(a, S.split(0), requires_grad=True)
    wg = g(w, S.broadcast, requires_grad=True)
    loss = (x @ wg).tanh().sum()
    assert loss.sbp == (S.partial_sum,)
    loss.backward()
    tx, tw = flow.tensor(a, requires_grad=True), flow.tensor(w, requires_grad=True)
    (tx @ tw).tanh().sum().backward()
    assert x.grad.sbp == (S.split(0),) and wg.grad.sbp == (S.broadcast,)
    assert x.grad.is_global and x.grad.shape == flow.Size([4, 3])
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(wg.grad.numpy(), tw.grad.numpy())


def test_backward_errors():
    x = g(np.ones((2, 2)), S.broadcast, requires_grad=True)
    y = x * 2
    with pytest.raises(flow.AutogradError, match="implicitly created only for scalar outputs"):
        y.backward()
    with pytest.raises(flow.AutogradError, match="must be a global tensor"):
        y.backward(flow.ones(2, 2))
    y.backward(flow.ones(2, 2).to_global(ONE, S.split(1)))
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.ones((2, 2)))


def test_to_local_is_differentiable():
    x = g(np.arange(3.0), S.split(0), requires_grad=True)
    (x.to_local() * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0, 3.0])
    b = g(np.arange(3.0), S.broadcast, requires_grad=True)
    ((b * 2).to_local() * 3).sum().backward()  # through a non-leaf
    np.testing.assert_allclose(b.grad.numpy(), [6.0, 6.0, 6.0])
    t = flow.tensor([1.0, 2.0], requires_grad=True)
    (t.to_global(ONE, S.split(0)) ** 2).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), [2.0, 4.0])


def test_grad_assignment_and_in_place_fill():
    x = g(np.ones((2, 3)), S.split(1), requires_grad=True)
    x.grad = flow.full((2, 3), 2.0).to_global(ONE, S.broadcast)
    assert x.grad.sbp == (S.split(1),)  # converted to the tensor's layout
    x.grad.zero_()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))
    with pytest.raises(flow.TideflowError, match="does not match the tensor"):
        x.grad = flow.ones(3, 2).to_global(ONE, S.broadcast)
    p = g(np.ones(4), S.partial_sum)
    p.fill_(5.0)
    np.testing.assert_array_equal(p.numpy(), np.full(4, 5.0))
    p.fill_(flow.tensor(7.0).to_global(ONE, S.broadcast))
    np.testing.assert_array_equal(p.numpy(), np.full(4, 7.0))
    with pytest.raises(flow.TideflowError, match="must be a number or a global tensor"):
        p.fill_(flow.tensor(1.0))


def test_detach_data_and_deepcopy_stay_global():
    x = g(np.arange(4.0), S.split(0), requires_grad=True)
    d = x.detach()
    assert d.is_global and not d.requires_grad and d.sbp == x.sbp
    x.data = g(np.zeros(4), S.broadcast)
    assert x.sbp == (S.broadcast,) and x.requires_grad
    with pytest.raises(flow.TideflowError, match="must be a global tensor"):
        x.data = flow.zeros(4)
    c = copy.deepcopy(x)
    assert c.is_global and c.sbp == x.sbp and c.data_ptr() != x.data_ptr()


def test_optimizer_updates_global_parameters():
    lin = flow.nn.Linear(3, 2)
    ref = flow.nn.Linear(3, 2)
    ref.load_state_dict(lin.state_dict())
    weight = lin.weight
    par.module_to_global(lin, ONE, S.broadcast)
    assert lin.weight is weight and isinstance(weight, flow.nn.Parameter) and weight.is_global
    assert repr(weight).startswith("Parameter containing:\ntensor(")
    opt, ref_opt = (
        flow.optim.SGD(lin.parameters(), lr=0.1),
        flow.optim.SGD(ref.parameters(), lr=0.1),
    )
    a = np.random.default_rng(2).standard_normal((5, 3)).astype(np.float32)
    for _ in range(2):
        for model, o, x in (
            (lin, opt, flow.tensor(a).to_global(ONE, S.split(0))),
            (ref, ref_opt, flow.tensor(a)),
        ):
            o.zero_grad()
            (model(x) ** 2).sum().backward()
            o.step()
    np.testing.assert_allclose(lin.weight.detach().numpy(), ref.weight.detach().numpy(), rtol=1e-6)


def test_module_to_global_with_an_sbp_function_and_buffers():
    bn = flow.nn.BatchNorm1d(3)
    par.module_to_global(bn, GRID, lambda t: (S.broadcast, S.split(0) if t.ndim else S.broadcast))
    assert bn.weight.sbp == (S.broadcast, S.split(0))
    assert bn.running_mean.is_global and bn.num_batches_tracked.sbp == (S.broadcast, S.broadcast)


def test_tensor_parallel_linears_equal_the_local_mlp():
    rng = np.random.default_rng(3)
    first, second = flow.nn.Linear(4, 6), flow.nn.Linear(6, 2)
    ref1, ref2 = flow.nn.Linear(4, 6), flow.nn.Linear(6, 2)
    ref1.load_state_dict(first.state_dict())
    ref2.load_state_dict(second.state_dict())
    par.column_parallel(first, ONE)
    par.row_parallel(second, ONE)
    assert first.weight.sbp == (S.split(0),) and first.bias.sbp == (S.split(0),)
    assert second.weight.sbp == (S.split(1),) and second.bias.sbp == (S.broadcast,)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    y = second(first(flow.tensor(a).to_global(ONE, S.broadcast)).relu())
    assert y.sbp == (S.partial_sum,)
    want = ref2(ref1(flow.tensor(a)).relu())
    np.testing.assert_allclose(y.detach().numpy(), want.detach().numpy(), rtol=1e-5)


def test_global_view_converts_nested_structures():
    Pair = collections.namedtuple("Pair", "a b")
    state = collections.OrderedDict(w=flow.ones(2, 2), rest=[flow.zeros(2), Pair(flow.ones(1), 3)])
    state._metadata = {"version": 1}
    out = par.global_view.to_global(
        state, ONE, lambda t: S.split(0) if t.ndim == 2 else S.broadcast
    )
    assert type(out) is collections.OrderedDict and out._metadata == {"version": 1}
    assert out["w"].sbp == (S.split(0),) and out["rest"][0].sbp == (S.broadcast,)
    assert isinstance(out["rest"][1], Pair) and out["rest"][1].b == 3
    back = par.global_view.to_local(out)
    assert not back["w"].is_global and back["rest"][1].a.shape == flow.Size([1])


def test_create_global_checks_its_arguments():
    with pytest.raises(flow.TideflowError, match=r"needs a flow\.placement and an sbp"):
        par.create_global(flow.ones, (2,), ONE, None)
    x = par.create_global(flow.ones, (2, 3), GRID, (S.split(1), S.split(0)), requires_grad=True)
    assert x.is_leaf and x.requires_grad and x.sbp == (S.split(1), S.split(0))


def test_the_local_path_has_no_handler_until_a_global_tensor_exists():
    code = (
        "import tideflow as flow, tideflow.parallel as par\n"
        "from tideflow.framework.dispatch import runs_locally\n"
        "flow.ones(2) + 1\n"
        "assert runs_locally()\n"
        "x = flow.ones(2).to_global(par.placement('cpu', [0]), par.sbp.broadcast)\n"
        "assert not runs_locally()\n"
        "assert not (flow.ones(2) + 1).is_global and (x + 1).is_global\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_global_ops_compose_with_autocast():
    x = g(np.ones((2, 2), np.float32), S.broadcast)
    with flow.autocast("cpu", dtype=flow.bfloat16):
        y = x @ x
    assert y.is_global and y.dtype == flow.bfloat16


def test_autograd_grad_of_global_tensors():
    x = g(np.arange(3.0), S.split(0), requires_grad=True)
    y = (x * x).sum()
    (gx,) = flow.autograd.grad(y, x, create_graph=True)
    assert gx.is_global and gx.sbp == (S.split(0),)
    np.testing.assert_allclose(gx.numpy(), 2 * np.arange(3.0))
    (ggx,) = flow.autograd.grad(gx.sum(), x)  # through the first gradient's graph
    np.testing.assert_allclose(ggx.numpy(), [2.0, 2.0, 2.0])
    h = x * 3  # a non-leaf input: its gradient comes in the dual layout
    seed = g(np.ones(3), S.broadcast)
    (gh,) = flow.autograd.grad((h * h).sum(), h, retain_graph=True)
    np.testing.assert_allclose(gh.numpy(), 6 * np.arange(3.0))
    flow.autograd.backward([h], [seed])
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 3.0, 3.0])
