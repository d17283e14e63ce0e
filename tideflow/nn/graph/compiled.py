"""One input signature of a graph, compiled: trace `build`, run the passes, lower to a plan,
and run the plan on an Executor, call after call."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext

from ...compiler import Program, TensorHolder, Tracer, UpdateCall, capture_updates
from ...compiler.amp import LossScaling, autocast_region
from ...compiler.chain import Chain
from ...compiler.ir import Scope
from ...compiler.lower import lower
from ...compiler.passes import pipeline, run_passes
from ...distributed.world import get_world
from ...framework.errors import TideflowError
from ...framework.grad_mode import no_grad
from ...framework.modes import dispatch_mode
from ...framework.tensor import Tensor, raw_data
from ...ops.shape import cat, stack
from ...parallel._auto_session import Recorder
from ...parallel._auto_session import session as layout_session
from ...parallel.global_tensor import GlobalTensor, new_global
from ...runtime import DataSource, Executor
from ..utils.clip_grad import clip_grad_norm_
from .auto_parallel import plan_counts, searched_layouts
from .pending import PendingTensor, PlanRuns, hold, pending_output
from .source import GraphSource
from .structure import flatten_outputs, unflatten
from .zero import gather_into, gathered, shard_parameters, shard_state, sharded_updates

# NOTE: the holders of variables read the slot `_data`, never waiting: the plan reading its
# own variables is ordered by the plan, while eager code waits for it (`pending.hold`).


class _Slot:
    """A module's parameter or buffer by its key, so a replaced tensor is seen too."""

    __slots__ = ("key", "table")

    def __init__(self, table: dict, key: str) -> None:
        self.table = table
        self.key = key

    @property
    def tensor(self) -> Tensor:
        return self.table[self.key]

    @property
    def array(self):
        return raw_data(self.table[self.key])


class _OptimizerState:
    """An optimizer's state tensor by (parameter, key): `load_state_dict` replaces them."""

    __slots__ = ("key", "optimizer", "param")

    def __init__(self, optimizer, param: Tensor, key: str) -> None:
        self.optimizer = optimizer
        self.param = param
        self.key = key

    @property
    def tensor(self) -> Tensor:
        return self.optimizer.state[self.param][self.key]

    @property
    def array(self):
        return raw_data(self.optimizer.state[self.param][self.key])


class CompiledGraph:
    """The plan of one input signature and its executor."""

    def __init__(self, graph, inputs: Sequence[Tensor], input_spec, log: Callable | None) -> None:
        start = time.perf_counter()
        self._optimizers = [opt for opt, _ in graph._optimizers]
        self._grads: dict[Tensor, Tensor] = {}
        # (op, id of the parameter's array, a global one's shard) of each update, in order
        self._updates: list[tuple] = []
        self._pending_attrs: tuple | None = None  # the first call's, captured while tracing
        layouts = None  # auto-parallel's session while build is traced
        self.layout_search = None  # auto-parallel's `parallel.auto.Solution`
        if graph.config.optimizations.get("auto_parallel"):
            layouts, self.layout_search, report = searched_layouts(
                graph, lambda recorder: self._trace(graph, inputs, input_spec, recorder)
            )
            if log is not None:
                print(f"[{graph.name}] {report}")
        traced = self._trace(graph, inputs, input_spec, layouts)
        if log is not None:
            log("traced", traced)
        stage = graph._graph_modules.pipeline_stage(get_world().rank)
        passes = pipeline(graph.config, stage)
        self.program: Program = run_passes(traced, passes, on_pass=log)
        # NOTE: pipeline stages and steps that communicate record what ran when
        # (`Graph.timeline`): a clock read where a chain's block changes
        timed = stage is not None or any(n.op.communicates for n in self.program.nodes)
        self.plan = lower(self.program, graph.config.outputs_buffer_size, timed=timed)
        if self.layout_search is not None:
            self.layout_search = self.layout_search.lowered(plan_counts(self.plan, self.program))
        self._max_in_flight = graph.config.outputs_buffer_size
        self._holders = [h for h in self.plan.variables.values() if hasattr(h, "tensor")]
        # The executors running the plan, by the data source feeding them (None: the calls'
        # arguments). Two may be live: `pending.hold` orders their runs.
        self._runs: dict[object, PlanRuns] = {}
        self.input_metas = [(tuple(t.shape), t.dtype) for t in inputs]
        # a fetch is this rank's shard; `output_layouts` says how a global output is laid out
        self.output_metas = [(v.shape, v.dtype) for v in self.program.fetches]
        self.traced_nodes = len(traced.nodes)
        self.compile_seconds = time.perf_counter() - start

    def _trace(self, graph, inputs: Sequence[Tensor], input_spec, layouts=None) -> Program | None:
        """Build on lazy inputs, then the optimizers' updates of the gradients it left;
        `layouts`: an auto-parallel session choosing build's layouts (a `Recorder`: build
        only, and no program)."""
        zero = graph.config.zero_options if graph.config.zero else {}
        sharded = {}  # ZeRO stage 3: parameter -> the layout build computes with
        if zero.get("stage") == 3:
            sharded = shard_parameters(self._optimizers, zero["shard_min_size"])
        tracer = Tracer()
        _register_state(tracer, graph)
        scaler = graph._grad_scaler
        scaling = graph.training and scaler is not None and scaler.is_enabled()
        self._amp = LossScaling(scaler, tracer, TensorHolder) if scaling else None
        found_inf = None
        steps = graph.config.gradient_accumulation_steps
        if isinstance(layouts, Recorder):
            layouts.module_of = lambda: (tracer.current_scope or Scope()).module
        chosen = nullcontext() if layouts is None else layout_session(layouts)
        with tracer, graph._graph_modules.scopes(tracer, graph._modules), chosen:
            feeds = [_feed(tracer, t) for t in inputs]
            if steps == 1:
                outputs, self.output_spec = _build(graph, tracer, feeds, input_spec, None, sharded)
            else:
                outputs, self.output_spec = _build_micro_batches(
                    graph, tracer, feeds, input_spec, steps, sharded
                )
            if self._amp is not None:
                found_inf = self._amp.unscale_and_update(self._optimizers)
            _clip_gradients(graph)
        if isinstance(layouts, Recorder):
            # NOTE: recording needs build only; capturing the optimizers' steps twice would
            # count a step twice in their state (Adam's step number).
            return None
        self._grads = self._gradients(tracer)
        if self._grads:
            calls = _on_this_rank(self._capture())
            layouts = {}
            if zero:  # stage 3's state is laid out as its sharded parameter already
                layouts, calls = shard_state(self._optimizers, calls, zero["shard_min_size"])
            _register_optimizer_state(tracer, self._optimizers)
            with tracer:  # ZeRO's slicing is traced
                local, gathers = sharded_updates(calls, layouts)
            tracer.add_updates(local, guard=found_inf)
            with tracer:
                gather_into(tracer, gathers)
            self._updates = _update_keys(calls)
            self._pending_attrs = tuple(c.attrs for c in calls)
        self.output_layouts = [layout_of(t, logical=True) for t in outputs]
        return tracer.finish(outputs)

    def _gradients(self, tracer: Tracer) -> dict[Tensor, Tensor]:
        """Each optimized parameter that received a gradient in build -> that gradient."""
        grads = tracer.gradients()
        names = tracer.variable_names()
        return {
            p: grads[names[id(p._data)]]
            for opt in self._optimizers
            for group in opt.param_groups
            for p in group["params"]
            if names.get(id(p._data)) in grads
        }

    def _capture(self) -> list[UpdateCall]:
        """The optimizers' updates for this call, with each parameter's `.grad` standing for
        its gradient in the plan (and no `.grad` for the others) while their steps run."""
        params = _optimized(self._optimizers)
        saved = [p.grad for p in params]
        if self._amp is not None:
            self._amp.before_capture(self._optimizers)
        try:
            for p in params:
                p.grad = self._grads.get(p)
            return [call for opt in self._optimizers for call in capture_updates(opt.step)]
        finally:
            for p, grad in zip(params, saved, strict=True):
                p.grad = grad

    def _step_attrs(self) -> tuple:
        if self._pending_attrs is not None:
            attrs, self._pending_attrs = self._pending_attrs, None
            return attrs
        calls = _on_this_rank(self._capture())
        if _update_keys(calls) != self._updates:
            raise TideflowError(
                "nn.Graph: the optimizers' updates changed since the graph was compiled "
                f"({len(self._updates)} updates then, {len(calls)} now); parameters and "
                "parameter groups must stay as they were at the first call"
            )
        return tuple(c.attrs for c in calls)

    def run(self, inputs: Sequence[Tensor]) -> list[PendingTensor]:
        """Start the plan on `inputs`; its outputs in program order, as tensors that wait for
        the run when first used (see `Graph.__call__` for the rules)."""
        return self._launch(self._live(None), inputs)

    def run_sourced(self, source: GraphSource) -> list[PendingTensor]:
        """Start the plan on the next batch of `source`, pulled ahead on the runtime's data
        stream; outputs as `run`'s. When the pass over it ends, raise `SourceExhausted`: the
        next call starts a new pass (a new executor; so does a failure)."""
        runs = self._live(source)
        batches = runs.batches
        if not batches.has(batches.taken):
            del self._runs[source]
            runs.executor.close()
            raise batches.exhausted()
        batches.taken += 1
        return self._launch(runs, ())

    def detach(self) -> None:
        """Close the executors fed by a data source, once their runs in flight are done."""
        for source in [s for s in self._runs if s is not None]:
            self._runs.pop(source).executor.close()

    def _live(self, source: GraphSource | None) -> PlanRuns:
        """The runs fed by `source`, on a new executor when there is none or its runs failed.
        A failure no output has raised yet is raised here; the call after runs afresh."""
        runs = self._runs.get(source)
        if runs is not None:
            error = runs.failure()
            if error is not None:
                self._stop(runs)
                if not runs.failure_raised:
                    runs.failure_raised = True
                    raise error
                runs = None
        if runs is None:
            sources, batches = (), None
            if source is not None:
                batches = source.start_pass()
                feeds = self.plan.feeds[: len(self.input_metas)]
                sources = (DataSource(batches, feeds=feeds),)
            executor = Executor(self.plan, sources=sources, max_in_flight=self._max_in_flight)
            settled = () if self._amp is None else (self._amp.settle,)
            runs = self._runs[source] = PlanRuns(executor, source, batches, settled)
        return runs

    def _launch(self, runs: PlanRuns, inputs: Sequence[Tensor]) -> list[PendingTensor]:
        attrs = [self._step_attrs()] if self._updates else []
        # NOTE: the run reads its inputs too: eager code writing one (the next batch into the
        # same buffer) waits for it, as for the variables it reads and writes.
        hold([*inputs, *(holder.tensor for holder in self._holders)], runs)
        feeds = [raw_data(t) for t in inputs] + attrs
        try:
            future = runs.executor.run(tuple(feeds))
        except TideflowError:  # a run failed since `_live` looked, or the source ran dry
            runs.failure_raised = True
            self._stop(runs)
            raise
        runs.last = future
        return [
            pending_output(runs, future, i, shape, dtype, layout)
            for i, ((shape, dtype), layout) in enumerate(
                zip(self.output_metas, self.output_layouts, strict=True)
            )
        ]

    def _stop(self, runs: PlanRuns) -> None:
        """Close a failed executor: its runs cannot complete."""
        if self._runs.get(runs.source) is runs:
            del self._runs[runs.source]
        runs.executor.close(cancel=True)

    def timeline(self) -> list[tuple[str, float, float]]:
        """(block, start, end) of what this rank ran in the latest step, once it is done."""
        for runs in self._runs.values():
            runs.wait()
        chains = [t.fn for t in self.plan.tasks if isinstance(t.fn, Chain)]
        return sorted((e for chain in chains for e in chain.timeline), key=lambda e: e[1])

    def close(self) -> None:
        """Let the runs in flight finish (their outputs may still be read), then stop."""
        runs, self._runs = list(self._runs.values()), {}
        for r in runs:
            r.executor.close()


def trace_build(
    graph, inputs: Sequence[Tensor], input_spec, watch: Callable | None = None
) -> tuple[Program, object]:
    """`graph.build` on `inputs` traced as for a plan, before any pass, and the nesting of
    its outputs: for tools that read the IR instead of running it (ONNX export). Inference
    graphs only: optimizers, AMP loss scaling and gradient accumulation are not traced.
    `watch`, a dispatch handler `(op, args, attrs, below)`, sees build's calls before the
    tracer records them (the exporter notes the user's line of ops it cannot lower)."""
    tracer = Tracer()
    _register_state(tracer, graph)
    watching = nullcontext() if watch is None else dispatch_mode(watch)
    with tracer, graph._graph_modules.scopes(tracer, graph._modules), watching:
        feeds = [_feed(tracer, t) for t in inputs]
        outputs, output_spec = _build(graph, tracer, feeds, input_spec)
    return tracer.finish(outputs), output_spec


def _clip_gradients(graph) -> None:
    """The clipping `add_optimizer` was given, traced after every backward of the step (and
    after unscaling): the `.grad`s are the trace's gradients here."""
    for opt, max_norm, norm_type in graph._grad_clips:
        params = [p for group in opt.param_groups for p in group["params"] if p.grad is not None]
        clip_grad_norm_(params, max_norm, norm_type)


def _optimized(optimizers) -> list[Tensor]:
    return [p for opt in optimizers for g in opt.param_groups for p in g["params"]]


def _update_keys(calls: Sequence[UpdateCall]) -> list[tuple]:
    return [(c.op, id(raw_data(c.args[0]))) for c in calls]


def _on_this_rank(calls: Sequence[UpdateCall]) -> list[UpdateCall]:
    """The updates this rank takes part in: of local parameters, or of global ones whose
    placement has this rank."""
    rank = get_world().rank
    return [
        c
        for c in calls
        if not isinstance(c.args[0], GlobalTensor)
        or c.args[0].placement.coordinate(rank) is not None
    ]


def layout_of(t: Tensor, logical: bool = False) -> tuple | None:
    """A global tensor's placement and n-D SBP (and, with `logical`, its logical shape);
    None for a local tensor: part of a graph's input signature, and how outputs are laid."""
    if not isinstance(t, GlobalTensor):
        return None
    return (t._placement, t._nd_sbp, t._logical) if logical else (t._placement, t._nd_sbp)


def _feed(tracer: Tracer, t: Tensor) -> Tensor:
    """The lazy input standing for `t`: a global tensor's is its shard, laid out as `t`."""
    if not isinstance(t, GlobalTensor):
        return tracer.feed(t.shape, t.dtype)
    shard = tracer.feed(raw_data(t).shape, t.dtype)._data
    shard.note_layout(t._placement, t._nd_sbp)
    return new_global(shard, t._placement, t._nd_sbp, t._logical)


def _build(graph, tracer: Tracer, feeds: list[Tensor], input_spec, micro: tuple | None = None,
           sharded: dict | None = None):  # fmt: skip
    """Call build on the lazy inputs; its outputs flattened, and their nesting. With AMP, each
    call is its own autocast region, as each eager step is (casts cached in a region cannot
    serve two backwards). `micro`: (k, n): build on micro-batch k of n, cut from each input
    in its scope, so every node of the micro-batch knows it is one. `sharded`: ZeRO stage 3's
    parameters, gathered for the call (`zero.gathered`)."""
    with tracer.scope(Scope(micro_batch=None if micro is None else micro[0])):
        if micro is not None:
            k, n = micro
            feeds = [f[k * (f.shape[0] // n) : (k + 1) * (f.shape[0] // n)] for f in feeds]
        it = iter(feeds)
        args, kwargs = unflatten(input_spec[0], it), unflatten(input_spec[1], it)
        with autocast_region(graph.config), gathered(graph, tracer, sharded or {}):
            out = graph.build(*args, **kwargs)
    return flatten_outputs(out, _location(graph.build))


def _build_micro_batches(graph, tracer: Tracer, feeds: list[Tensor], input_spec, steps: int,
                         sharded: dict):  # fmt: skip
    """OneFlow's gradient accumulation: each input is split along dim 0 into `steps`
    micro-batches and build runs on each in turn; the backward of each adds to the
    gradients, so the optimizer updates once with their sum. Outputs are packed along dim 0:
    a scalar output becomes a vector of `steps` values, others are concatenated."""
    for i, f in enumerate(feeds):
        if f.ndim == 0 or f.shape[0] % steps:
            raise TideflowError(
                f"nn.Graph: with {steps} gradient accumulation steps every tensor input is "
                f"split along dim 0 into {steps} micro-batches, but input {i} has shape "
                f"{list(f.shape)}"
            )
    micro_outputs = []
    spec = None
    for k in range(steps):
        outputs, micro_spec = _build(graph, tracer, feeds, input_spec, (k, steps), sharded)
        if spec is not None and micro_spec != spec:
            raise TideflowError(
                "nn.Graph: build() returned differently nested outputs for two micro-batches"
            )
        spec = micro_spec
        micro_outputs.append(outputs)
    with no_grad():
        packed = [
            stack(parts) if parts[0].ndim == 0 else cat(parts)
            for parts in zip(*micro_outputs, strict=True)
        ]
    return packed, spec


def _register_state(tracer: Tracer, graph) -> None:
    """Parameters and buffers of the graph's modules, then optimized tensors outside them."""
    for prefix, module in graph._modules.items():
        for path, sub in module.named_modules(prefix=prefix):
            for table in (sub._parameters, sub._buffers):
                for key, t in table.items():
                    if t is not None:
                        tracer.add_variable(f"{path}.{key}", t, _Slot(table, key))
    for i, (opt, _) in enumerate(graph._optimizers):
        for j, p in enumerate(q for group in opt.param_groups for q in group["params"]):
            tracer.add_variable(f"_optimizer{i}.param{j}", p, TensorHolder(p))


def _register_optimizer_state(tracer: Tracer, optimizers) -> None:
    names = tracer.variable_names()
    for opt in optimizers:
        for p, state in opt.state.items():
            for key, t in state.items():
                if isinstance(t, Tensor):
                    name = f"{names[id(p._data)]}.{key}"
                    tracer.add_variable(name, t, _OptimizerState(opt, p, key))


def _location(fn) -> str:
    code = fn.__code__
    return f"{code.co_filename}:{code.co_firstlineno}"
