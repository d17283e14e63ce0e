"""Registers (regsts): where an actor puts the outputs of one act until its consumers are
done with them. The quota (number of slots) bounds how far an actor runs ahead of its slowest
consumer: with no free slot it cannot act, which is the runtime's only back-pressure."""

from __future__ import annotations

from collections import deque


class Slot:
    """One register: the arrays of one act, held until every consumer has freed it."""

    __slots__ = ("arrays", "pending", "waiting")

    def __init__(self) -> None:
        self.arrays: tuple = ()
        self.pending = 0  # consumers that have not freed it yet
        self.waiting: dict[int, int] = {}  # gated consumer -> consumers it still waits for


class Regst:
    """An actor's `quota` output slots, shared by all its consumers (numbered 0..n-1).

    `gates[c]` lists the consumers that must free a slot before consumer `c` is told it is
    ready (in-place writes, see `inplace.py`); every other consumer is told at once.
    """

    __slots__ = ("_free", "_gate_sizes", "_n_consumers", "_opens", "_retired", "immediate")

    def __init__(self, quota: int, n_consumers: int, gates: dict[int, tuple[int, ...]]) -> None:
        self._free = deque(Slot() for _ in range(quota))
        self._n_consumers = n_consumers
        self.immediate = tuple(c for c in range(n_consumers) if c not in gates)
        self._gate_sizes = {c: len(after) for c, after in gates.items()}
        opens: list[list[int]] = [[] for _ in range(n_consumers)]
        for gated, after in gates.items():
            for consumer in after:
                opens[consumer].append(gated)
        self._opens = tuple(tuple(o) for o in opens)  # consumer -> gated consumers it releases
        self._retired = False

    def has_free(self) -> bool:
        return bool(self._free)

    def retire(self) -> None:
        """Take no more outputs (the actor failed); slots in use are still freed and gated
        consumers still told, so the iterations before the failure complete."""
        self._retired = True
        self._free.clear()

    def fill(self, arrays: tuple) -> Slot:
        """Put one act's outputs in a free slot (the caller checked `has_free`)."""
        slot = self._free.popleft()
        if self._n_consumers == 0:  # nobody reads it: free again at once
            self._free.append(slot)
            return slot
        slot.arrays = arrays
        slot.pending = self._n_consumers
        if self._gate_sizes:
            slot.waiting = dict(self._gate_sizes)
        return slot

    def release(self, slot: Slot, consumer: int) -> list[int]:
        """`consumer` is done with `slot`; returns the gated consumers that may now read it."""
        opened = []
        for gated in self._opens[consumer]:
            slot.waiting[gated] -= 1
            if slot.waiting[gated] == 0:
                opened.append(gated)
        slot.pending -= 1
        if slot.pending == 0:
            slot.arrays = ()  # drop the arrays now: their memory goes back before the next act
            if not self._retired:
                self._free.append(slot)
        return opened
