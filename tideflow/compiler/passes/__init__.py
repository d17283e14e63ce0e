"""Passes over the IR, each a function `Program -> Program` with its own tests, and the
pipeline `nn.Graph` runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from ..ir import Program
from .boxing import fuse_boxing
from .cast_scale import fuse_cast_scale
from .checkpoint import recompute_checkpointed
from .comm import own_communicators
from .cse import cse
from .dce import dce
from .fold import fold_constants
from .fuse import fuse_elementwise
from .memory import plan_memory
from .pipeline import schedule_micro_batches
from .regather import regather_parameters
from .simplify import simplify

Pass = Callable[[Program], Program]

PIPELINE: tuple[tuple[str, Pass], ...] = (
    ("own_communicators", own_communicators),
    ("fold_constants", fold_constants),
    ("simplify", simplify),
    ("cse", cse),
    ("dce", dce),
    ("fuse_boxing", fuse_boxing),
    # NOTE: after CSE, which would merge the recomputed nodes back into the originals.
    ("recompute_checkpointed", recompute_checkpointed),
    # NOTE: after checkpointing, so recomputed forward nodes read a gather of the backward.
    ("regather_parameters", regather_parameters),
    ("fuse_elementwise", fuse_elementwise),
    ("plan_memory", plan_memory),
)

# The passes a graph runs only when its config allows them, by `GraphConfig.optimizations` key.
OPTIONAL: dict[str, Pass] = {"fuse_cast_scale": fuse_cast_scale}


def pipeline(config, stage: tuple[int, int] | None = None) -> tuple[tuple[str, Pass], ...]:
    """The passes of a graph with `config`: PIPELINE with the optional passes the config
    turns on before elementwise fusion (whose groups would otherwise take their nodes), and,
    for pipeline stage `stage` = (stage, stages) with gradient accumulation, the 1F1B
    schedule of its micro-batches first (CSE must keep the node that runs first)."""
    chosen = [(name, fn) for name, fn in OPTIONAL.items() if config.optimizations.get(name)]
    names = [name for name, _ in PIPELINE]
    at = names.index("fuse_elementwise")
    passes = [*PIPELINE[:at], *chosen, *PIPELINE[at:]]
    if stage is not None and config.gradient_accumulation_steps > 1:
        schedule = partial(schedule_micro_batches, stage=stage[0], stages=stage[1])
        passes.insert(names.index("own_communicators") + 1, ("schedule_micro_batches", schedule))
    return tuple(passes)


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


__all__ = [
    "PIPELINE",
    "Pass",
    "cse",
    "dce",
    "fold_constants",
    "fuse_boxing",
    "fuse_cast_scale",
    "fuse_elementwise",
    "own_communicators",
    "pipeline",
    "plan_memory",
    "recompute_checkpointed",
    "regather_parameters",
    "run_passes",
    "schedule_micro_batches",
    "simplify",
]
