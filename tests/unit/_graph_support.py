"""Helpers of the graph compiler tests: trace a function into a Program, and run a Program
with a plain sequential interpreter (the reference the passes and the plan are checked
against)."""

from __future__ import annotations

import numpy as np
import pytest

from tideflow.compiler import Program, TensorHolder, Tracer, Value
from tideflow.framework.registry import kernel_for, use_generated_kernels


def trace(fn, *feeds, variables=None) -> Program:
    """The program of `fn(*lazy_feeds)`; `feeds` are (shape, dtype) pairs, `variables`
    name -> tensor. `fn` returns a tensor or a tuple of them."""
    tracer = Tracer()
    for name, t in (variables or {}).items():
        tracer.add_variable(name, t, TensorHolder(t))
    with tracer:
        out = fn(*(tracer.feed(shape, dtype) for shape, dtype in feeds))
    return tracer.finish(list(out) if isinstance(out, tuple) else [out])


def interpret(program: Program, feeds, step_attrs=None) -> list[np.ndarray]:
    """Run `program` node by node on NumPy arrays; the fetched arrays."""
    env: dict[Value, object] = dict(zip(program.feeds, feeds, strict=True))
    env.update((var.value, var.holder.array) for var in program.variables.values())
    env.update(program.constants)
    for node in program.nodes:
        args = [env[a] if isinstance(a, Value) else a for a in node.operands]
        attrs = node.attrs if node.step_attrs is None else step_attrs[node.step_attrs]
        out = kernel_for(node.op)(*args, **attrs)
        outs = (out,) if node.op.n_out == 1 else tuple(out or ())
        env.update(zip(node.outputs, map(np.asarray, outs), strict=True))
    return [np.array(env[v]) for v in program.fetches]


def op_names(program: Program) -> list[str]:
    return [node.op.name for node in program.nodes]


@pytest.fixture
def numpy_kernels():
    """NumPy kernels only, in graphs and eager code alike: for tests that hold a graph to the
    eager bits (generated loops round differently; test_codegen.py holds them to float
    rounding)."""
    before = use_generated_kernels(False)
    yield
    use_generated_kernels(before)
