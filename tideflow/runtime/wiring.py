"""From a plan to connected actors (`build_network`): one per task (the variable tasks of a
stream share one, `VariablesActor`), plus fetch and data-source actors, each on its stream,
with regst quotas and the in-place orderings of `inplace.py`; and the `Network` that starts
them, reports their errors and stops them."""

from __future__ import annotations

from collections.abc import Sequence

from ..framework.errors import TideflowError
from .actor import Actor, TaskActor, Turns
from .boundary import (
    DataSource,
    FeedActor,
    FetchActor,
    PerRunActor,
    RunStartActor,
    SourceActor,
    SourcedFeedActor,
    VariablesActor,
)
from .errors import PlanError, TaskError
from .inplace import Consumer, inplace_order
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
        # variables, sourced feeds, the run start: one act per run
        self.ticked: tuple[PerRunActor, ...] = ()
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
    actors: dict[str, Actor] = {}  # task name -> the actor running it
    slots: dict[str, int] = {}  # variable task -> its output of its stream's VariablesActor
    variables: dict[str, VariablesActor] = {}  # stream name -> the actor of its variables
    turns = {name: Turns() for name in plan.in_order}
    run_starts: list[RunStartActor] = []  # at most one, if some task reads nothing

    def output(producer: str, index: int) -> tuple[Actor, int]:
        return actors[producer], slots.get(producer, index)

    for task in plan.tasks:
        stream = network.stream(task.stream)
        variable = variable_name(task.name)
        if variable is not None:
            group = variables.get(task.stream)
            if group is None:
                group = variables[task.stream] = VariablesActor(f"variables({stream.name})", stream)
            slots[task.name] = group.add(task.name, plan.variables[variable])
            actors[task.name] = group
            continue
        actor = actors[task.name] = _actor(task, plan, sourced, stream)
        if task.stream in turns and isinstance(actor, TaskActor):
            turns[task.stream].join(actor)
        if not task.inputs and not task.after and isinstance(actor, TaskActor):
            if not run_starts:
                run_starts.append(RunStartActor("run start", stream))
            actor.after(run_starts[0])
        for producer, index in task.inputs:
            actor.read(*output(producer, index))
        for producer in task.after:
            actor.after(actors[producer])
    for source, source_actor in zip(sources, source_actors, strict=True):
        for index, feed in enumerate(source.feeds):
            actors[feed].read(source_actor, index)
    fetches = []
    for position, (producer, index) in enumerate(plan.fetches):
        copy = (producer, index) in order.written
        fetch = FetchActor(f"fetch {position}", actors[producer].stream, position, copy)
        fetch.read(*output(producer, index))
        fetches.append(fetch)

    # Regsts, now that every actor knows its consumers. A variables actor gathers the
    # in-place orderings of all its variables, and has one slot if any is written.
    by_consumer: dict[Consumer, Actor] = {name: actor for name, actor in actors.items()}
    by_consumer.update(enumerate(fetches))
    waits: dict[Actor, dict[Consumer, set[Consumer]]] = {}
    for name, actor in actors.items():
        merged = waits.setdefault(actor, {})
        for gated, after in order.waits.get(name, {}).items():
            merged.setdefault(gated, set()).update(after)
    written = {actors[producer] for producer, _ in order.written}
    for actor, actor_waits in waits.items():
        quota = 1 if isinstance(actor, VariablesActor) and actor in written else plan.quota
        actor.allocate(quota if actor.consumers else 1, _gates(actor, actor_waits, by_consumer))
    for actor in (*source_actors, *run_starts, *fetches):
        actor.allocate(plan.quota if actor.consumers else 1, {})
    for actor in (*source_actors, *waits, *fetches):
        if not actor.consumers:
            actor.report_to(iterations)

    network.fed = tuple(a for name in plan.feeds if isinstance(a := actors[name], FeedActor))
    network.ticked = (
        *variables.values(),
        *(a for a in waits if isinstance(a, SourcedFeedActor)),
        *run_starts,
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
    return TaskActor(task.name, stream, task.fn, task.n_out)


def _gates(
    actor: Actor, waits: dict[Consumer, set[Consumer]], by_consumer: dict[Consumer, Actor]
) -> dict[int, tuple[int, ...]]:
    """`waits` keyed by task names and fetch positions -> keyed by consumer numbers."""
    number = {id(consumer): n for n, (consumer, _) in enumerate(actor.consumers)}
    return {
        number[id(by_consumer[gated])]: tuple(number[id(by_consumer[c])] for c in after)
        for gated, after in waits.items()
    }
