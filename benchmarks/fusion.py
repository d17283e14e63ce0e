"""Elementwise fusion (`compiler/passes/fuse.py`) on chains from a GPT training step, single
thread, float32: median milliseconds of the chain as separate NumPy kernels (what an unfused
plan runs, intermediates freed after their last use), of the fused node's generated loop
("generated", `compiler/codegen.py`; compiled before timing; "-" where the chain is not
generated, e.g. erfc has no vectorizable form), of its NumPy kernels on whole arrays and tile
by tile for several tile sizes, and of numexpr when it is importable (it is not a
dependency). Two sizes: the GPT benchmark's MLP activations (8 x 128 x 1024, 4 MiB), within
the last-level cache, and GPT-2 small's at batch 8, block 512 (8 x 512 x 3072, 48 MiB), past it.

    python benchmarks/fusion.py
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import numpy as np

import tideflow as flow
from tideflow.backends import jit
from tideflow.compiler import Program, Tracer
from tideflow.compiler.chain import Chain
from tideflow.compiler.codegen import GeneratedKernel, Unsupported
from tideflow.compiler.passes import fuse_elementwise
from tideflow.compiler.passes.fuse import TILE_ELEMENTS, FusedKernel, _tiles

try:
    import numexpr
except ImportError:
    numexpr = None

# shape, tile sizes, timed calls per run
SIZES = (
    ((8, 128, 1024), (8192, 32768, TILE_ELEMENTS, 524288), 21),
    ((8, 512, 3072), (32768, TILE_ELEMENTS, 524288), 5),
)

_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)


def _bias_relu(x, b):
    return (x + b).relu()


def _bias_gelu(x, b):
    return flow.nn.functional.gelu(x + b)


def _gelu_backward(x, out, gy):
    """The ops of `activation._gelu_grad` (approximate='none'), as the backward traces them."""
    cdf = flow.where(x == 0, 0.5, out / x)
    pdf = (x * x * -0.5).exp() * _INV_SQRT_2PI
    return gy * (cdf + x * pdf)


def _adam(p, g, m, v):
    """AdamW's arithmetic on one parameter (no in-place writes: three outputs)."""
    m = m * 0.9 + g * 0.1
    v = v * 0.999 + g * g * 0.001
    return p * (1 - 3e-4 * 0.01) - m / (v.sqrt() + 1e-8) * 3e-4, m, v


# numexpr computes in float64 when a float32 array meets a Python float constant: its
# expressions name float32 constants instead, so both sides compute in float32.
NUMEXPR_CONSTANTS = {
    name: np.float32(value)
    for name, value in {
        "zero": 0.0, "half": 0.5, "minus_half": -0.5, "inv_sqrt_2pi": _INV_SQRT_2PI,
        "b1": 0.9, "one_minus_b1": 0.1, "b2": 0.999, "one_minus_b2": 0.001,
        "decay": 1 - 3e-4 * 0.01, "lr": 3e-4, "eps": 1e-8,
    }.items()
}  # fmt: skip

# name, function, its operands ("x": the whole shape, "row": its last axis), the numexpr
# expressions of its outputs
CHAINS: tuple[tuple[str, Callable, str, tuple[str, ...]], ...] = (
    ("bias + relu", _bias_relu, "x row", ("where(x0 + x1 > zero, x0 + x1, zero)",)),
    ("bias + GELU (erfc)", _bias_gelu, "x row", ()),  # numexpr has no erfc
    ("GELU alone", flow.nn.functional.gelu, "x", ()),
    (
        "GELU backward",
        _gelu_backward,
        "x x x",
        (
            "x2 * (where(x0 == zero, half, x1 / x0) "
            "+ x0 * exp(x0 * x0 * minus_half) * inv_sqrt_2pi)",
        ),
    ),
    (
        "Adam update (3 outputs)",
        _adam,
        "x x x x",
        (
            "x0 * decay - (x2 * b1 + x1 * one_minus_b1) "
            "/ (sqrt(x3 * b2 + x1 * x1 * one_minus_b2) + eps) * lr",
            "x2 * b1 + x1 * one_minus_b1",
            "x3 * b2 + x1 * x1 * one_minus_b2",
        ),
    ),
)


def _program(fn: Callable, shapes: list[tuple[int, ...]]) -> Program:
    tracer = Tracer()
    with tracer:
        out = fn(*(tracer.feed(s, flow.float32) for s in shapes))
    return tracer.finish(list(out) if isinstance(out, tuple) else [out])


def _unfused(program: Program) -> Callable[..., tuple]:
    """The program's kernels one by one on whole arrays, each intermediate dropped after its
    last use: how a plan's chain task runs an unfused program."""
    return Chain(program.nodes, program.feeds, program.fetches)


def _fused(program: Program, tile_elements: int) -> Callable[..., object]:
    """The chain as one fused kernel (a chain of one node too: what tiling alone gives)."""
    if len(program.nodes) == 1:
        (node,) = program.nodes
        tiles = _tiles(node.outputs[0].shape, tile_elements)
        return FusedKernel(program.nodes, program.feeds, program.fetches, tiles)
    (node,) = fuse_elementwise(program, tile_elements).nodes
    return node.op.kernels["cpu"]


def _generated(program: Program) -> Callable[..., object] | None:
    """The chain's generated loop, or None where it has none (or numba is unavailable)."""
    if not jit.available():
        return None
    try:
        kernel = GeneratedKernel(program.nodes, program.feeds, program.fetches, fallback=None)
    except Unsupported:
        return None
    return kernel


def _numexpr(expressions: tuple[str, ...]) -> Callable[..., list]:
    def run(*arrays):
        names = {f"x{i}": a for i, a in enumerate(arrays)} | NUMEXPR_CONSTANTS
        return [numexpr.evaluate(e, local_dict=names) for e in expressions]

    return run


def _interleaved_medians(runs: dict[str, Callable], arrays: list, repeat: int) -> dict:
    """Median ms of each run on `arrays`, timed in turns so load from other processes falls
    on all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for fn in runs.values():
        fn(*arrays)  # warm up
    for _ in range(repeat):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn(*arrays)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def run() -> list[tuple[str, dict[str, float]]]:
    rng = np.random.default_rng(0)
    rows = []
    for shape, tiles, repeat in SIZES:
        for name, fn, operands, expressions in CHAINS:
            shapes = [shape if kind == "x" else shape[-1:] for kind in operands.split()]
            arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
            program = _program(fn, shapes)
            runs = {"NumPy": _unfused(program)}
            generated = _generated(program)
            if generated is not None:
                runs["generated"] = generated
            runs["fused whole"] = _fused(program, math.prod(shape))
            runs |= {f"tile {t // 1024}K": _fused(program, t) for t in tiles}
            if numexpr is not None and expressions:
                runs["numexpr"] = _numexpr(expressions)
            ops = f"{len(program.nodes)} op" + "s" * (len(program.nodes) > 1)
            label = f"{name} ({ops}) {'x'.join(map(str, shape))}"
            rows.append((label, _interleaved_medians(runs, arrays, repeat)))
    return rows


def report(rows: list[tuple[str, dict[str, float]]]) -> str:
    columns = list(dict.fromkeys(c for _, row in rows for c in row))
    lines = [
        "elementwise chains, float32, median ms"
        + (", numexpr with 1 thread" if numexpr is not None else ", numexpr not installed"),
        f"{'chain':44}" + "".join(f"{c:>12}" for c in columns),
    ]
    for name, row in rows:
        cells = (f"{row[c]:12.2f}" if c in row else f"{'-':>12}" for c in columns)
        lines.append(f"{name:44}" + "".join(cells))
    return "\n".join(lines)


if __name__ == "__main__":
    if numexpr is not None:
        numexpr.set_num_threads(1)
    print(report(run()))
