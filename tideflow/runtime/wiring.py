"""From a plan to connected actors (`build_network`): one per task, plus fetch and data-source
actors, each on its stream, with regst quotas and the in-place orderings of `inplace.py`; and
the `Network` that starts them, reports their errors and stops them."""

from __future__ import annotations

from collections.abc import Sequence

from ..framework.errors import TideflowError
from .actor import Actor, TaskActor
from .boundary import (
    DataSource,
    FeedActor,
    FetchActor,
    PerRunActor,
    SourceActor,
    SourcedFeedActor,
    VariableActor,
)
from .errors import PlanError, TaskError
from .inplace import Consumer, InplaceOrder, inplace_order
from .iterations import Iterations
from .plan import PlanSpec, TaskSpec, check_plan, variable_name
from .stream import Stream

DATA_STREAM = "data"  # data sources get a thread of their own: a slow `next` stalls no task


class Network:
    """The actors of one plan on their streams, started and stopped as one."""

    def __init__(self, iterations: Iterations) -> None:
        self.iterations = iterations
        self.streams: dict[str, Stream] = {}
        self.fed: tuple[FeedActor, ...] = ()  # take `run`'s arrays, in that order
        self.ticked: tuple[PerRunActor, ...] = ()  # variables, sourced feeds: one act per run
        self.sources: tuple[SourceActor, ...] = ()

    def stream(self, name: str) -> Stream:
        if name not in self.streams:
            self.streams[name] = Stream(name, self.report)
        return self.streams[name]

    def start(self) -> None:
        for stream in self.streams.values():
            stream.start()
        for source in self.sources:
            source.stream.post(source.on_start)

    def report(self, exc: BaseException) -> None:
        """A handler raised on a stream thread. A task's error fails its iteration and the
        later ones, while the earlier ones complete; anything else is a bug of the runtime:
        every run fails and every stream halts."""
        if isinstance(exc, TaskError):
            self.iterations.end(exc.iteration, exc)
            return
        error = TideflowError(f"tideflow runtime failed: {type(exc).__name__}: {exc}")
        error.__cause__ = exc
        self.iterations.fail(error)
        self.halt()

    def halt(self) -> None:
        for stream in self.streams.values():
            stream.halt()

    def shut_down(self) -> None:
        """Halt every stream and wait for its thread to end."""
        self.halt()
        for stream in self.streams.values():
            stream.join()


def build_network(plan: PlanSpec, sources: Sequence[DataSource], max_in_flight: int) -> Network:
    """Check `plan`, then make and wire its actors (no thread starts)."""
    check_plan(plan)
    sourced = _sourced_feeds(plan, sources)
    order = inplace_order(plan)
    iterations = Iterations(len(plan.fetches), max_in_flight)
    network = Network(iterations)

    source_actors = [
        SourceActor(f"source({', '.join(s.feeds)})", network.stream(DATA_STREAM), s, iterations)
        for s in sources
    ]
    actors: dict[str, Actor] = {}
    for task in plan.tasks:
        actor = actors[task.name] = _actor(task, plan, sourced, network.stream(task.stream))
        for producer, index in task.inputs:
            actor.read(actors[producer], index)
    for source, source_actor in zip(sources, source_actors, strict=True):
        for index, feed in enumerate(source.feeds):
            actors[feed].read(source_actor, index)
    fetches = []
    for position, (producer, index) in enumerate(plan.fetches):
        copy = (producer, index) in order.written
        fetch = FetchActor(f"fetch {position}", actors[producer].stream, position, copy)
        fetch.read(actors[producer], index)
        fetches.append(fetch)

    # Regsts, now that every actor knows its consumers.
    by_consumer: dict[Consumer, Actor] = {name: actor for name, actor in actors.items()}
    by_consumer.update(enumerate(fetches))
    for name, actor in actors.items():
        gates = _gates(actor, order.waits.get(name, {}), by_consumer)
        actor.allocate(_quota(actor, plan, order), gates)
    for actor in (*source_actors, *fetches):
        actor.allocate(_quota(actor, plan, order), {})
    for actor in (*source_actors, *actors.values(), *fetches):
        if not actor.consumers:
            actor.report_to(iterations)

    network.fed = tuple(a for name in plan.feeds if isinstance(a := actors[name], FeedActor))
    network.ticked = tuple(
        a for a in actors.values() if isinstance(a, (VariableActor, SourcedFeedActor))
    )
    network.sources = tuple(source_actors)
    return network


def _sourced_feeds(plan: PlanSpec, sources: Sequence[DataSource]) -> set[str]:
    sourced: set[str] = set()
    for source in sources:
        if not source.feeds:
            raise PlanError("a DataSource must name at least one feed")
        for feed in source.feeds:
            if feed not in plan.feeds:
                raise PlanError(
                    f"DataSource feeds {feed!r}, which is not a feed of the plan "
                    f"(feeds: {list(plan.feeds)})"
                )
            if feed in sourced:
                raise PlanError(f"feed {feed!r} is filled by two data sources")
            sourced.add(feed)
    return sourced


def _actor(task: TaskSpec, plan: PlanSpec, sourced: set[str], stream: Stream) -> Actor:
    if task.name in sourced:
        return SourcedFeedActor(task.name, stream)
    if task.name in plan.feeds:
        return FeedActor(task.name, stream)
    variable = variable_name(task.name)
    if variable is not None:
        return VariableActor(task.name, stream, plan.variables[variable])
    return TaskActor(task.name, stream, task.fn, task.n_out)


def _quota(actor: Actor, plan: PlanSpec, order: InplaceOrder) -> int:
    if not actor.consumers:
        return 1  # a sink's slot is free again as soon as it is filled
    if isinstance(actor, VariableActor) and (actor.name, 0) in order.written:
        return 1  # one slot: the next iteration reads the variable after this one's writes
    return plan.quota


def _gates(
    actor: Actor, waits: dict[Consumer, frozenset[Consumer]], by_consumer: dict[Consumer, Actor]
) -> dict[int, tuple[int, ...]]:
    """`waits` keyed by task names and fetch positions -> keyed by consumer numbers."""
    number = {id(consumer): n for n, (consumer, _) in enumerate(actor.consumers)}
    return {
        number[id(by_consumer[gated])]: tuple(number[id(by_consumer[c])] for c in after)
        for gated, after in waits.items()
    }
