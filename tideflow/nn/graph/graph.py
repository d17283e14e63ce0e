"""`nn.Graph`: define a step in `build`, call it like a function; the first call compiles it."""

from __future__ import annotations

import functools
import itertools
import weakref
from collections import OrderedDict

from ...compiler import Program
from ...compiler.lazy import LazyArray
from ...compiler.passes.fuse import describe_fused
from ...framework.errors import TideflowError
from ...framework.grad_mode import is_grad_enabled
from ...framework.tensor import raw_data
from ..modules.module import Module
from .compiled import CompiledGraph, layout_of
from .config import GraphConfig
from .module_config import GraphModules
from .pending import PendingTensor
from .source import GraphSource
from .structure import flatten_inputs, unflatten
from .timeline import Timeline, gather_timeline

_graph_ids = itertools.count()


class Graph:
    """A static graph: the step written in `build` is traced once, compiled into a plan
    (autograd, optimizer update, passes over the IR) and run on the streaming actor runtime.

    Assign the modules the step uses as attributes in `__init__` and add the optimizer with
    `add_optimizer`; `build` then computes the loss and calls `loss.backward()` as eager code
    would, and the graph runs the optimizer's step after it (no `zero_grad`, no `step` in
    build). Modules, parameters and optimizer state are shared with eager code: after a call,
    `model.state_dict()` shows the updated weights, and eager changes are seen by the next
    call. Gradients inside a graph are values of the plan: the eager `.grad`s stay untouched.

    Each new input signature (the shapes and dtypes of the tensor arguments, the values of
    the others, grad mode and the training flags of the graph's modules) compiles another
    plan; the `config.set_plan_cache_size` most recently used ones are kept. `build` is
    traced without data: Python control flow on tensor values raises an error naming the
    line. Tensors captured from Python scope (not parameters or buffers of the graph's
    modules) are constants of the plan.

    >>> model = flow.nn.Linear(4, 2)
    >>> opt = flow.optim.SGD(model.parameters(), lr=0.1)
    >>> class TrainGraph(flow.nn.Graph):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.model = model
    ...         self.loss_fn = flow.nn.MSELoss()
    ...         self.add_optimizer(opt)
    ...     def build(self, x, y):
    ...         loss = self.loss_fn(self.model(x), y)
    ...         loss.backward()
    ...         return loss
    >>> g = TrainGraph()
    >>> loss = g(flow.randn(8, 4), flow.randn(8, 2))  # compiles, then runs one step
    """

    def __init__(self) -> None:
        d = self.__dict__
        d["_name"] = f"{type(self).__name__}_{next(_graph_ids)}"
        d["_modules"] = OrderedDict()
        d["_optimizers"] = []
        d["_grad_clips"] = []  # (optimizer, max_norm, norm_type) of add_optimizer's clipping
        d["_grad_scaler"] = None
        d["_plans"] = OrderedDict()
        d["_debug_level"] = -1
        d["_latest"] = None
        d["_data_source"] = None
        d["config"] = GraphConfig()
        d["_graph_modules"] = GraphModules()
        # NOTE: the plans' executor threads stop when the graph is collected.
        weakref.finalize(self, _close_plans, d["_plans"])

    @staticmethod
    def with_dynamic_input_shape(*, size: int = 10, enable_shared: bool = True):
        """OneFlow's decorator of a graph's `__init__` for inputs whose shapes vary between
        calls. Here every graph compiles and keeps a plan per input signature anyway, all
        sharing the modules' tensors (`enable_shared` is always on); the decorator sets how
        many plans are kept (`config.set_plan_cache_size(size)`).

        >>> class Linear(flow.nn.Graph):
        ...     @flow.nn.Graph.with_dynamic_input_shape(size=8)
        ...     def __init__(self):
        ...         super().__init__()
        """

        def decorate(init):
            @functools.wraps(init)
            def __init__(self, *args, **kwargs):
                init(self, *args, **kwargs)
                self.config.set_plan_cache_size(size)

            return __init__

        return decorate

    def build(self, *args, **kwargs):
        """The step: what one call computes, written as eager code. Override it."""
        raise NotImplementedError(f"nn.Graph {type(self).__name__} must define build()")

    # -- attributes -------------------------------------------------------------------------
    def __setattr__(self, name: str, value) -> None:
        modules = self.__dict__.get("_modules")
        if modules is None:
            raise AttributeError(
                f"cannot assign {name!r} before nn.Graph.__init__(); call super().__init__() first"
            )
        if isinstance(value, Module):
            modules[name] = value
            # NOTE: inside the graph a module is seen through its proxy: `.to(GraphModule)`.
            value = self._graph_modules.proxy(value, name)
        else:
            modules.pop(name, None)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def training(self) -> bool:
        """Whether the graph trains (an optimizer was added)."""
        return self.config.training

    def add_optimizer(self, optim, *, lr_sch=None, clip_grad_max_norm: float | None = None,
                      clip_grad_norm_type: float = 2.0) -> None:  # fmt: skip
        """Run `optim`'s step after `build` in every call (it must be one of tideflow.optim's
        optimizers: each step is one fused update per parameter), and `lr_sch.step()` after
        the call, as an eager loop would after `optimizer.step()`.

        `clip_grad_max_norm`: before the step, scale the gradients of all of `optim`'s
        parameters together so that their total `clip_grad_norm_type`-norm is at most this,
        as `flow.nn.utils.clip_grad_norm_(params, max_norm)` between an eager loop's backward
        and step does; with gradient accumulation, once, after the last micro-batch. Global
        parameters may lie on several placements (pipeline stages). (OneFlow puts these two
        keys in each parameter group and clips each group by itself.)"""
        if not hasattr(optim, "param_groups") or not callable(getattr(optim, "step", None)):
            raise TypeError(f"add_optimizer: expected an optimizer, got {type(optim).__name__}")
        if lr_sch is not None and not callable(getattr(lr_sch, "step", None)):
            raise TypeError(
                f"add_optimizer: lr_sch must be a learning-rate scheduler, got "
                f"{type(lr_sch).__name__}"
            )
        if self._plans:
            raise TideflowError(
                f"nn.Graph {self.name}: add_optimizer after the graph was compiled (first "
                "called); add optimizers in __init__"
            )
        if clip_grad_max_norm is not None:
            if not float(clip_grad_max_norm) > 0:
                raise ValueError(
                    f"add_optimizer: clip_grad_max_norm must be positive, got {clip_grad_max_norm}"
                )
            self._grad_clips.append((optim, float(clip_grad_max_norm), float(clip_grad_norm_type)))
        self._optimizers.append((optim, lr_sch))
        self.config.training = True

    def set_grad_scaler(self, grad_scaler) -> None:
        """Loss scaling for a training graph (`flow.amp.GradScaler` or `StaticGradScaler`):
        build still calls `loss.backward()`; the plan starts backward from the scale, unscales
        the gradients, skips every optimizer update when one holds inf/NaN, and updates the
        scale, as eager `scaler.scale(loss).backward(); scaler.step(opt); scaler.update()`
        does. The scaler's state is the plan's: `grad_scaler.get_scale()` shows it."""
        self.__dict__["_grad_scaler"] = grad_scaler

    # -- calling ------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        """Run one step on the arguments (or, with no arguments and a data source set, on
        its next batch). The call returns once the step is started, with outputs that wait
        for it when first used.

        Streaming: up to `config.outputs_buffer_size` calls run at once (the next call waits
        for room), so the Python between calls, data loading and the plan's work overlap.
        Reading an output in any way (`numpy()`, `item()`, printing, an op, passing it to
        another call, pickling, saving) waits for its step; `shape`, `dtype` and `ndim` do not.
        Eager use of the data of the graph's parameters, buffers and optimizer state (an op,
        `state_dict()`, `load_state_dict()`, saving) waits for the steps in flight, so it
        sees their updates and never races them; another graph sharing them waits too. So does
        eager use of the arguments, which the step reads while it runs (writing the next batch
        into the same tensor is safe).

        Errors: an op failing in a step is raised (a `TaskError` naming it) by every use of
        that step's outputs, and by the next call if no output has raised it yet; the call
        after that runs on a fresh plan executor.
        """
        source = self._data_source
        if source is not None and not args and not kwargs:
            return self._call_on_source(source)
        tensors, spec = flatten_inputs(args, kwargs)
        for t in tensors:
            if _is_lazy(t):
                raise TideflowError(
                    f"nn.Graph {self.name} was called inside the build() of a graph being "
                    "traced; call its modules instead"
                )
        compiled = self._compiled(tensors, spec)
        return self._outputs(compiled, compiled.run(tensors))

    def _call_on_source(self, source: GraphSource):
        tensors, spec = source.signature()
        compiled = self._compiled(tensors, spec)
        return self._outputs(compiled, compiled.run_sourced(source))

    def _compiled(self, tensors: list, spec) -> CompiledGraph:
        """The plan for this input signature: cached, or compiled now."""
        key = (
            spec,
            tuple((t.shape, t.dtype, layout_of(t)) for t in tensors),
            is_grad_enabled(),
            tuple(m.training for m in self._modules.values()),
            self._graph_modules.version,
        )
        plans = self._plans
        compiled = plans.get(key)
        if compiled is None:
            log = self._log if self._debug_level >= 0 else None
            compiled = CompiledGraph(self, tensors, spec, log)
            plans[key] = compiled
            while len(plans) > self.config.plan_cache_size:
                plans.popitem(last=False)[1].close()
            self._report(compiled)
        else:
            plans.move_to_end(key)
        self.__dict__["_latest"] = compiled
        return compiled

    def _outputs(self, compiled: CompiledGraph, outputs: list):
        for _, scheduler in self._optimizers:
            if scheduler is not None:
                scheduler.step()
        return unflatten(compiled.output_spec, iter(outputs))

    def set_data_source(self, batches) -> None:
        """Feed the calls without arguments from `batches`, an iterable such as a
        `DataLoader` whose items are build's positional arguments (a tuple or list of
        tensors, or one tensor). Batches are pulled on the runtime's data stream ahead of the
        steps that use them, so loading overlaps compute. The first batch fixes the input
        signature (shapes and dtypes; every batch must match it: use `drop_last=True`).
        When a pass over `batches` ends, the call raises `SourceExhausted`, and the next
        call starts a new pass (a DataLoader's next epoch). `None` detaches the source;
        calls with arguments work either way. Not in OneFlow, where a graph's inputs are
        always arguments.

        >>> graph.set_data_source(loader)
        >>> for _ in range(len(loader)):
        ...     loss = graph()
        """
        for compiled in self._plans.values():
            compiled.detach()
        source = None if batches is None else GraphSource(batches, self.name)
        self.__dict__["_data_source"] = source

    # -- debugging ----------------------------------------------------------------------------
    def debug(self, v_level: int = 0) -> None:
        """Print what compiling does from the next compilation on: -1 nothing, 0 the node
        count after each pass, the compile time and the memory plan; 1 (or more) also the
        whole IR as traced and after each pass, and each fused group's generated loop (its
        source and where it is cached) or why it runs NumPy kernels."""
        if isinstance(v_level, bool) or not isinstance(v_level, int) or v_level < -1:
            raise ValueError(f"debug: v_level must be an integer >= -1, got {v_level!r}")
        self.__dict__["_debug_level"] = v_level

    def timeline(self) -> Timeline:
        """The schedule the latest step executed on every rank (collective: every rank calls
        it): the micro-batch forwards and backwards in the order and at the times they ran,
        and the communication beside them. Recorded for steps that communicate (global
        tensors on more than one rank) and pipeline stages; empty otherwise. Print it,
        `save(path)` it as a Chrome trace, or read its `bubble` and `overlap`."""
        latest = self._latest
        return gather_timeline([] if latest is None else latest.timeline())

    def _log(self, stage: str, program: Program) -> None:
        title = "traced from build()" if stage == "traced" else f"after {stage}"
        if self._debug_level >= 1:
            print(f"[{self.name}] IR {title}:\n{program}")
            if stage == "fuse_elementwise" and (fused := describe_fused(program)):
                print(f"[{self.name}] fused groups:\n{fused}")
        else:
            print(f"[{self.name}] {title}: {len(program.nodes)} nodes")

    def _report(self, compiled: CompiledGraph) -> None:
        if self._debug_level < 0:
            return
        print(
            f"[{self.name}] compiled in {compiled.compile_seconds:.3f} s: "
            f"{compiled.traced_nodes} traced nodes -> {len(compiled.program.nodes)} tasks"
        )
        memory = compiled.program.memory
        if memory is not None:
            print(f"[{self.name}] {memory.summary()}")

    def __repr__(self) -> str:
        lines = [f"(CONFIG:config:{self.config!r})"]
        latest = self._latest
        if latest is not None:
            lines += [
                f"(INPUT:_{self.name}_input.{i}:{_tensor_str(shape, dtype)})"
                for i, (shape, dtype) in enumerate(latest.input_metas)
            ]
        for name, module in self._modules.items():
            lines += _module_lines(name, module, self._graph_modules.config_of)
        if latest is not None:
            lines += [
                f"(OUTPUT:_{self.name}_output.{i}:{_tensor_str(shape, dtype)})"
                for i, (shape, dtype) in enumerate(latest.output_metas)
            ]
        body = "\n".join("  " + line for line in lines)
        return f"(GRAPH:{self.name}:{type(self).__name__}): (\n{body}\n)"

    # -- state --------------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict:
        """The modules' state dicts by attribute name, and `_optimizer<i>` /
        `_lr_scheduler<i>` for the optimizers and schedulers in the order they were added."""
        out: OrderedDict = OrderedDict()
        for name, module in self._modules.items():
            out[name] = module.state_dict()
        for i, (opt, scheduler) in enumerate(self._optimizers):
            out[f"_optimizer{i}"] = opt.state_dict()
            if scheduler is not None:
                out[f"_lr_scheduler{i}"] = scheduler.state_dict()
        return out

    def load_state_dict(self, state_dict, strict: bool = True) -> None:
        """Load what `state_dict()` returned into the modules, optimizers and schedulers.
        With `strict`, missing or unexpected top-level keys raise (naming them), as do the
        modules' own key mismatches."""
        owners: dict[str, object] = dict(self._modules)
        for i, (opt, scheduler) in enumerate(self._optimizers):
            owners[f"_optimizer{i}"] = opt
            if scheduler is not None:
                owners[f"_lr_scheduler{i}"] = scheduler
        if strict:
            missing = [k for k in owners if k not in state_dict]
            unexpected = [k for k in state_dict if k not in owners]
            if missing or unexpected:
                raise TideflowError(
                    f"Error(s) in loading state_dict for nn.Graph {self.name}: missing keys "
                    f"{missing}, unexpected keys {unexpected}"
                )
        for key, owner in owners.items():
            if key in state_dict:
                if isinstance(owner, Module):
                    owner.load_state_dict(state_dict[key], strict=strict)
                else:
                    owner.load_state_dict(state_dict[key])


def _is_lazy(t) -> bool:
    """Whether `t` is a tensor of a graph being traced. Reads the slot: an argument a run in
    flight holds is not waited for (a step's pending output is never lazy)."""
    return not isinstance(t, PendingTensor) and type(raw_data(t)) is LazyArray


def _close_plans(plans: OrderedDict) -> None:
    for compiled in plans.values():
        compiled.close()


def _tensor_str(shape, dtype) -> str:
    return f"tensor(..., size={tuple(shape)}, dtype={dtype})"


def _module_lines(path: str, module: Module, config_of) -> list[str]:
    """OneFlow's layout: a module, its config when set, its parameters and buffers with
    shapes, its children."""
    extra = module.extra_repr()
    inner = []
    config = config_of(module)
    if config is not None and not config.is_default:
        inner.append(f"(CONFIG:{path}:{config!r})")
    for kind, table in (("PARAMETER", module._parameters), ("BUFFER", module._buffers)):
        for key, t in table.items():
            if t is not None:
                grad = ", requires_grad=True" if t.requires_grad else ""
                inner.append(
                    f"({kind}:{path}.{key}:tensor(..., size={tuple(t.shape)}, "
                    f"dtype={t.dtype}{grad})): ()"
                )
    for name, child in module._modules.items():
        if child is not None:
            inner += _module_lines(f"{path}.{name}", child, config_of)
    head = f"(MODULE:{path}:{module._get_name()}({extra}))"
    if not inner:
        return [head + ": ()"]
    return [head + ": (", *("  " + line for line in inner), ")"]
