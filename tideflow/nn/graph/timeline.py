"""The executed schedule of a graph's latest step on every rank: printable, savable as a
Chrome trace (chrome://tracing, Perfetto), and the bubble it measures."""

from __future__ import annotations

import json
import os

from ...distributed.objects import all_gather_object
from ...distributed.world import get_world

# blocks that are work, on the compute stream; the rest (`recv`, `comm`) is communication,
# on the communication stream
_WORK = ("F", "B", "step")


class Timeline:
    """Per rank, the blocks of the latest step in the order they started: `(block, start,
    end)`, seconds on one clock (ranks of one machine share it). Blocks are a micro-batch's
    forward or backward (`F0`, `B0`), `step` (work outside the micro-batches: optimizer
    updates, a step without micro-batches), and, on the communication stream beside them,
    `recv` (waiting for a message) and `comm` (collectives and sends).

    >>> timeline = graph.timeline()  # every rank calls it
    >>> print(timeline)
    >>> timeline.save("step.json")  # rank 0 writes it
    """

    def __init__(self, ranks: list[list[tuple[str, float, float]]]) -> None:
        self.ranks = ranks
        starts = [e[1] for events in ranks for e in events]
        self.origin = min(starts, default=0.0)
        self.span = max((e[2] for events in ranks for e in events), default=0.0) - self.origin

    @property
    def bubble(self) -> float:
        """The fraction of the step each rank spent not working (waiting for messages and
        collectives, or idle before its first and after its last block), averaged over ranks."""
        if not self.span:
            return 0.0
        idle = [1 - sum(e - s for b, s, e in events if b.startswith(_WORK)) / self.span
                for events in self.ranks]  # fmt: skip
        return sum(idle) / len(idle)

    @property
    def overlap(self) -> float:
        """The fraction of the time communication ran (`comm`, `recv`) during which the same
        rank also computed, over all ranks: 0 when every collective held up the compute."""
        busy = overlapped = 0.0
        for events in self.ranks:
            comm = _union((s, e) for b, s, e in events if not b.startswith(_WORK))
            work = _union((s, e) for b, s, e in events if b.startswith(_WORK))
            busy += sum(e - s for s, e in comm)
            overlapped += sum(max(0.0, min(e, we) - max(s, ws)) for s, e in comm for ws, we in work)
        return overlapped / busy if busy else 0.0

    def order(self, rank: int) -> list[str]:
        """The micro-batch blocks of `rank` in the order they ran (a block that waited for
        a message or a collective midway counts once)."""
        order: list[str] = []
        for b, _, _ in self.ranks[rank]:
            if b.startswith(("F", "B")) and (not order or order[-1] != b):
                order.append(b)
        return order

    def __str__(self) -> str:
        lines = [
            f"step of {self.span * 1e3:.2f} ms, bubble {self.bubble:.1%}, "
            f"communication overlapped with compute {self.overlap:.1%}"
        ]
        for rank, events in enumerate(self.ranks):
            cells = [
                f"{b} {(s - self.origin) * 1e3:.2f}-{(e - self.origin) * 1e3:.2f}"
                for b, s, e in events
            ]
            lines.append(f"rank {rank}: " + " | ".join(cells))
        return "\n".join(lines)

    def chrome_trace(self) -> dict:
        return {
            "displayTimeUnit": "ms",
            "traceEvents": [
                {
                    "name": b,
                    "cat": "work" if b.startswith(_WORK) else "wait",
                    "ph": "X",
                    "ts": (s - self.origin) * 1e6,
                    "dur": (e - s) * 1e6,
                    "pid": rank,
                    "tid": 0 if b.startswith(_WORK) else 1,  # the compute, comm stream
                }
                for rank, events in enumerate(self.ranks)
                for b, s, e in events
            ],
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the Chrome trace JSON (on rank 0; every rank has the same timeline)."""
        if get_world().rank == 0:
            with open(path, "w") as f:
                json.dump(self.chrome_trace(), f)


def _union(intervals) -> list[tuple[float, float]]:
    """Sorted, disjoint intervals covering `intervals`."""
    merged: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((s, e))
    return merged


def gather_timeline(events: list[tuple[str, float, float]]) -> Timeline:
    """Every rank's events of its latest step (collective over the world)."""
    everyone: list = [None] * get_world().size
    all_gather_object(everyone, events)
    return Timeline(everyone)
