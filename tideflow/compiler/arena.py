"""The memory plan applied: the buffers a chain's kernels write their outputs into, run after
run (`chain.Chain`).

A chain's run allocates nothing for an output that
- its node's kernel can write into a given array (`OpDef.out_kernels`), and that
- lives and dies inside the chain: neither it nor any array sharing its memory is an output
  of the chain (fetched, returned to Python, read by a later chain or another stream).

Such outputs get views of buffers the chain keeps, assigned by `passes.memory.best_fit` from
their lives in the chain's node order; an elementwise op writes over an operand that dies
there, of its output's shape and dtype, instead of taking a buffer of its own. Runs of one
chain never overlap (its actor acts once at a time; `Chain` refuses a second caller the
buffers), and within a run the nodes run in program order, so a buffer is rewritten only
after the last read of what it held.

Sharing memory is observed, not only declared: a first run with the ordinary kernels notes
each output that may share memory with one of its node's inputs (views, and kernels that
return an input unchanged, which ops do not declare). Such an output extends the life of its
input's buffer. An output sharing memory with two arrays leaves them all in memory of their
kernels' own, as does a result no view of a buffer can stand for (not C-contiguous).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .passes.memory import Life, best_fit


class Made(NamedTuple):
    """What node `index` produced in the observed run."""

    index: int
    reads: tuple[int, ...]  # the env slots it read
    writes: tuple[int, ...]  # the env slots of its outputs
    # per output: its (shape, dtype), or None if a view could not stand for it (not a
    # C-contiguous ndarray)
    metas: tuple[tuple[tuple[int, ...], np.dtype] | None, ...]
    shares: tuple[tuple[int, ...], ...]  # per output: the read slots it may share memory with


def observe(index: int, reads: Sequence[int], writes: Sequence[int], env: list, outs) -> Made:
    """The record of node `index` of a run that read `env[reads]` and produced `outs`."""
    inputs = [(slot, env[slot]) for slot in reads if isinstance(env[slot], np.ndarray)]
    shares = tuple(tuple(slot for slot, a in inputs if np.may_share_memory(out, a)) for out in outs)
    metas = tuple(
        (out.shape, out.dtype) if type(out) is np.ndarray and out.flags.c_contiguous else None
        for out in outs
    )
    return Made(index, tuple(reads), tuple(writes), metas, shares)


class Arena(NamedTuple):
    """Per node index that writes into buffers, the views it writes (one per output), and
    the bytes of the buffers behind them."""

    views: dict[int, tuple[np.ndarray, ...]]
    nbytes: int


def plan_arena(
    made: Sequence[Made],
    writable: frozenset[int],
    kept: frozenset[int],
    in_place: frozenset[int] = frozenset(),
) -> Arena:
    """The buffers of a chain: `made`, its nodes' records in order; `writable`, the indices of
    the nodes with an out variant of their kernel; `kept`, the slots the chain returns or
    was given (their memory is not the chain's to reuse); `in_place`, the writable nodes
    that may write over an operand (elementwise ops: each output element is made from the
    operands' elements at its position)."""
    root: dict[int, int] = {}  # slot -> the slot owning its memory, for shared outputs
    pinned: set[int] = set(kept)  # roots whose memory must stay the kernels' own
    for m in made:
        for slot, shared in zip(m.writes, m.shares, strict=True):
            owners = {root.get(s, s) for s in shared}
            if len(owners) == 1:
                root[slot] = owners.pop()
            elif owners:
                pinned |= owners | {slot}
    for slot in kept:
        pinned.add(root.get(slot, slot))
    last_read: dict[int, int] = {}
    for m in made:
        for slot in m.reads:
            last_read[root.get(slot, slot)] = m.index
    placed = [m for m in made if m.index in writable and _placeable(m, pinned)]
    over = _written_over([m for m in placed if m.index in in_place], placed, root, last_read)
    end = {s: last_read.get(s, m.index) for m in placed for s in m.writes}
    for slot, owner in over.items():
        end[owner] = max(end[owner], end[slot])
    lives = [
        Life(slot, m.index, end[slot], _nbytes(meta))
        for m in placed
        for slot, meta in zip(m.writes, m.metas, strict=True)
        if slot not in over
    ]
    buffers = best_fit(lives)
    memory = [np.empty(size, np.uint8) for size in buffers.sizes]
    views = {
        m.index: tuple(
            memory[buffers.of[over.get(slot, slot)]][: _nbytes(meta)].view(meta[1]).reshape(meta[0])
            for slot, meta in zip(m.writes, m.metas, strict=True)
        )
        for m in placed
    }
    return Arena(views, sum(buffers.sizes))


def _written_over(
    candidates: Sequence[Made], placed: Sequence[Made], root: dict[int, int], last_read: dict
) -> dict[int, int]:
    """The outputs of `candidates` written over an operand: output slot -> the slot whose
    buffer it takes. The operand must be placed, of the output's shape and dtype (each
    element overwritten by the one made from it), read by nothing later, and the node must
    read no other view of it (whose elements sit at other positions)."""
    meta_of = {s: meta for m in placed for s, meta in zip(m.writes, m.metas, strict=True)}
    over: dict[int, int] = {}
    for m in candidates:
        if len(m.writes) != 1:
            continue
        out = m.writes[0]
        for s in m.reads:
            if (
                s in meta_of
                and meta_of[s] == meta_of[out]
                and last_read.get(s) == m.index
                and all(r == s or root.get(r, r) != s for r in m.reads)
            ):
                over[out] = over.get(s, s)
                break
    return over


def _nbytes(meta: tuple[tuple[int, ...], np.dtype]) -> int:
    shape, dtype = meta
    return math.prod(shape) * dtype.itemsize


def _placeable(m: Made, pinned: set[int]) -> bool:
    """Whether every output of `m` may live in a buffer: one a view can stand for, fresh
    memory (sharing none of its inputs'), and memory nothing kept shares."""
    return all(
        meta is not None and not shared and slot not in pinned
        for slot, meta, shared in zip(m.writes, m.metas, m.shares, strict=True)
    )
