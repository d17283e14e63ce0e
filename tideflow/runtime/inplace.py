"""In-place writes in a streaming plan.

A task that writes an input in place (an optimizer update writing a parameter) changes the
value every other consumer of that input reads. Writes take effect in plan order, as they did
when the step was traced: a writer waits for every consumer of the value listed before it,
and a consumer listed after a writer waits for that writer. Fetches come last, so they see
the value at the end of the step. The producer enforces this by delaying its "ready"
message to a waiting consumer until the consumers it waits for have freed the slot; the
added orderings point forward in a topological order, so they cannot close a cycle.

A variable emits the same array every iteration, so when some task writes it, its regst has
one slot: iteration i+1 reads it only after every consumer of iteration i, writers included,
has freed it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .plan import PlanSpec

Consumer = str | int  # a task name, or the position of a fetch
Value = tuple[str, int]  # (producer task name, output index)


@dataclass(frozen=True)
class InplaceOrder:
    """`waits[producer][consumer]`: the consumers of `producer` that must free a slot before
    `consumer` is told it is ready. `written`: the values some task writes in place."""

    waits: dict[str, dict[Consumer, frozenset[Consumer]]]
    written: frozenset[Value]


def inplace_order(plan: PlanSpec) -> InplaceOrder:
    """The orderings the runtime adds so in-place writes happen in plan order."""
    consumers: dict[Value, dict[Consumer, None]] = defaultdict(dict)  # ordered sets
    writers: dict[Value, set[str]] = defaultdict(set)
    for task in plan.tasks:
        for position, value in enumerate(task.inputs):
            consumers[value][task.name] = None
            if position in task.mutates:
                writers[value].add(task.name)
    for position, value in enumerate(plan.fetches):
        consumers[value][position] = None

    waits: dict[str, dict[Consumer, set[Consumer]]] = defaultdict(lambda: defaultdict(set))
    for value, value_writers in writers.items():
        earlier: list[Consumer] = []
        earlier_writers: list[Consumer] = []
        for consumer in consumers[value]:
            must_follow = earlier if consumer in value_writers else earlier_writers
            if must_follow:
                waits[value[0]][consumer].update(must_follow)
            earlier.append(consumer)
            if consumer in value_writers:
                earlier_writers.append(consumer)
    return InplaceOrder(
        waits={
            producer: {consumer: frozenset(after) for consumer, after in gated.items()}
            for producer, gated in waits.items()
        },
        written=frozenset(writers),
    )
