"""The memory plan applied: chains write the outputs of kernels with an out variant into
buffers they keep (compiler/arena.py), reused by liveness, never for what leaves the chain or
shares memory with it; the out variants write what their kernels return."""

import threading

import numpy as np
import pytest

import tideflow as flow
from tideflow.backends import jit
from tideflow.compiler.chain import Chain
from tideflow.compiler.codegen import GeneratedKernel
from tideflow.compiler.passes.memory import Life, best_fit
from tideflow.framework.dispatch import dispatch
from tideflow.framework.errors import Rejected
from tideflow.framework.registry import (
    Meta,
    OpDef,
    all_ops,
    get_op,
    kernel_for,
    out_kernel_for,
)
from tideflow.ops._rules import broadcast_only

from ._graph_support import trace

F32 = flow.float32


def test_best_fit_reuses_ended_lives_smallest_first():
    buffers = best_fit(
        [Life("a", 0, 1, 64), Life("b", 1, 2, 32), Life("c", 2, 3, 16), Life("d", 3, 3, 64)]
    )
    # c starts after a's last read: a's buffer is free; d after b's: b's is too small
    assert buffers.of == {"a": 0, "b": 1, "c": 0, "d": 2}
    assert buffers.sizes == [64, 32, 64]
    assert buffers.peak == 64 + 32


CALLS: dict[str, dict[str, int]] = {}  # op name -> calls of its kernel and out kernel


def _op(name: str, fn, out_fn=None) -> OpDef:
    """An op of one operand, with `out_fn` as its out kernel if given; it counts the calls of
    each kernel in `CALLS[name]`."""
    calls = CALLS[name] = {"plain": 0, "out": 0}

    def plain(x):
        calls["plain"] += 1
        return fn(x)

    def into(x, *, out):
        calls["out"] += 1
        return out_fn(x, out=out)

    op = OpDef(
        name, inputs=("x",), meta=lambda x: Meta(tuple(x.shape), x.dtype), sbp=broadcast_only,
        kernels={"cpu": plain}, out_kernels={"cpu": into} if out_fn else None,
        differentiable=False,
    )  # fmt: skip
    return op


DOUBLE = _op("test_double", lambda x: 2 * x, lambda x, out: np.multiply(x, 2, out=out))
PLUS_ONE = _op("test_plus_one", lambda x: x + 1, lambda x, out: np.add(x, 1, out=out))
# returns its operand itself, without declaring a view: the first run sees it share memory
SAME = _op("test_same", lambda x: x)


def _apply(op: OpDef, x):
    return dispatch(op, (x,), {})


def _chain(fn, shape=(4,)):
    program = trace(fn, (shape, F32))
    return Chain(program.nodes, program.feeds, program.fetches), program


def test_a_chain_writes_outputs_of_out_kernels_into_its_buffers_from_the_second_run():
    chain, _ = _chain(lambda x: _apply(PLUS_ONE, _apply(DOUBLE, _apply(DOUBLE, x))) * 1)
    x = np.arange(4, dtype=np.float32)
    first = chain(x)[0]
    assert chain.arena is not None and len(chain.arena.views) == 3
    # two products alive at once at most: the second reuses nothing of the first, the sum
    # reuses the first product's buffer
    assert chain.arena.nbytes == 2 * x.nbytes
    before = CALLS["test_double"]["out"]
    second = chain(x + 1)[0]
    assert CALLS["test_double"]["out"] == before + 2
    np.testing.assert_array_equal(first, 4 * x + 1)
    np.testing.assert_array_equal(second, 4 * (x + 1) + 1)


def test_what_leaves_the_chain_is_never_a_buffer():
    """The fetched product and a fetched alias of another one keep their own memory: a later
    run does not overwrite what an earlier one returned."""
    chain, _ = _chain(lambda x: (_apply(DOUBLE, x), _apply(SAME, _apply(PLUS_ONE, x))))
    x = np.arange(4, dtype=np.float32)
    doubled, plus_one = chain(x)
    assert chain.arena.views == {}
    chain(x + 10)
    np.testing.assert_array_equal(doubled, 2 * x)
    np.testing.assert_array_equal(plus_one, x + 1)


def test_an_undeclared_alias_keeps_its_memory_alive():
    """`same(a)` is `a`: a's buffer lives until same's result is last read, so the later
    product cannot take it."""

    def fn(x):
        a = _apply(DOUBLE, x)
        b = _apply(SAME, a)
        c = _apply(PLUS_ONE, x)
        return b * c

    chain, _ = _chain(fn)
    x = np.arange(4, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(chain(x)[0], (2 * x) * (x + 1))
    assert len(chain.arena.views) == 2 and chain.arena.nbytes == 2 * x.nbytes


def test_a_second_caller_at_once_allocates_its_outputs():
    chain, _ = _chain(lambda x: _apply(PLUS_ONE, _apply(DOUBLE, x)) * 1)
    x = np.arange(4, dtype=np.float32)
    chain(x)
    result = []
    with chain._running:  # a run in progress on another thread
        worker = threading.Thread(target=lambda: result.append(chain(x)[0]))
        before = CALLS["test_double"]["out"]
        worker.start()
        worker.join()
    assert CALLS["test_double"]["out"] == before
    np.testing.assert_array_equal(result[0], 2 * x + 1)


def test_a_run_on_inputs_of_other_shapes_allocates_its_outputs():
    """As a fused node's last tile, smaller than the others, does."""
    chain, _ = _chain(lambda x: _apply(PLUS_ONE, _apply(DOUBLE, x)) * 1)
    chain(np.arange(4, dtype=np.float32))
    before = CALLS["test_double"]["out"]
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(chain(x)[0], 2 * x + 1)
    assert CALLS["test_double"]["out"] == before


def _check_out_kernel(op_name: str, *arrays, **attrs):
    """The op's out kernel returns the kernel's bits, written into `out` unless its operands
    are half precision (computed in float32 and rounded: fresh arrays). The kernel's
    results."""
    op = get_op(op_name)
    expected = kernel_for(op)(*arrays, **attrs)
    several = isinstance(expected, tuple)
    expected = expected if several else (expected,)
    out = tuple(np.full(e.shape, np.nan, e.dtype) for e in expected)
    got = out_kernel_for(op)(*arrays, out=out if several else out[0], **attrs)
    for g, e, o in zip(got if several else (got,), expected, out, strict=True):
        assert g.dtype == e.dtype and g.tobytes() == e.tobytes()
        assert np.shares_memory(g, o) == (arrays[0].dtype != flow.bfloat16.np)
    return expected


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "ta", "tb"),
    [
        ((5, 7), (7, 3), False, False),
        ((2, 5, 7), (7, 3), False, False),  # rows stacked into one GEMM
        ((2, 7, 5), (2, 3, 7), True, True),
        ((7,), (7, 3), False, False),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, flow.bfloat16.np])
def test_matmul_out_kernel_returns_the_kernels_bits(a_shape, b_shape, ta, tb, dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(dtype)
    b = rng.standard_normal(b_shape).astype(dtype)
    _check_out_kernel("matmul", a, b, ta=ta, tb=tb)


@pytest.mark.parametrize("x_shape", [(5, 7), (2, 5, 7)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, flow.bfloat16.np])
def test_linear_out_kernel_returns_the_kernels_bits(x_shape, bias, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal((3, 7)).astype(dtype)
    b = rng.standard_normal(3).astype(dtype) if bias else None
    _check_out_kernel("linear", x, w, b)


def test_graph_steps_reuse_buffers_and_keep_their_returned_outputs():
    """An MLP's training graph: its products run into the chain's buffers, each step equals
    eager bit for bit, and the hidden activation returned by one step is not overwritten by
    the next."""
    flow.manual_seed(0)
    make = lambda: flow.nn.Sequential(  # noqa: E731
        flow.nn.Linear(8, 16), flow.nn.ReLU(), flow.nn.Linear(16, 4)
    )
    eager_model, graph_model = make(), make()
    graph_model.load_state_dict(eager_model.state_dict())
    eager_opt = flow.optim.SGD(eager_model.parameters(), lr=0.1)
    graph_opt = flow.optim.SGD(graph_model.parameters(), lr=0.1)

    class Train(flow.nn.Graph):
        def __init__(self):
            super().__init__()
            self.model = graph_model
            self.add_optimizer(graph_opt)

        def build(self, x):
            hidden = self.model[0](x)
            loss = self.model[2](self.model[1](hidden)).square().mean()
            loss.backward()
            return loss, hidden

    graph = Train()
    rng = np.random.default_rng(0)
    batches = [rng.standard_normal((32, 8)).astype(np.float32) for _ in range(3)]
    hiddens = []
    for batch in batches:
        x = flow.tensor(batch)
        loss, hidden = graph(x)
        eager_hidden = eager_model[0](x)
        eager_loss = eager_model[2](eager_model[1](eager_hidden)).square().mean()
        eager_opt.zero_grad()
        eager_loss.backward()
        eager_opt.step()
        assert loss.numpy().tobytes() == eager_loss.numpy().tobytes()
        hiddens.append((hidden, eager_hidden.detach().numpy().copy()))
    for hidden, eager_hidden in hiddens:
        assert hidden.numpy().tobytes() == eager_hidden.tobytes()
    compiled = graph._latest
    chains = [t.fn for t in compiled.plan.tasks if isinstance(t.fn, Chain)]
    assert sum(len(c.arena.views) for c in chains) >= 3  # the backward's products at least


@pytest.mark.skipif(not jit.available(), reason="numba is not installed")
def test_a_generated_loop_writes_into_the_arrays_it_is_given():
    program = trace(lambda x: (x * 3).relu() - x, ((6,), F32))
    reference = Chain(program.nodes, program.feeds, program.fetches)
    kernel = GeneratedKernel(
        program.nodes, program.feeds, program.fetches, fallback=lambda x: reference(x)[0]
    )
    x = np.linspace(-2, 2, 6, dtype=np.float32)
    out = np.full(6, np.nan, np.float32)
    got = kernel(x, out=out)
    assert kernel.failure is None
    assert got is out and out.tobytes() == kernel(x).tobytes()


_BINARY_WITH_OUT = sorted(
    op.name
    for op in all_ops().values()
    if op.elementwise and op.inputs == ("input", "other") and "cpu" in op.out_kernels
)


def test_the_arithmetic_ops_write_into_given_arrays():
    assert {"add", "sub", "mul", "div"} <= set(_BINARY_WITH_OUT)


@pytest.mark.parametrize("name", _BINARY_WITH_OUT)
@pytest.mark.parametrize("dtype", [np.float32, flow.bfloat16.np, np.int64])
def test_binary_out_kernels_return_the_kernels_bits(name, dtype):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 4)) * 4).astype(dtype)
    y = (rng.standard_normal(4) * 4 + 8).astype(dtype)  # broadcast, no zeros to divide by
    try:
        expected = np.asarray(kernel_for(get_op(name))(x, y))
    except (TypeError, Rejected):  # the op refuses these dtypes: so must its out kernel
        with pytest.raises((TypeError, Rejected)):
            out_kernel_for(get_op(name))(x, y, out=np.empty((3, 4), dtype))
        return
    out = np.empty(expected.shape, expected.dtype)
    got = out_kernel_for(get_op(name))(x, y, out=out)
    assert got is out and got.tobytes() == expected.tobytes()
    # beside a half-precision array, a Python number keeps the kernel's own rules (rounding
    # to bfloat16): a fresh array
    expected = np.asarray(kernel_for(get_op(name))(x, 3))
    got = out_kernel_for(get_op(name))(x, 3, out=out)
    assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
    assert (got is out) == (dtype != flow.bfloat16.np)


@pytest.mark.skipif(not jit.available(), reason="numba is not installed")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, flow.bfloat16.np])
def test_generated_layer_norm_and_softmax_kernels_write_into_given_arrays(dtype):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6, 16)).astype(dtype)
    w, b = (rng.standard_normal(16).astype(dtype) for _ in range(2))
    shape = {"normalized_shape": (16,)}
    y, mean, rstd = _check_out_kernel("layer_norm", x, w, b, eps=1e-5, **shape)
    gy = rng.standard_normal(x.shape).astype(dtype)
    _check_out_kernel("layer_norm_backward", gy, x, w, mean, rstd, None, None, **shape)
    for name in ("softmax", "log_softmax"):
        y = _check_out_kernel(name, x, dim=-1)[0]
        _check_out_kernel(f"{name}_backward", gy, y, dim=-1)


def test_cat_writes_into_a_given_array():
    rng = np.random.default_rng(4)
    parts = [rng.standard_normal((2, n, 3)).astype(np.float32) for n in (1, 4)]
    _check_out_kernel("cat", *parts, dim=1)


def test_elementwise_kernels_write_over_an_operand_that_dies_there():
    """`(a + 1) * 2` runs in a's buffer; `c + c.t()` reads c at other positions through the
    view, so it cannot write over c."""

    def fn(x, w):
        a = x @ w
        b = (a + 1) * 2
        c = x @ w
        d = c + c.t()
        return b * 1, d * 1

    program = trace(fn, ((4, 4), F32), ((4, 4), F32))
    chain = Chain(program.nodes, program.feeds, program.fetches)
    rng = np.random.default_rng(5)
    x, w = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    for _ in range(2):
        b, d = chain(x, w)
        np.testing.assert_array_equal(b, ((x @ w + 1) * 2) * 1)
        np.testing.assert_array_equal(d, (x @ w + (x @ w).T) * 1)
    names = [node.op.name for node in program.nodes]
    first_product, second_product = (i for i, n in enumerate(names) if n == "matmul")
    first_add, second_add = (i for i, n in enumerate(names) if n == "add")
    views = {i: v[0] for i, v in chain.arena.views.items()}
    assert np.shares_memory(views[first_add], views[first_product])
    assert np.shares_memory(views[names.index("mul")], views[first_product])
    assert not np.shares_memory(views[second_add], views[second_product])


def test_embedding_writes_into_a_given_array():
    rng = np.random.default_rng(6)
    weight = rng.standard_normal((10, 3)).astype(np.float32)
    _check_out_kernel("embedding", rng.integers(0, 10, (2, 5)), weight, None)


@pytest.mark.parametrize(
    ("x_shape", "shape"), [((8, 5, 16), (16,)), ((8, 5, 16), (5, 1)), ((3, 4), (3, 4))]
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, flow.bfloat16.np])
def test_sum_to_size_writes_into_a_given_array(x_shape, shape, dtype):
    x = np.random.default_rng(7).standard_normal(x_shape).astype(dtype)
    _check_out_kernel("sum_to_size", x, shape=shape)


def test_a_chain_keeps_the_out_kernels_of_its_kernels_backend(monkeypatch):
    """Out kernels are chosen with the kernels, when the chain is made: a backend switched
    before its second run (use_generated_kernels) changes neither."""
    chain, _ = _chain(lambda x: _apply(PLUS_ONE, _apply(DOUBLE, x)) * 1)
    monkeypatch.setitem(DOUBLE.out_kernels, "cpu", None)
    x = np.arange(4, dtype=np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(chain(x)[0], 2 * x + 1)
    assert len(chain.arena.views) == 2


@pytest.mark.skipif(not jit.available(), reason="numba is not installed")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, flow.bfloat16.np])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_generated_gelu_kernels_write_into_given_arrays(dtype, approximate):
    """The kernel's bits, written into `out` where a loop runs: float32, and bfloat16's erf
    form (one pass over the bits); elsewhere fresh arrays."""
    rng = np.random.default_rng(4)
    x, gy = (rng.standard_normal((4, 6, 16)).astype(dtype) for _ in range(2))
    writes = dtype == np.float32 or (dtype == flow.bfloat16.np and approximate == "none")
    for name, arrays in (("gelu", (x,)), ("gelu_backward", (gy, x))):
        op = get_op(name)
        expected = kernel_for(op)(*arrays, approximate=approximate)
        out = np.full(expected.shape, np.nan, expected.dtype)
        got = out_kernel_for(op)(*arrays, approximate=approximate, out=out)
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()
        if writes:
            assert np.shares_memory(got, out)
