"""Verify SBP signatures without communication: shard the operands over simulated ranks in
one process, run the kernel on each shard, combine the outputs as the output SBP says, and
compare with the unsharded result.

`record_calls` captures the (op, operands, attrs) triples that public calls dispatch, so the
checks are generated from the op database's samples.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from ..framework.dispatch import infer, run_local
from ..framework.grad_mode import no_grad
from ..framework.modes import dispatch_mode
from ..framework.registry import Meta, OpDef
from ..framework.sbp import B, P, Signature, Split
from ..framework.tensor import Tensor, make_tensor


@dataclass
class Call:
    op: OpDef
    args: tuple  # NumPy arrays where the call had tensors (snapshots), else the values
    attrs: dict
    outs: tuple  # output arrays


@contextlib.contextmanager
def record_calls():
    """Capture every dispatched call made inside the block (on the local path)."""
    calls: list[Call] = []

    def record(op, args, attrs, below):
        snap = tuple(a._data.copy() if isinstance(a, Tensor) else a for a in args)
        out = run_local(op, args, attrs)
        outs = () if out is None else out if isinstance(out, tuple) else (out,)
        # NOTE: outputs are snapshots too: later in-place ops may write them
        calls.append(Call(op, snap, dict(attrs), tuple(o._data.copy() for o in outs)))
        return out

    with dispatch_mode(record):
        yield calls


def _tensors(args: tuple) -> tuple:
    return tuple(make_tensor(a) if isinstance(a, np.ndarray) else a for a in args)


def metas_of(args: tuple) -> list:
    from ..framework import dtype as dtypes

    return [
        Meta(tuple(a.shape), dtypes.from_numpy(a.dtype)) if isinstance(a, np.ndarray) else a
        for a in args
    ]


def check_meta(call: Call) -> str | None:
    """None if the op's meta rule agrees with what the kernel produced, else a message.
    A -1 in a meta shape marks a data-dependent size (nonzero, unique): any size matches."""
    got = infer(call.op, metas_of(call.args), call.attrs)
    got = got if isinstance(got, tuple) and not isinstance(got, Meta) else (got,)
    if len(got) != len(call.outs):
        return f"meta gives {len(got)} outputs, the kernel {len(call.outs)}"
    for i, (m, o) in enumerate(zip(got, call.outs, strict=True)):
        shape_ok = len(m.shape) == o.ndim and all(
            d == -1 or d == k for d, k in zip(m.shape, o.shape, strict=True)
        )
        if not shape_ok or m.dtype.np != o.dtype:
            meta = f"{list(m.shape)} {m.dtype}"
            return f"output {i}: meta says {meta}, kernel gave {list(o.shape)} {o.dtype}"
    return None


def _shard(x, sbp, n: int, rng: np.random.Generator) -> list:
    if not isinstance(x, np.ndarray):
        return [x] * n
    if sbp is B:
        return [x] * n
    if isinstance(sbp, Split):
        return np.array_split(x, n, axis=sbp.axis)
    # P: parts that sum to x (rank 0 holds x, the rest zeros for non-floats)
    if x.dtype.kind in "biu":
        return [x] + [np.zeros_like(x)] * (n - 1)
    parts = [rng.uniform(-1, 1, x.shape).astype(x.dtype) for _ in range(n - 1)]
    last = _wide(x) - sum(_wide(p) for p in parts)
    return [*parts, np.asarray(last.astype(x.dtype))]  # asarray: 0-d stays an array


def _wide(a: np.ndarray) -> np.ndarray:
    """`a` in float64, or complex128 for complex arrays (the imaginary parts count too)."""
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _combine(outs: list, sbp, op: str) -> np.ndarray:
    if isinstance(sbp, Split):
        return np.concatenate(outs, axis=sbp.axis)
    if sbp is P:
        total = _wide(outs[0])
        for o in outs[1:]:
            total = total + _wide(o)
        return total
    for r, o in enumerate(outs[1:], 1):
        if o.shape != outs[0].shape or not np.allclose(_wide(o), _wide(outs[0]), equal_nan=True):
            raise AssertionError(f"{op}: B output differs between rank 0 and rank {r}")
    return outs[0]


def check_signature(call: Call, sig: Signature, n: int = 2, rtol=1e-5, atol=1e-6) -> str | None:
    """None if running `sig` on n simulated ranks reproduces the unsharded outputs (and, for
    ops that write operands in place, the unsharded updated operands)."""
    op = call.op
    if len(sig.ins) != len(call.args):
        return f"signature {sig} has {len(sig.ins)} inputs, the call {len(call.args)}"
    for a, s in zip(call.args, sig.ins, strict=True):
        if isinstance(s, Split) and isinstance(a, np.ndarray) and a.shape[s.axis] < n:
            return None  # too small to split over n ranks: nothing to check
        if s is P and isinstance(a, np.ndarray) and a.dtype == np.bool_:
            return None
    rng = np.random.default_rng(0)
    # NOTE: every rank gets its own copy of its shard: kernels of `mutates` ops write them.
    shards = [
        [x.copy() if isinstance(x, np.ndarray) else x for x in _shard(a, s, n, rng)]
        for a, s in zip(call.args, sig.ins, strict=True)
    ]
    attrs = call.attrs
    if op.local_attrs is not None:
        attrs = op.local_attrs(attrs, sig, *metas_of(call.args))
    per_rank = []
    with no_grad():
        for r in range(n):
            out = run_local(op, _tensors(tuple(s[r] for s in shards)), attrs)
            per_rank.append(() if out is None else out if isinstance(out, tuple) else (out,))
    results = [
        (f"output {i}", _combine([outs[i]._data for outs in per_rank], osbp, op.name), want)
        for i, (want, osbp) in enumerate(zip(call.outs, sig.outs, strict=True))
    ]
    if op.mutates:
        updated = [a.copy() if isinstance(a, np.ndarray) else a for a in call.args]
        with no_grad():
            run_local(op, _tensors(tuple(updated)), call.attrs)
        results += [
            (f"updated operand {i}", _combine(shards[i], sig.ins[i], op.name), updated[i])
            for i in op.mutates
            if isinstance(updated[i], np.ndarray)
        ]
    for what, got, expected in results:
        if got.shape != expected.shape:
            return f"{sig}: {what} combined to {list(got.shape)}, expected {list(expected.shape)}"
        close = np.allclose(
            _wide(got),
            _wide(expected),
            rtol=rtol,
            atol=atol,
            equal_nan=True,
        )
        if not close:
            return f"{sig}: {what} differs from the unsharded result"
    return None
