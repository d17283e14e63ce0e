"""One input signature of a graph, compiled: trace `build`, run the passes, lower to a plan,
and run the plan on an Executor, call after call."""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence

from ...compiler import Program, TensorHolder, Tracer, UpdateCall, capture_updates
from ...compiler.lower import lower
from ...compiler.passes import run_passes
from ...framework.errors import TideflowError
from ...framework.grad_mode import no_grad
from ...framework.tensor import Tensor, make_tensor
from ...ops.shape import cat, stack
from ...runtime import Executor
from .structure import flatten_outputs, unflatten


class _Slot:
    """A module's parameter or buffer by its key, so a replaced tensor is seen too."""

    __slots__ = ("key", "table")

    def __init__(self, table: dict, key: str) -> None:
        self.table = table
        self.key = key

    @property
    def array(self):
        return self.table[self.key]._data


class _OptimizerState:
    """An optimizer's state tensor by (parameter, key): `load_state_dict` replaces them."""

    __slots__ = ("key", "optimizer", "param")

    def __init__(self, optimizer, param: Tensor, key: str) -> None:
        self.optimizer = optimizer
        self.param = param
        self.key = key

    @property
    def array(self):
        return self.optimizer.state[self.param][self.key]._data


class CompiledGraph:
    """The plan of one input signature and its executor."""

    def __init__(self, graph, inputs: Sequence[Tensor], input_spec, log: Callable | None) -> None:
        start = time.perf_counter()
        self._optimizers = [opt for opt, _ in graph._optimizers]
        self._grads: dict[Tensor, Tensor] = {}
        self._updates: list[tuple] = []  # (op, parameter) of each update, in order
        self._pending_attrs: tuple | None = None  # the first call's, captured while tracing
        traced = self._trace(graph, inputs, input_spec)
        if log is not None:
            log("traced", traced)
        self.program: Program = run_passes(traced, on_pass=log)
        self.plan = lower(self.program, quota=graph.config.outputs_buffer_size)
        self._executor: Executor | None = Executor(self.plan)
        self.input_metas = [(tuple(t.shape), t.dtype) for t in inputs]
        self.output_metas = [(v.shape, v.dtype) for v in self.program.fetches]
        self.traced_nodes = len(traced.nodes)
        self.compile_seconds = time.perf_counter() - start
        for message in graph.config.inactive_settings():
            warnings.warn(f"nn.Graph {graph.name}: {message}", UserWarning, stacklevel=3)

    def _trace(self, graph, inputs: Sequence[Tensor], input_spec) -> Program:
        """Build on lazy inputs, then the optimizers' updates of the gradients it left."""
        tracer = Tracer()
        _register_state(tracer, graph)
        steps = graph.config.gradient_accumulation_steps
        with tracer:
            feeds = [tracer.feed(t.shape, t.dtype) for t in inputs]
            if steps == 1:
                outputs, self.output_spec = _build(graph, feeds, input_spec)
            else:
                outputs, self.output_spec = _build_micro_batches(graph, feeds, input_spec, steps)
        self._grads = self._gradients(tracer)
        if self._grads:
            calls = self._capture()
            _register_optimizer_state(tracer, self._optimizers)
            tracer.add_updates(calls)
            self._updates = [(c.op, c.args[0]) for c in calls]
            self._pending_attrs = tuple(c.attrs for c in calls)
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
        params = [p for opt in self._optimizers for g in opt.param_groups for p in g["params"]]
        saved = [p.grad for p in params]
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
        calls = self._capture()
        if [(c.op, id(c.args[0])) for c in calls] != [(op, id(p)) for op, p in self._updates]:
            raise TideflowError(
                "nn.Graph: the optimizers' updates changed since the graph was compiled "
                f"({len(self._updates)} updates then, {len(calls)} now); parameters and "
                "parameter groups must stay as they were at the first call"
            )
        return tuple(c.attrs for c in calls)

    def run(self, inputs: Sequence[Tensor]) -> list[Tensor]:
        """Run the plan on `inputs`; the fetched outputs as tensors, in program order."""
        feeds: list = [t._data for t in inputs]
        if self._updates:
            feeds.append(self._step_attrs())
        if self._executor is None:
            self._executor = Executor(self.plan)
        try:
            arrays = self._executor.run(tuple(feeds)).result()
        except BaseException:
            # NOTE: a failed plan is stopped for good; the next call gets a fresh executor.
            self.close()
            raise
        return [make_tensor(a) for a in arrays]

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close(cancel=True)
            self._executor = None


def _build(graph, feeds: list[Tensor], input_spec) -> tuple[list[Tensor], object]:
    """Call build on the lazy inputs; its outputs flattened, and their nesting."""
    it = iter(feeds)
    args, kwargs = unflatten(input_spec[0], it), unflatten(input_spec[1], it)
    return flatten_outputs(graph.build(*args, **kwargs), _location(graph.build))


def _build_micro_batches(graph, feeds: list[Tensor], input_spec, steps: int):
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
        micro = [f[k * (f.shape[0] // steps) : (k + 1) * (f.shape[0] // steps)] for f in feeds]
        outputs, micro_spec = _build(graph, micro, input_spec)
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
