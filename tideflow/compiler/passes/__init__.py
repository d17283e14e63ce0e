"""Passes over the IR, each a function `Program -> Program` with its own tests, and the
pipeline `nn.Graph` runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..ir import Program
from .cse import cse
from .dce import dce
from .fold import fold_constants
from .memory import plan_memory

Pass = Callable[[Program], Program]

PIPELINE: tuple[tuple[str, Pass], ...] = (
    ("fold_constants", fold_constants),
    ("cse", cse),
    ("dce", dce),
    ("plan_memory", plan_memory),
)


def run_passes(
    program: Program,
    passes: Sequence[tuple[str, Pass]] = PIPELINE,
    on_pass: Callable[[str, Program], None] | None = None,
) -> Program:
    """Apply `passes` in order; `on_pass(name, program)` sees each result (graph.debug)."""
    for name, fn in passes:
        program = fn(program)
        if on_pass is not None:
            on_pass(name, program)
    return program


__all__ = ["PIPELINE", "Pass", "cse", "dce", "fold_constants", "plan_memory", "run_passes"]
