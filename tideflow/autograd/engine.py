"""The backward engine: runs the nodes the dispatcher recorded, latest first.

Nodes run when all their consumers have delivered gradients (dependency counts from one walk
of the graph), in decreasing creation order among the ready ones, like PyTorch's engine. Grad
rules run through the normal dispatcher, so with `create_graph=True` they record a graph of
their own and higher-order gradients come for free.
"""

from __future__ import annotations

import heapq
import threading

import numpy as np

from ..framework.dispatch import ANOMALY
from ..framework.errors import AutogradError, TideflowError
from ..framework.grad_mode import STATE
from ..framework.node import AccumulateGrad, Node, OpNode
from ..framework.tensor import Tensor, accumulator, make_tensor
from ..framework.views import is_stale, refresh_view

_running = threading.local()  # how many backward passes this thread is inside


def backward_running() -> bool:
    """Whether this thread is running a backward pass (graph tracing gives the nodes it
    records then the backward phase, whatever autograd node they come from)."""
    return getattr(_running, "depth", 0) > 0


def _root_edge(t: Tensor, what: str) -> tuple[Node, int]:
    if is_stale(t):  # a view whose base was written in place since: as the base is now
        refresh_view(t)
    if not t.requires_grad:
        raise AutogradError(f"{what}: the tensor does not require grad and has no grad_fn")
    if t.grad_fn is not None:
        return t.grad_fn, t._out_nr
    return accumulator(t), 0


def _root_grad(t: Tensor, g, what: str) -> Tensor:
    if g is None:
        if t.numel() != 1:
            raise AutogradError(
                f"{what}: grad can be implicitly created only for scalar outputs, but the "
                f"tensor has shape {list(t.shape)}; pass `gradient=` (a tensor of that shape)"
            )
        return make_tensor(np.ones(t._data.shape, t._data.dtype))
    if not isinstance(g, Tensor):
        g = make_tensor(np.asarray(g, dtype=t._data.dtype))
    if g._data.shape != t._data.shape:
        raise AutogradError(
            f"{what}: gradient of shape {list(g.shape)} does not match the tensor's shape "
            f"{list(t.shape)}"
        )
    return g


def _num_outputs(node: Node) -> int:
    if isinstance(node, OpNode):
        return 1 if node.op.n_out == 1 else len(node.out_meta)
    return getattr(node, "num_outputs", 1)


def _walk(roots: list[Node], with_children: bool):
    """Dependency counts (how many edges point at each node) and, if asked, each node's
    children (needed only to prune the graph for `autograd.grad`)."""
    deps: dict[Node, int] = {}
    children: dict[Node, list[Node]] = {}
    stack = list(dict.fromkeys(roots))
    seen = set(stack)
    while stack:
        node = stack.pop()
        if with_children:
            children[node] = [e[0] for e in node.edges if e is not None]
        for e in node.edges:
            if e is None:
                continue
            child = e[0]
            deps[child] = deps.get(child, 0) + 1
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return deps, children


def _needed(children: dict[Node, list[Node]], targets: set[Node]) -> set[Node]:
    """Nodes from which a target is reachable: only they run when gradients are captured."""
    needed: set[Node] = set()
    state: dict[Node, bool] = {}
    for start in children:
        if start in state:
            continue
        stack = [(start, iter(children[start]))]
        state[start] = False
        while stack:
            node, it = stack[-1]
            child = next(it, None)
            if child is None:
                stack.pop()
                if node in targets or any(c in needed for c in children[node]):
                    needed.add(node)
                state[node] = True
            elif child not in state:
                state[child] = False
                stack.append((child, iter(children[child])))
    return needed


def run_backward(
    tensors,
    grad_tensors,
    *,
    retain_graph: bool,
    create_graph: bool,
    inputs=None,
    allow_unused: bool = False,
    accumulate: bool = True,
    what: str = "backward",
):
    """Backpropagate from `tensors`. With `inputs`, gradients stop there: returned (for
    `autograd.grad`, accumulate=False) or accumulated into those tensors only."""
    roots = [_root_edge(t, what) for t in tensors]
    grads = [_root_grad(t, g, what) for t, g in zip(tensors, grad_tensors, strict=True)]
    deps, children = _walk([n for n, _ in roots], with_children=inputs is not None)

    captures: dict[tuple[Node, int], int] = {}
    if inputs is not None:
        for i, t in enumerate(inputs):
            if not t.requires_grad:
                raise AutogradError(f"{what}: input {i} does not require grad")
            captures[_root_edge(t, what)] = i
        needed = _needed(children, {n for n, _ in captures})
    else:
        needed = None
    results: list = [None] * (len(inputs) if inputs is not None else 0)

    buffers: dict[Node, list] = {}
    for (node, nr), g in zip(roots, grads, strict=True):
        buf = buffers.setdefault(node, [None] * _num_outputs(node))
        buf[nr] = g if buf[nr] is None else buf[nr] + g
    heap = [(-n.seq, n) for n in buffers if deps.get(n, 0) == 0]
    heapq.heapify(heap)
    stored = {id(g._data) for g in grads}  # arrays already handed out as some leaf's .grad

    prev = STATE.enabled
    STATE.enabled = create_graph
    _running.depth = getattr(_running, "depth", 0) + 1
    try:
        while heap:
            node = heapq.heappop(heap)[1]
            node_grads = buffers.pop(node)
            if node._prehooks:
                node.run_prehooks(node_grads)
            if captures:
                for nr, g in enumerate(node_grads):
                    idx = captures.get((node, nr))
                    if idx is not None:
                        results[idx] = g
            if isinstance(node, AccumulateGrad):
                if accumulate and (needed is None or node in needed):
                    _accumulate(node, node_grads[0], create_graph, stored)
                continue
            if node_grads.count(None) == len(node_grads):
                gxs = (None,) * len(node.edges)
            else:
                gxs = _apply(node, node_grads)
                if not retain_graph:
                    node.release()
            in_meta = node.in_meta
            for i, e in enumerate(node.edges):
                if e is None:
                    continue
                child, nr = e
                if needed is not None and child not in needed:
                    continue
                gx = gxs[i]
                if gx is not None:
                    data = getattr(gx, "_data", None)
                    meta = in_meta[i]
                    if data is None or data.shape != meta[0] or data.dtype != meta[1]:
                        gx = _conform(node, i, gx)
                    buf = buffers.get(child)
                    if buf is None:
                        buf = buffers[child] = [None] * _num_outputs(child)
                    buf[nr] = gx if buf[nr] is None else buf[nr] + gx
                deps[child] -= 1
                if deps[child] == 0:
                    buffers.setdefault(child, [None] * _num_outputs(child))
                    heapq.heappush(heap, (-child.seq, child))
    finally:
        STATE.enabled = prev
        _running.depth -= 1

    if inputs is not None and not accumulate:
        for i, r in enumerate(results):
            if r is None and not allow_unused:
                raise AutogradError(
                    f"{what}: input {i} was not used in the graph (pass allow_unused=True "
                    "to get None for it)"
                )
        return tuple(results)
    return None


def _apply(node: Node, grads: list) -> tuple:
    try:
        gxs = node.apply(grads)
    except TideflowError:
        raise
    except Exception as e:
        raise AutogradError(f"{node.name()}: backward failed: {type(e).__name__}: {e}") from e
    if not isinstance(gxs, tuple | list):
        gxs = (gxs,)
    if len(gxs) != len(node.edges):
        raise AutogradError(
            f"{node.name()}: backward returned {len(gxs)} gradients for {len(node.edges)} inputs"
        )
    if ANOMALY.enabled:
        for i, gx in enumerate(gxs):
            if isinstance(gx, Tensor) and np.isnan(np.asarray(gx._data, np.float64)).any():
                trace = getattr(node, "trace", None) or "(no forward trace recorded)\n"
                raise AutogradError(
                    f"Function '{node.name()}' returned nan values in its {i}th output.\n"
                    f"Forward call that created it:\n{trace}"
                )
    return gxs


def _conform(node: Node, i: int, gx):
    """Bring a gradient to its input's shape and dtype (reduce broadcast dims, cast)."""
    if not isinstance(gx, Tensor):
        raise AutogradError(f"{node.name()}: gradient {i} is a {type(gx).__name__}, not a tensor")
    shape, np_dtype = node.in_meta[i]  # nodes with edges (OpNode, FunctionNode) record it
    if gx._data.shape != shape:
        try:
            gx = gx.sum_to_size(shape)
        except TideflowError:
            raise AutogradError(
                f"{node.name()}: gradient {i} has shape {list(gx.shape)}, which cannot be "
                f"reduced to the input's shape {list(shape)}"
            ) from None
    if gx._data.dtype != np_dtype:
        if gx._data.dtype.kind == "c" and np_dtype.kind != "c":
            gx = gx.real  # a real operand of a complex op: the real part (PyTorch's convention)
        gx = gx.to(np_dtype)
    return gx


def _accumulate(node: AccumulateGrad, g: Tensor, create_graph: bool, stored: set) -> None:
    var = node.variable
    if var is None:
        return
    if var.grad is None:
        if create_graph:
            var.grad = g
        else:
            data = g._data
            # NOTE: a grad rule may pass one array on to several inputs, or a broadcast view;
            # a leaf's .grad must be its own writable array (optimizers update it in place).
            if id(data) in stored or data.base is not None or not data.flags.writeable:
                data = data.copy()
            stored.add(id(data))
            var.grad = make_tensor(data)
    elif create_graph:
        var.grad = var.grad + g
    else:
        np.add(var.grad._data, g._data, out=var.grad._data, casting="unsafe")
        var.grad._version[0] += 1
    if node._posthooks:
        for hook in list(node._posthooks.values()):
            hook(var)
