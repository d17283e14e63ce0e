"""Elementwise fusion: a group of elementwise nodes runs as one node.

The fused node has two kernels. Its "cpu-jit" kernel is a loop generated from the members'
scalar rules (`compiler/codegen.py`: one pass over the output, intermediates in registers,
cached on disk by the group's source), which `kernel_for` picks where generated kernels are
allowed (numba installed, `TIDEFLOW_JIT` not 0, `use_generated_kernels`). Its "cpu" kernel
runs the members as a `Chain` (their own NumPy kernels: one op, one place, no second formula
to keep in step), in program order, each intermediate freed after its last use: the kernel
without numba, for groups the generator does not cover (a member without a scalar rule, a
half-precision dtype), and wherever a generated loop fails to compile.

The NumPy path runs large groups tile by tile along the leading axes, so a tile's
intermediates stay in cache and only the group's outputs travel to memory: that pays once a
chain's arrays outgrow the last-level cache, and bounds the memory a group's intermediates
take to a tile's (`benchmarks/fusion.py` measures both paths). Groups no larger than one tile
run on whole arrays. Elementwise kernels are position-independent, so tiles give the same
bits as whole arrays.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from ...backends import jit
from ...framework.registry import Meta, OpDef
from ...framework.sbp import B, S, Signature
from ..chain import Chain
from ..codegen import GeneratedKernel, Unsupported
from ..ir import Node, Program, Value

TILE_ELEMENTS = 1 << 17  # 512 KiB of float32: the best of 32K-256K tiles on 1M-12M elements


def fuse_elementwise(program: Program, tile_elements: int = TILE_ELEMENTS) -> Program:
    """Replace each group of two or more connected elementwise nodes of one output shape by
    one node running their kernels on tiles of at most `tile_elements`; its outputs are the
    members' values read outside the group or fetched (the other intermediates no longer
    exist as arrays: the memory plan sees the fused node's outputs only).

    A node joins the groups of its operands while no node outside them has read their values
    yet, so the fused node can take the place of its last member with no node reordered.
    Views, effectful nodes (random draws, in-place writes) and multi-output ops stay apart.

    >>> print(fuse_elementwise(program))  # e.g. %9 = fused(mul,add,tanh)(%2, %5)
    """
    groups = [g for g in _groups(program.nodes) if len(g.members) > 1]
    if not groups:
        return program
    read_outside = _read_outside(program, groups)
    fused_at: dict[Node, Node] = {}  # last member -> the fused node replacing its group
    members: set[Node] = set()
    for group in groups:
        outputs = tuple(v for n in group.members for v in n.outputs if v in read_outside)
        fused_at[group.members[-1]] = _fused_node(program, group.members, outputs, tile_elements)
        members.update(group.members)
    nodes = tuple(fused_at.get(n, n) for n in program.nodes if n not in members or n in fused_at)
    return program.replace(nodes=nodes)


# -- grouping --------------------------------------------------------------------------------------
class _Group:
    __slots__ = ("members", "shape")

    def __init__(self, members: list[Node], shape: tuple[int, ...]) -> None:
        self.members = members
        self.shape = shape


def _fusible(node: Node) -> bool:
    op = node.op
    return op.elementwise and not op.view and len(node.outputs) == 1 and not node.effectful


def _groups(nodes: Sequence[Node]) -> list[_Group]:
    """Groups of fusible nodes of one output shape, members in program order. A group stays
    open while only its members read its values; the first other node reading one closes it.
    So every reader outside a group comes after its last member, where the fused node goes."""
    position = {node: i for i, node in enumerate(nodes)}
    open_group: dict[Value, _Group] = {}
    groups: list[_Group] = []
    for node in nodes:
        read = {open_group[v] for v in node.inputs if v in open_group}
        joined = None
        if _fusible(node):
            shape = node.outputs[0].shape
            joined = _Group([node], shape)
            for group in read:
                if group.shape == shape:  # absorbed: emptied, its values now `joined`'s
                    joined.members += group.members
                    group.members = []
            joined.members.sort(key=position.__getitem__)
            groups.append(joined)
            open_group.update((m.outputs[0], joined) for m in joined.members)
        for group in read - {joined}:
            for member in group.members:
                del open_group[member.outputs[0]]
    return [g for g in groups if g.members]


def _read_outside(program: Program, groups: Sequence[_Group]) -> set[Value]:
    """The members' values that a node outside their group reads, or that are fetched."""
    group_of = {n: g for g in groups for n in g.members}
    produced_by = {v: group_of[n] for n in group_of for v in n.outputs}
    read = set(program.fetches)
    for node in program.nodes:
        for v in node.inputs:
            if v in produced_by and group_of.get(node) is not produced_by[v]:
                read.add(v)
    return read


# -- the fused node --------------------------------------------------------------------------------
def _fused_node(
    program: Program,
    members: Sequence[Node],
    outputs: tuple[Value, ...],
    tile_elements: int,
) -> Node:
    """One node computing `outputs` from the values the members read from outside."""
    defined = {v for n in members for v in n.outputs}
    inputs = tuple(dict.fromkeys(v for n in members for v in n.inputs if v not in defined))
    shape = members[0].outputs[0].shape
    kernel = FusedKernel(members, inputs, outputs, _tiles(shape, tile_elements))
    kernels: dict[str, Callable] = {"cpu": kernel}
    out_kernels: dict[str, Callable] = {}
    try:
        generated = GeneratedKernel(members, inputs, outputs, fallback=kernel)
        kernels[jit.KERNEL_KEY] = out_kernels[jit.KERNEL_KEY] = generated
    except Unsupported as exc:
        kernel.not_generated = str(exc)
    metas = tuple(v.meta for v in outputs)
    op = OpDef(
        f"fused({','.join(n.op.name for n in members)})",
        inputs=tuple(f"x{i}" for i in range(len(inputs))),
        meta=lambda *_, **__: metas[0] if len(metas) == 1 else metas,
        sbp=_fused_sbp(shape, len(outputs)),
        kernels=kernels,
        out_kernels=out_kernels,
        n_out=len(outputs),
        differentiable=False,
    )
    # NOTE: it runs in its last member's place, so it counts as that member's work (timelines)
    return Node(next(program.ids), op, inputs, {}, outputs, scope=members[-1].scope)


def _fused_sbp(shape: tuple[int, ...], n_out: int) -> Callable[..., list[Signature]]:
    """Every member maps equal positions to equal positions, so the group does too: split
    any output axis (operands of size 1 along it stay B), or all B. No P: few members are
    linear."""

    def sbp(*metas: Meta, **_) -> list[Signature]:
        sigs = []
        for axis in range(len(shape)):
            ins = []
            for m in metas:
                a = axis - (len(shape) - len(m.shape))
                ins.append(S(a) if a >= 0 and m.shape[a] == shape[axis] else B)
            sigs.append(Signature(tuple(ins), (S(axis),) * n_out))
        sigs.append(Signature((B,) * len(metas), (B,) * n_out))
        return sigs

    return sbp


def _tiles(shape: tuple[int, ...], tile_elements: int) -> list[tuple[slice, ...]]:
    """Index tuples cutting `shape` into C-contiguous blocks of at most `tile_elements`:
    single indices of the leading axes, a range of one axis, the trailing axes whole. Empty
    if the whole shape is one block."""
    axis, inner = len(shape), 1
    while axis > 0 and inner * shape[axis - 1] <= tile_elements:
        axis -= 1
        inner *= shape[axis]
    if axis == 0:
        return []
    cut = axis - 1
    step = max(1, tile_elements // inner)
    return [
        (*(slice(i, i + 1) for i in lead), slice(start, start + step))
        for lead in itertools.product(*map(range, shape[:cut]))
        for start in range(0, shape[cut], step)
    ]


class FusedKernel:
    """`kernel(*input_arrays)` runs the members as a `Chain` (their own CPU kernels in program
    order, each intermediate dropped after its last use), on whole arrays or tile by tile
    (`tiles`: index tuples of the output shape), and returns the arrays of `outputs`. A
    member whose kernel raises fails the call with a `StepError` naming the member's node
    (the op that failed, as without fusion)."""

    def __init__(
        self,
        members: Sequence[Node],
        inputs: Sequence[Value],
        outputs: Sequence[Value],
        tiles: list[tuple[slice, ...]],
    ) -> None:
        self._chain = Chain(members, inputs, outputs)
        self.not_generated = ""  # why the group has no generated loop, if it has none
        self._shapes = tuple(v.shape for v in outputs)
        ndim = len(members[0].outputs[0].shape)
        self._tiles = tuple(
            (tile, tuple(_operand_index(v.shape, tile, ndim) for v in inputs)) for tile in tiles
        )

    @property
    def tiled(self) -> bool:
        """Whether calls run tile by tile (else on whole arrays: the group fits in a tile)."""
        return bool(self._tiles)

    def __call__(self, *arrays: np.ndarray):
        outs = self._run_tiles(arrays) if self._tiles else self._chain(*arrays)
        return outs[0] if len(outs) == 1 else outs

    def _run_tiles(self, arrays: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        outs: list[np.ndarray | None] = [None] * len(self._shapes)
        for tile, operand_index in self._tiles:
            parts = self._chain(
                *(a if i is None else a[i] for a, i in zip(arrays, operand_index, strict=True))
            )
            for j, part in enumerate(parts):
                if outs[j] is None:  # the dtype the kernel gives, as unfused
                    outs[j] = np.empty(self._shapes[j], part.dtype)
                outs[j][tile] = part
        return tuple(outs)


def _operand_index(shape: tuple[int, ...], tile: tuple[slice, ...], ndim: int):
    """The part of an operand of `shape` that a tile of the `ndim`-d output reads (operands
    broadcast, aligned on the right): the tile's range along each tiled axis where the
    operand is not of size 1, all of it elsewhere; None when that is the whole operand."""
    index = tuple(
        tile[axis] if axis < len(tile) and size != 1 else slice(None)
        for axis, size in enumerate(shape, ndim - len(shape))
    )
    return None if all(i == slice(None) for i in index) else index


def describe_fused(program: Program) -> str:
    """Each fused node of `program` with how it runs: its generated loop (where the source
    is cached, and the source) or why it runs its members' NumPy kernels (graph.debug(1))."""
    parts = []
    for node in program.nodes:
        numpy_kernel = node.op.kernels.get("cpu")
        if not isinstance(numpy_kernel, FusedKernel):
            continue
        generated = node.op.kernels.get(jit.KERNEL_KEY)
        if generated is None:
            parts.append(f"{node.name}: NumPy kernels ({numpy_kernel.not_generated})")
        else:
            how = "generated loop" if jit.available() else "generated loop, unused (no numba)"
            parts.append(f"{node.name}: {how}, {generated.path}\n{generated.source}")
    return "\n".join(parts)
