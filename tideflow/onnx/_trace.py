"""The program an export lowers: the model traced as an inference nn.Graph, through the passes
that keep every result; and, for dynamic axes, which dims of each value follow them."""

from __future__ import annotations

import linecache
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..compiler.ir import CONSTANT, Program, Value
from ..compiler.lazy import is_lazy
from ..compiler.passes import cse, dce, fold_constants, simplify
from ..framework.errors import TideflowError, UnsupportedError
from ..framework.grad_mode import no_grad
from ..framework.tensor import Tensor
from ..nn.graph import Graph
from ..nn.graph.compiled import trace_build
from ..ops.creation import zeros

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_USER_CODE = (_PACKAGE + "models" + os.sep,)  # the reference models count as user code

_exporting = 0  # exports tracing now (a model's forward may ask: `is_in_onnx_export`)


def is_in_onnx_export() -> bool:
    """Whether an export is tracing the model now (PyTorch's `torch.onnx.is_in_onnx_export`)."""
    return _exporting > 0


def traced(graph: Graph, tensors: Sequence[Tensor], spec, folding: bool, sites: dict) -> Program:
    """`graph.build` on `tensors` in eval mode without gradients, after constant folding
    (when `folding`), simplification, CSE and DCE. `sites` receives the user's line of each
    op call (by its first output)."""
    global _exporting
    modules = [m for root in graph._modules.values() for m in root.modules()]
    before = [(m, m.training, dict(vars(m))) for m in modules]
    _exporting += 1
    try:
        for m in modules:
            m.training = False
        with no_grad():
            program, _ = trace_build(graph, tensors, spec, _watch_calls(sites))
    finally:
        _exporting -= 1
        for m, training, state in before:
            m.training = training
            _restore(m, state)
    for fn in ([fold_constants] if folding else []) + [simplify, cse, dce]:
        program = fn(program)
    return program


def _restore(module, state: dict) -> None:
    """The attributes the module's forward set to tensors of the trace (a mask cached on the
    first call: eager calls must not find it) as they were before."""
    for name, value in list(vars(module).items()):
        if isinstance(value, Tensor) and is_lazy(value):
            if name in state:
                setattr(module, name, state[name])
            else:
                delattr(module, name)


def resized(tensors: Sequence[Tensor], axes: Sequence[Sequence[int]], step: int) -> list[Tensor]:
    """Stand-ins for `tensors` with each of their dynamic `axes` `step` longer (zeros: a
    trace reads shapes and dtypes only)."""
    out = []
    for t, dims in zip(tensors, axes, strict=True):
        shape = list(t.shape)
        for d in dims:
            shape[d] += step
        out.append(t if not dims else zeros(shape, dtype=t.dtype))
    return out


def dynamic_dims(first: Program, second: Program) -> tuple[dict, dict]:
    """For two traces of one model at two sizes of its dynamic axes: value -> {dim: source}
    for the dims whose size differs, in each; a dim's source is the (input position, axis)
    it has the size of in both traces, or None. The traces must run the same ops in the same
    order."""
    ops = [[n.op.name for n in p.nodes] for p in (first, second)]
    if ops[0] != ops[1]:
        at = next(
            (i for i, (a, b) in enumerate(zip(*ops, strict=False)) if a != b), min(map(len, ops))
        )
        node = first.nodes[at] if at < len(first.nodes) else second.nodes[at]
        module = node.scope.module if node.scope is not None else ""
        raise UnsupportedError(
            "onnx.export: the model runs different ops when the dynamic axes change size "
            f"(from op {at}, {node.op.name!r} in module {module!r}): Python code that loops "
            "or branches on a size (a loop over time steps) cannot follow a dynamic axis; "
            "export with that axis static"
        )
    maps: tuple[dict, dict] = ({}, {})
    pairs = [*zip(first.feeds, second.feeds, strict=True)]
    pairs += [
        pair
        for a, b in zip(first.nodes, second.nodes, strict=True)
        for pair in zip(a.outputs, b.outputs, strict=True)
    ]
    for a, b in pairs:
        dims = {
            i: _axis_sized(first, second, m, n)
            for i, (m, n) in enumerate(zip(a.shape, b.shape, strict=True))
            if m != n
        }
        if dims:
            maps[0][a], maps[1][b] = dims, dims
    return maps


@dataclass(frozen=True)
class Fill:
    """A constant holding one value repeated, whose shape follows the dynamic axes (zeros
    of an input's shape, an RNN's initial state): built when the graph runs, the value
    expanded to a shape read off the inputs. `dims`: per dim, its size or the (input
    position, axis) it has the size of."""

    value: np.ndarray  # 0-d
    dims: tuple

    @property
    def dynamic(self) -> dict:
        """{dim: source} of its dynamic dims, as `dynamic_dims` gives them."""
        return {i: d for i, d in enumerate(self.dims) if not isinstance(d, int)}


def fills(first: Program, second: Program) -> tuple[dict, dict]:
    """The constants of two aligned traces (see `dynamic_dims`) that are `Fill`s: read at the
    same operand of the same node, of one value in both, with sizes that differ where an
    input's dynamic axis does. Constant -> its Fill, in each trace."""
    found: tuple[dict, dict] = ({}, {})
    for a, b in zip(first.nodes, second.nodes, strict=True):
        for x, y in zip(a.operands, b.operands, strict=True):
            if not (isinstance(x, Value) and isinstance(y, Value)) or x in found[0]:
                continue
            if x.kind != CONSTANT or y.kind != CONSTANT or x.shape == y.shape:
                continue
            fill = _fill(first, second, x, y)
            if fill is not None:
                found[0][x], found[1][y] = fill, fill
    return found


def _fill(first: Program, second: Program, x: Value, y: Value) -> Fill | None:
    ax, ay = first.constants[x], second.constants[y]
    if len(x.shape) != len(y.shape) or not ax.size or not ay.size:
        return None
    value = ax.reshape(-1)[0]
    if not (np.array_equal(ax, np.full_like(ax, value), equal_nan=True)
            and np.array_equal(ay, np.full_like(ay, value), equal_nan=True)):  # fmt: skip
        return None
    dims: list = []
    for m, n in zip(x.shape, y.shape, strict=True):
        source = m if m == n else _axis_sized(first, second, m, n)
        if source is None:
            return None
        dims.append(source)
    return Fill(np.asarray(value), tuple(dims))


def _axis_sized(first: Program, second: Program, m: int, n: int) -> tuple[int, int] | None:
    """The first (input position, axis) of size m in one trace and n in the other."""
    for k, (f, h) in enumerate(zip(first.feeds, second.feeds, strict=True)):
        for axis, (p, q) in enumerate(zip(f.shape, h.shape, strict=True)):
            if (p, q) == (m, n):
                return k, axis
    return None


def _watch_calls(sites: dict):
    """A dispatch handler noting the user's line of each op call (by its first output's IR
    value), for the errors of ops that cannot be exported."""

    def watch(op, args, attrs, below):
        out = below(op, args, attrs)
        first = out[0] if isinstance(out, tuple | list) else out
        if isinstance(first, Tensor):
            sites[first._data.value] = _user_line()
        return out

    return watch


class Site(NamedTuple):
    """A line of the user's code (formatted only for an error message)."""

    filename: str
    lineno: int

    def __str__(self) -> str:
        code = linecache.getline(self.filename, self.lineno).strip()
        return f"{self.filename}:{self.lineno}: {code}"


def _user_line() -> Site | None:
    """The innermost caller outside tideflow's own code."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(_PACKAGE) or name.startswith(_USER_CODE):
            return Site(name, frame.f_lineno)
        frame = frame.f_back
    return None


def trace_error(error: TideflowError, step: int) -> UnsupportedError:
    return UnsupportedError(
        "onnx.export: tracing the model again with its dynamic axes "
        f"{'longer' if step > 0 else 'shorter'} by one failed ({error}); dynamic axes must be "
        "free to change size"
    )
