"""Fault injection: make one rank of a job fail at a chosen kind of point, for the tests that
check that a failure anywhere ends the whole job (tests/dist/test_faults.py).

`TIDEFLOW_FAULT="point:kind:rank:seed"` arms it in every process of a job; only rank `rank`
fails. Points, each consulted in one place:
  collective   an eager collective of `tideflow.distributed` (before it communicates)
  ddp_bucket   DistributedDataParallel starting a gradient bucket's all-reduce
  graph        a communicating node (boxing, send/recv) of a compiled nn.Graph
  checkpoint   a rank writing its shards of a sharded save
  mid_collective  a rank between two steps of a collective made of several, its part of
               the first sent: all_gather_object and broadcast_object_list between the size
               exchange and the payload, DDP's gradient all-reduce between two buckets
Kinds: `raise` (an `InjectedFault`), `kill` (SIGKILL to this process, no last words),
`stall` (sleep for an hour, as a rank stuck in I/O or in a deadlock would).
The seed picks which arrival at the point fails, among the first `SPAN`, so that repeated
runs fail at different steps of the job. With `$TIDEFLOW_FAULT_LOG` set, the failing rank
writes there, just before failing, the wall-clock time, its process id and what it was
doing: the tests time the job's end from it.

The points are also where a rank supervised by the launcher records what it is doing
(records.py), so that a rank that dies without a word is named with the last one it reached.
Unarmed (no fault planned, no record kept: the normal case), a point costs one module
attribute test: `if faults.armed:`.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

from . import records
from .world import launcher_rank_and_size

SPEC_VAR = "TIDEFLOW_FAULT"
LOG_VAR = "TIDEFLOW_FAULT_LOG"
POINTS = ("collective", "ddp_bucket", "graph", "checkpoint", "mid_collective")
KINDS = ("raise", "kill", "stall")
SPAN = 3  # the failing arrival is one of the first SPAN at the point
_STALL_SECONDS = 3600.0


class InjectedFault(RuntimeError):
    """The failure a `raise` fault injects."""


def parse(spec: str) -> tuple[str, str, int, int]:
    """(point, kind, rank, seed) of a `TIDEFLOW_FAULT` value."""
    parts = spec.split(":")
    if len(parts) != 4 or parts[0] not in POINTS or parts[1] not in KINDS:
        raise ValueError(
            f"${SPEC_VAR}={spec!r}: expected 'point:kind:rank:seed' with a point in {POINTS} "
            f"and a kind in {KINDS}"
        )
    return parts[0], parts[1], int(parts[2]), int(parts[3])


class _Plan:
    """The armed fault of this rank: fail at arrival `arrival` at `point`."""

    def __init__(self, point: str, kind: str, arrival: int) -> None:
        self.point = point
        self.kind = kind
        self.arrival = arrival
        self.arrivals = 0
        self.lock = threading.Lock()  # graph points are reached from stream threads


def _plan_from_environment() -> _Plan | None:
    spec = os.environ.get(SPEC_VAR)
    if not spec:
        return None
    point, kind, rank, seed = parse(spec)
    if rank != launcher_rank_and_size()[0]:
        return None
    return _Plan(point, kind, random.Random(seed).randint(1, SPAN))


_plan = _plan_from_environment()
armed = _plan is not None or records.kept
last_point: str | None = None  # where this rank was last, once armed: "collective (barrier)"


def reached(point: str, what: str) -> None:
    """This rank arrives at `point`, about to do `what` ('all_reduce', 'bucket 2 of 3'): if
    this is the planned arrival, fail. Call only under `if faults.armed:`."""
    global last_point
    last_point = f"{point} ({what})"
    if records.kept:
        records.doing(last_point)
    plan = _plan
    if plan is None or plan.point != point:
        return
    with plan.lock:
        plan.arrivals += 1
        if plan.arrivals != plan.arrival:
            return
    rank = launcher_rank_and_size()[0]
    doing = f"rank {rank} at {point} ({what}), arrival {plan.arrival}"
    log = os.environ.get(LOG_VAR)
    if log:
        with open(log, "w") as f:
            f.write(f"{time.time()!r} {os.getpid()} {plan.kind} {doing}\n")
    if plan.kind == "raise":
        raise InjectedFault(f"injected fault: {doing}")
    if plan.kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(_STALL_SECONDS)


def wrap(point: str, what: str, fn):
    """`fn`, preceded by `reached(point, what)` when armed; `fn` itself when not."""
    if not armed:
        return fn

    def at_fault_point(*args, **kwargs):
        reached(point, what)
        return fn(*args, **kwargs)

    return at_fault_point
