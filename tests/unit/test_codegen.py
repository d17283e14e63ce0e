"""Generated fused loops (`compiler/codegen.py`): every scalar rule against its op's NumPy
kernel (broadcasting, nan/inf, each dtype it covers), the loop layout, fused groups of real
training graphs against the unfused graph and eager mode, the disk cache across processes,
and the NumPy fallback without numba."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.functional as F
from tideflow.backends import jit
from tideflow.compiler import Tracer
from tideflow.compiler.chain import Chain
from tideflow.compiler.codegen import GeneratedKernel, Unsupported, _collapse, generate
from tideflow.compiler.passes.fuse import FusedKernel
from tideflow.framework.registry import all_ops, use_generated_kernels
from tideflow.models import GPT, GPTConfig
from tideflow.ops.activation import gelu_backward

needs_numba = pytest.mark.skipif(not jit.available(), reason="numba unavailable or disabled")
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _program(fn, feeds):
    tracer = Tracer()
    with tracer:
        out = fn(*(tracer.feed(shape, dtype) for shape, dtype in feeds))
    return tracer.finish(list(out) if isinstance(out, tuple | list) else [out])


def _generated_and_numpy(program, arrays, **options):
    members, inputs, outputs = program.nodes, program.feeds, program.fetches
    reference = Chain(members, inputs, outputs)
    kernel = GeneratedKernel(members, inputs, outputs, fallback=reference, **options)
    got = kernel(*arrays)
    assert kernel.failure is None, kernel.failure
    return (got if isinstance(got, tuple) else (got,)), reference(*arrays)


def _assert_close(got, expected, label, ulps=64):
    """Equal dtypes; integers and bools exactly, floats within `ulps` of the dtype's epsilon
    (relative, and absolute near 0: the rules compute what the kernels do, in another order
    or with another libm), nan where the kernel gives nan, infinities equal."""
    assert got.dtype == expected.dtype, label
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected, err_msg=label)
        return
    tol = ulps * np.finfo(expected.dtype).eps
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=label)


# -- every scalar rule ----------------------------------------------------------------------------
_SHAPE, _ROW, _COLUMN = (3, 4, 6), (4, 6), (3, 1, 1)


def _float_cases(x, y, s, unit):
    """(op name, call) on x of _SHAPE, y broadcast along the first axis, s along the last
    two, unit in (-1, 1) (asin, acos, atanh: a feed, as their conditioning near +-1 would
    magnify the last bit of a computed one): every float rule, each at least once with a
    broadcast operand or a Python scalar."""
    pos = x.abs() + 0.5  # the domain of logs and roots
    return [
        ("add", x + y),
        ("sub", s - x),
        ("mul", x * 0.5),
        ("div", x / y),
        ("pow", pos**y),
        ("atan2", flow.atan2(x, y)),
        ("hypot", flow.hypot(x, s)),
        ("copysign", flow.copysign(x, y)),
        ("xlogy", flow.xlogy(x, pos)),
        ("logaddexp", flow.logaddexp(x, y)),
        ("maximum", flow.maximum(x, y)),
        ("minimum", flow.minimum(x, s)),
        ("fmax", flow.fmax(x, y)),
        ("fmin", flow.fmin(y, x)),
        ("eq", x == y),
        ("ne", x != 0),
        ("lt", x < y),
        ("le", x <= s),
        ("gt", x > 1.5),
        ("ge", x >= y),
        ("logical_and", flow.logical_and(x, y)),
        ("logical_or", flow.logical_or(x > 0, y)),
        ("logical_xor", flow.logical_xor(x, y > 0)),
        ("where", flow.where(x > y, x, 0.25)),
        ("lerp", flow.lerp(x, x * 0.5 + 1, 0.75)),
        ("addcmul", flow.addcmul(x, y, s, value=0.5)),
        ("addcdiv", flow.addcdiv(x, y, pos, value=2.0)),
        ("neg", -x),
        ("abs", x.abs()),
        ("square", x.square()),
        ("reciprocal", x.reciprocal()),
        ("exp", x.exp()),
        ("exp2", flow.exp2(x)),
        ("expm1", x.expm1()),
        ("log", x.log()),
        ("log2", pos.log2()),
        ("log10", pos.log10()),
        ("log1p", x.log1p()),
        ("sqrt", x.sqrt()),
        ("rsqrt", pos.rsqrt()),
        ("sin", x.sin()),
        ("cos", x.cos()),
        ("tan", x.tan()),
        ("asin", unit.asin()),
        ("acos", unit.acos()),
        ("atan", x.atan()),
        ("sinh", x.sinh()),
        ("cosh", x.cosh()),
        ("tanh", x.tanh()),
        ("asinh", x.asinh()),
        ("acosh", (pos + 1).acosh()),
        ("atanh", unit.atanh()),
        ("sigmoid", x.sigmoid()),
        ("erf", x.erf()),
        ("erfc", x.erfc()),
        ("floor", x.floor()),
        ("ceil", x.ceil()),
        ("trunc", x.trunc()),
        ("frac", x.frac()),
        ("sign", x.sign()),
        ("clamp", x.clamp(-0.5, y)),
        ("nan_to_num", flow.nan_to_num(x, nan=1.5)),
        ("isnan", x.isnan()),
        ("isinf", x.isinf()),
        ("isfinite", x.isfinite()),
        ("logical_not", flow.logical_not(x)),
        ("relu", x.relu()),
        ("elu", F.elu(x, 1.5)),
        ("threshold", F.threshold(x, 0.1, -2.0)),
        ("hardshrink", F.hardshrink(x, 0.5)),
        ("hardtanh", F.hardtanh(x, -0.5, 0.75)),
        ("leaky_relu", F.leaky_relu(x, 0.1)),
        ("gelu", F.gelu(x)),
        ("gelu", F.gelu(x, approximate="tanh")),
        ("gelu_backward", gelu_backward(x * 0.5, x)),
        ("gelu_backward", gelu_backward(x * 0.5, x, approximate="tanh")),
        ("silu", F.silu(x)),
        ("mish", F.mish(x)),
        ("softplus", F.softplus(x, beta=2.0, threshold=3.0)),
        ("logsigmoid", F.logsigmoid(x)),
        ("hardsigmoid", F.hardsigmoid(x)),
        ("hardswish", F.hardswish(x)),
        ("softshrink", F.softshrink(x, 0.5)),
        ("cast", (x > 0).to(x.dtype)),
        ("clone", x.clone()),
    ]


def _with_specials(a: np.ndarray, seed: int) -> np.ndarray:
    """`a` with nan, +-inf, +-0 and large values at random places."""
    rng = np.random.default_rng(seed)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30], a.dtype)
    flat = a.reshape(-1)
    flat[rng.choice(flat.size, flat.size // 4, replace=False)] = rng.choice(
        specials, flat.size // 4
    )
    return a


def _check_float_rules(dtype):
    calls: list[str] = []

    def build(x, y, s, unit):
        cases = _float_cases(x, y, s, unit)
        calls.extend(name for name, _ in cases)
        return tuple(out for _, out in cases)

    feeds = [(_SHAPE, dtype), (_ROW, dtype), (_COLUMN, dtype), (_SHAPE, dtype)]
    program = _program(build, feeds)
    rng = np.random.default_rng(0)
    # scaled to reach past the activations' kinks and thresholds
    arrays = [
        _with_specials((rng.standard_normal(s) * 3).astype(dtype.np), i)
        for i, (s, _) in enumerate(feeds[:3])
    ]
    arrays.append(_with_specials(rng.uniform(-0.95, 0.95, _SHAPE).astype(dtype.np), 3))
    got, expected = _generated_and_numpy(program, arrays, libm=True)
    for name, g, e in zip(calls, got, expected, strict=True):
        _assert_close(g, e, f"{name} {dtype.name}")
    return set(calls)


@needs_numba
def test_every_float_rule_matches_its_numpy_kernel_float32():
    """All float rules in one loop (one compilation), against the members' NumPy kernels."""
    covered = _check_float_rules(flow.float32)
    with_rules = {name for name, op in all_ops().items() if op.scalar is not None}
    integral_only = {"bitwise_and", "bitwise_or", "bitwise_xor"}
    assert with_rules - integral_only <= covered | {"erfinv", "contiguous"}


@needs_numba
@pytest.mark.slow
def test_every_float_rule_matches_its_numpy_kernel_float64():
    _check_float_rules(flow.float64)


@needs_numba
@pytest.mark.parametrize("dtype", [flow.int32, flow.int64, flow.bool])
def test_integer_and_bool_rules_match_their_numpy_kernels(dtype):
    def build(x, y):
        cases = [x == y, x != y, x < y, x >= y, flow.logical_and(x, y), flow.logical_not(x)]
        cases += [
            flow.where(x > y, x, y),
            x.sign(),
            x.clone(),
            x.to(flow.float32),
            x.to(flow.bool),
        ]
        cases += [flow.bitwise_and(x, y), flow.bitwise_or(x, y), flow.bitwise_xor(x, y)]
        if dtype is not flow.bool:
            cases += [x + y, x - y, x * y, -x, x.abs(), x.square(), flow.maximum(x, y)]
            cases += [flow.minimum(x, y), x.clamp(-3, 4), x.relu(), x.floor(), x * 3 + 1]
            cases += [flow.addcmul(x, y, y, value=2), F.threshold(x, 1, -7)]
        return tuple(cases)

    program = _program(build, [(_SHAPE, dtype), (_ROW, dtype)])
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype.np) if dtype is not flow.bool else None
    arrays = [rng.integers(-5, 5, s).astype(dtype.np) for s in (_SHAPE, _ROW)]
    if info is not None:  # wrapping arithmetic at the type's ends
        arrays[0].reshape(-1)[:2] = (info.max, info.min)
    got, expected = _generated_and_numpy(program, arrays)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        _assert_close(g, e, f"case {i} {dtype.name}")


def _bf16_bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16) if a.dtype == flow.bfloat16.np else a


@needs_numba
def test_bfloat16_rules_compute_in_float32_and_round_per_member():
    """bfloat16 members load bits, compute in float32 and round once each, as the NumPy
    kernels: arithmetic bit for bit; transcendentals within a bfloat16 ulp (vecmath's float32
    functions are within a few float32 ulps of NumPy's). Constants must be bfloat16 values
    (GELU's are not: its group stays on NumPy kernels)."""

    def build(x, y):
        exact = [x + y, y - x, x * 0.5, x / y, -x, x.abs(), x.relu(), flow.maximum(x, y)]
        exact += [flow.where(x > y, x, float("-inf")), x.clamp(-0.5, 0.75), x.square()]
        exact += [(x.float() * 3 + 1).to(flow.bfloat16), x.to(flow.float32) - 0.25, x > y]
        close = [x.exp(), x.tanh(), x.sigmoid(), x.log1p()]
        return (*exact, *close)

    program = _program(build, [(_SHAPE, flow.bfloat16), (_ROW, flow.bfloat16)])
    rng = np.random.default_rng(5)
    arrays = [_with_specials((rng.standard_normal(s) * 3), i).astype(flow.bfloat16.np)
              for i, s in enumerate((_SHAPE, _ROW))]  # fmt: skip
    got, expected = _generated_and_numpy(program, arrays)
    for i, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert g.dtype == e.dtype, i
        g32, e32 = g.astype(np.float32), e.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(g32), np.isnan(e32))  # (NaN signs may differ)
        if i < 14:
            keep = ~np.isnan(e32)
            np.testing.assert_array_equal(_bf16_bits(g)[keep], _bf16_bits(e)[keep], f"case {i}")
            continue
        ulp = np.spacing(np.abs(e32).astype(flow.bfloat16.np)).astype(np.float32)
        finite = np.isfinite(e32)
        assert (np.abs(g32 - e32)[finite] <= ulp[finite]).all(), f"case {i}"


def test_unsupported_groups_say_why():
    half = _program(lambda x: x.exp() * 2, [((4,), flow.float16)])
    with pytest.raises(Unsupported, match="float16"):
        generate(half.nodes, half.feeds, half.fetches)
    # NumPy's kernels round a scalar to bfloat16 in some ops and not in others
    inexact = _program(lambda x: x * 0.3 + 1, [((4,), flow.bfloat16)])
    with pytest.raises(Unsupported, match=r"0\.3 is not a bfloat16 value"):
        generate(inexact.nodes, inexact.feeds, inexact.fetches)
    no_rule = _program(lambda x: flow.round(x * 2), [((4,), flow.float32)])
    with pytest.raises(Unsupported, match="round has no scalar rule"):
        generate(no_rule.nodes, no_rule.feeds, no_rule.fetches)
    scalar_libm = _program(lambda x: (x * 2).cosh(), [((4,), flow.float32)])
    with pytest.raises(Unsupported, match="libm's cosh"):
        generate(scalar_libm.nodes, scalar_libm.feeds, scalar_libm.fetches)


# -- the loop's layout ----------------------------------------------------------------------------
def test_axes_collapse_where_every_operand_broadcasts_alike():
    # a bias row: rows x columns; per-row statistics: the same two axes, the other way
    assert _collapse((8, 128, 256), [(8, 128, 256), (256,)]) == (
        (1024, 256),
        ((True, True), (False, True)),
    )
    assert _collapse((8, 128, 256), [(8, 128, 1)]) == ((1024, 256), ((True, False),))
    assert _collapse((4, 1, 5), [(4, 1, 5), (5,)]) == ((4, 5), ((True, True), (False, True)))
    assert _collapse((), [()]) == ((1,), ((True,),))


def test_loads_and_members_sit_in_the_outermost_loop_they_vary_in():
    program = _program(
        lambda x, m: (x - m) * (m * 2.0), [((8, 16), flow.float32), ((8, 1), flow.float32)]
    )
    source = generate(program.nodes, program.feeds, program.fetches).source
    lines = source.splitlines()
    row = next(i for i, line in enumerate(lines) if "for i1 in" in line)
    # the per-row operand and its product are computed once per row, before the inner loop
    assert any("x1 = a1[i0, 0]" in line for line in lines[:row])
    assert any("* K0" in line for line in lines[:row])
    assert "x0 = a0[i0, i1]" in source


def test_equal_groups_share_one_source():
    def group(x, b):
        return (x + b).relu() * 3.0

    one = _program(group, [((8, 16), flow.float32), ((16,), flow.float32)])
    other = _program(group, [((2, 5, 7), flow.float32), ((7,), flow.float32)])
    keys = [generate(p.nodes, p.feeds, p.fetches).key for p in (one, other)]
    assert keys[0] == keys[1]  # sizes are read from the arrays, not compiled in


# -- fused groups of real graphs ------------------------------------------------------------------
class _StepGraph(flow.nn.Graph):
    def __init__(self, model, loss):
        super().__init__()
        self.model = model
        # NOTE: SGD with lr 1: the step subtracts the gradient itself, which is compared
        self.add_optimizer(flow.optim.SGD(model.parameters(), lr=1.0))
        self.loss = loss

    def build(self, x, y):
        loss = self.loss(self.model, x, y)
        loss.backward()
        return loss


def _graph_step(make_model, loss, x, y, generated: bool):
    """Loss and parameters after one SGD(lr=1) step of a graph with or without generated
    kernels, and the graph's fused nodes."""
    model = make_model()
    before = use_generated_kernels(generated)
    try:
        graph = _StepGraph(model, loss)
        value = graph(x, y).item()
    finally:
        use_generated_kernels(before)
    params = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    fused = [n for n in graph._latest.program.nodes if n.op.name.startswith("fused(")]
    return value, params, fused


def _eager_step(make_model, loss, x, y):
    model = make_model()
    value = loss(model, x, y)
    value.backward()
    with flow.no_grad():
        for p in model.parameters():
            p -= p.grad
    return value.item(), {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _graph_generated_equals_numpy_and_eager(make_model, loss, x, y):
    value, params, fused = _graph_step(make_model, loss, x, y, generated=True)
    plain_value, plain_params, _ = _graph_step(make_model, loss, x, y, generated=False)
    eager_value, eager_params = _eager_step(make_model, loss, x, y)
    generated = [n.op.kernels[jit.KERNEL_KEY] for n in fused if jit.KERNEL_KEY in n.op.kernels]
    assert generated, "no group was generated"
    assert all(k.compile_seconds is not None and k.failure is None for k in generated)
    tol = float(64 * np.finfo(np.float32).eps)
    for reference_value, reference in ((plain_value, plain_params), (eager_value, eager_params)):
        assert value == pytest.approx(reference_value, rel=tol)
        for key, got in params.items():
            scale = max(1.0, float(np.abs(reference[key]).max()))
            np.testing.assert_allclose(got, reference[key], rtol=tol, atol=tol * scale, err_msg=key)
    return fused


@needs_numba
def test_mlp_graph_with_generated_loops_equals_numpy_graph_and_eager():
    def make():
        flow.manual_seed(0)
        # NOTE: Mish, whose backward is a chain of elementwise ops (GELU's is one op)
        return flow.nn.Sequential(flow.nn.Linear(12, 32), flow.nn.Mish(), flow.nn.Linear(32, 5))

    def loss(model, x, y):
        out = model(x)
        return F.cross_entropy(out, y) + (out * out).mean() * 0.01

    rng = np.random.default_rng(0)
    x = flow.tensor(rng.standard_normal((16, 12)).astype(np.float32))
    y = flow.tensor(rng.integers(0, 5, 16))
    fused = _graph_generated_equals_numpy_and_eager(make, loss, x, y)
    assert any("tanh" in n.op.name for n in fused)  # Mish's backward, with tanh


@needs_numba
def test_gpt_graph_with_generated_loops_equals_numpy_graph_and_eager():
    config = GPTConfig(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16)

    def make():
        flow.manual_seed(0)
        return GPT(config)

    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 32, (2, 9))
    x, y = flow.tensor(tokens[:, :-1]), flow.tensor(tokens[:, 1:])

    def loss(m, x, y):
        # NOTE: GPT's own backward has no chains of elementwise ops left (layer norm, softmax
        # and GELU backward are single ops): a logit penalty gives the fuser a chain.
        logits, ce = m(x, y)
        return ce + (logits * logits).mean() * 0.01

    _graph_generated_equals_numpy_and_eager(make, loss, x, y)


@needs_numba
def test_debug_shows_each_fused_group_and_its_source(capsys):
    model = flow.nn.Sequential(flow.nn.Linear(4, 8), flow.nn.Mish(), flow.nn.Linear(8, 2))
    graph = _StepGraph(model, lambda m, x, y: F.cross_entropy(m(x), y))
    graph.debug(1)
    graph(flow.randn(3, 4), flow.tensor([0, 1, 1]))
    out = capsys.readouterr().out
    assert "fused groups:" in out and "generated loop" in out and "def kernel(" in out


# -- the disk cache and the fallback --------------------------------------------------------------
_CHILD = textwrap.dedent(
    """
    import json, sys, time
    import numpy as np
    import tideflow as flow
    from tideflow.compiler import Tracer
    from tideflow.compiler.chain import Chain
    from tideflow.compiler.codegen import GeneratedKernel
    import numba  # imported before the clock starts: the load or compile is what is timed

    tracer = Tracer()
    with tracer:
        x, b = tracer.feed((64, 32), flow.float32), tracer.feed((32,), flow.float32)
        out = ((x + b).relu() * 0.5 - x).exp()
    program = tracer.finish([out])
    kernel = GeneratedKernel(program.nodes, program.feeds, program.fetches,
                             Chain(program.nodes, program.feeds, program.fetches))
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((64, 32), np.float32), rng.standard_normal(32, np.float32)]
    start = time.perf_counter()
    result = kernel(*arrays)
    print(json.dumps({"seconds": time.perf_counter() - start, "failure": kernel.failure,
                      "path": str(kernel.path), "sum": float(result.sum())}))
    """
)


def _child(env_changes: dict, script: str = _CHILD) -> dict:
    """What `script`, run in a fresh process with `env_changes`, printed last (JSON)."""
    run = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, **env_changes},
        capture_output=True,
        text=True,
        cwd=_REPO,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.splitlines()[-1])


@needs_numba
def test_a_second_process_loads_the_kernel_from_the_disk_cache(tmp_path):
    env = {"TIDEFLOW_KERNEL_CACHE": str(tmp_path)}
    first = _child(env)
    assert first["failure"] is None
    cached = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    assert any(p.suffix == ".nbi" for p in cached) and any(p.suffix == ".nbc" for p in cached)
    second = _child(env)
    assert second["sum"] == first["sum"]
    # nothing was compiled or written again: the same files, untouched, and a load, not a
    # compilation (typically milliseconds against a fraction of a second)
    assert {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()} == cached
    assert second["seconds"] < first["seconds"]


def test_without_numba_fused_groups_run_their_numpy_kernels(tmp_path):
    """TIDEFLOW_JIT=0: the same graph runs (no generated kernel is picked), and its loss
    agrees with this process's, generated or not."""
    script = textwrap.dedent(
        """
        import json
        import numpy as np
        import tideflow as flow
        from tideflow.backends import jit

        flow.manual_seed(0)
        model = flow.nn.Sequential(flow.nn.Linear(6, 16), flow.nn.GELU(), flow.nn.Linear(16, 3))

        class Step(flow.nn.Graph):
            def __init__(self):
                super().__init__()
                self.model = model
                self.add_optimizer(flow.optim.SGD(model.parameters(), lr=0.5))

            def build(self, x, y):
                loss = flow.nn.functional.cross_entropy(self.model(x), y)
                loss.backward()
                return loss

        rng = np.random.default_rng(0)
        x = flow.tensor(rng.standard_normal((8, 6)).astype(np.float32))
        y = flow.tensor(rng.integers(0, 3, 8))
        graph = Step()
        losses = [graph(x, y).item() for _ in range(3)]
        print(json.dumps({"available": jit.available(), "losses": losses}))
        """
    )
    results = {
        flag: _child({"TIDEFLOW_JIT": flag, "TIDEFLOW_KERNEL_CACHE": str(tmp_path)}, script)
        for flag in ("0", "1")
    }
    assert results["0"]["available"] is False
    tol = float(64 * np.finfo(np.float32).eps)
    assert results["1"]["losses"] == pytest.approx(results["0"]["losses"], rel=tol)


def test_the_fused_node_keeps_its_numpy_kernel_beside_the_generated_one():
    program = _program(lambda x: (x * 2).relu() + 1, [((5,), flow.float32)])
    from tideflow.compiler.passes import fuse_elementwise

    (node,) = fuse_elementwise(program).nodes
    assert isinstance(node.op.kernels["cpu"], FusedKernel)
    assert isinstance(node.op.kernels[jit.KERNEL_KEY], GeneratedKernel)


def test_a_loop_that_fails_to_compile_falls_back_to_numpy(tmp_path, monkeypatch):
    monkeypatch.setenv("TIDEFLOW_KERNEL_CACHE", str(tmp_path / "file"))
    (tmp_path / "file").write_text("")  # not a directory: the source cannot be written
    program = _program(lambda x: (x * 3).relu() - x, [((6,), flow.float32)])
    reference = Chain(program.nodes, program.feeds, program.fetches)
    kernel = GeneratedKernel(
        program.nodes, program.feeds, program.fetches, fallback=lambda x: reference(x)[0]
    )
    x = np.linspace(-2, 2, 6, dtype=np.float32)
    kernel.generated.key += "-unwritable"  # not loaded by an earlier test in this process
    np.testing.assert_array_equal(kernel(x), reference(x)[0])
    assert kernel.failure is not None
    np.testing.assert_array_equal(kernel(x), reference(x)[0])
