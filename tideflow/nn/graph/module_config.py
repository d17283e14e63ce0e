"""Module-level options inside an `nn.Graph` (OneFlow's `GraphModule`).

A module assigned to a graph (`self.model = model` in the graph's `__init__`) is seen through
a `ProxyModule`: attribute access, calls and sub-modules behave as the module's, and
`self.model.to(GraphModule)` is the graph's view of that module, holding its `ModuleConfig`:
activation checkpointing and the pipeline stage. A graph keeps one view per module object of
its module trees (`GraphModules`), so a module shared by two graphs has a config in each.

While build() is traced, every call of a module of the graph runs in a `Scope` naming the
module, its stage and its checkpointing segment: the nodes it records carry it, and passes
read it (`compiler.passes.checkpoint` recomputes checkpointed segments in backward).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from ...compiler.ir import Scope
from ...framework.errors import TideflowError
from ...framework.tensor import Tensor
from ...parallel.placement import placement as Placement
from ...parallel.sbp import broadcast
from ..modules.module import Module

_OPTIONS = ("activation_checkpointing", "stage_id")


def _unknown_option(owner: object, name: str) -> TideflowError:
    return TideflowError(
        f"{type(owner).__name__} has no option {name!r}; the options are "
        f"{', '.join(_OPTIONS)} and set_stage(stage_id, placement)"
    )


class ModuleConfig:
    """The options of one module in a graph. Set them in the graph's `__init__`; changing one
    later compiles the graph again at its next call.

    - `activation_checkpointing`: keep only the module's inputs (and random masks) for
      backward and recompute its forward there, trading compute for activation memory.
      Results are unchanged.
    - `stage_id`, `set_stage(stage_id, placement)`: the module's pipeline stage (its
      sub-modules inherit it unless they set their own). Recorded on the nodes the module
      produces. With a placement, the module's global tensor inputs move to it when it is
      called (as OneFlow does: build needs no `to_global` between stages).

    >>> self.model.to(flow.nn.graph.GraphModule).config.activation_checkpointing = True
    >>> self.model.config.activation_checkpointing = True  # OneFlow 0.8's spelling
    """

    __slots__ = ("_activation_checkpointing", "_changed", "_module", "_placement", "_stage_id")

    def __init__(self, module_name: str, changed: Callable[[], None]) -> None:
        object.__setattr__(self, "_module", module_name)
        object.__setattr__(self, "_changed", changed)
        object.__setattr__(self, "_activation_checkpointing", False)
        object.__setattr__(self, "_stage_id", None)
        object.__setattr__(self, "_placement", None)

    @property
    def activation_checkpointing(self) -> bool:
        return self._activation_checkpointing

    @activation_checkpointing.setter
    def activation_checkpointing(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(
                f"module {self._module!r}: activation_checkpointing must be a bool, got {mode!r}"
            )
        self._set("_activation_checkpointing", mode)

    @property
    def stage_id(self) -> int | None:
        return self._stage_id

    @stage_id.setter
    def stage_id(self, stage_id: int | None) -> None:
        self.set_stage(stage_id, self._placement)

    @property
    def placement(self):
        """The placement of the module's stage (set with `set_stage`), or None."""
        return self._placement

    def set_stage(self, stage_id: int | None = None, placement=None) -> None:
        """Put the module in pipeline stage `stage_id` (0, 1, ...), on `placement`."""
        if stage_id is not None and (
            isinstance(stage_id, bool) or not isinstance(stage_id, int) or stage_id < 0
        ):
            raise ValueError(
                f"module {self._module!r}: set_stage: stage_id must be a non-negative integer "
                f"or None, got {stage_id!r}"
            )
        if placement is not None and not isinstance(placement, Placement):
            raise TypeError(
                f"module {self._module!r}: set_stage: placement must be a flow.placement, got "
                f"{type(placement).__name__}"
            )
        self._set("_stage_id", stage_id)
        self._set("_placement", placement)

    @property
    def is_default(self) -> bool:
        return not self._activation_checkpointing and self._stage_id is None

    def _set(self, slot: str, value) -> None:
        if getattr(self, slot) != value:
            object.__setattr__(self, slot, value)
            self._changed()

    def __setattr__(self, name: str, value) -> None:
        if name not in _OPTIONS:
            raise _unknown_option(self, name)
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        fields = f"activation_checkpointing={self._activation_checkpointing}, "
        fields += f"stage_id={self._stage_id}"
        if self._placement is not None:
            fields += f", placement={self._placement}"
        return f"ModuleConfig({fields})"


class GraphModule:
    """A module as one graph sees it: its dotted name in the graph and its `config`. Get it
    with `self.model.to(GraphModule)` inside an `nn.Graph` (in `__init__` or `build`); a
    module outside a graph has none. `activation_checkpointing`, `stage_id` and `set_stage`
    are also spelled directly on it, as in OneFlow.

    >>> class Train(flow.nn.Graph):
    ...     def __init__(self, model):
    ...         super().__init__()
    ...         self.model = model
    ...         for block in self.model.h:
    ...             block.to(GraphModule).activation_checkpointing = True
    """

    __slots__ = ("_config", "_module", "_name")

    def __init__(self, name: str, module: Module, changed: Callable[[], None]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_config", ModuleConfig(name, changed))

    @property
    def name(self) -> str:
        return self._name

    @property
    def module(self) -> Module:
        return self._module

    @property
    def config(self) -> ModuleConfig:
        return self._config

    @property
    def activation_checkpointing(self) -> bool:
        return self._config.activation_checkpointing

    @activation_checkpointing.setter
    def activation_checkpointing(self, mode: bool) -> None:
        self._config.activation_checkpointing = mode

    @property
    def stage_id(self) -> int | None:
        return self._config.stage_id

    @stage_id.setter
    def stage_id(self, stage_id: int | None) -> None:
        self._config.stage_id = stage_id

    def set_stage(self, stage_id: int | None = None, placement=None) -> None:
        self._config.set_stage(stage_id, placement)

    def __setattr__(self, name: str, value) -> None:
        if name not in _OPTIONS:
            raise _unknown_option(self, name)
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"GraphModule({self._name}: {self._module._get_name()}, {self._config!r})"


class ProxyModule:
    """What a module is inside a graph (`self.model`): the module's attributes, calls and
    sub-modules (as proxies), plus `to(GraphModule)` (the graph's view of it), `to(nn.Module)`
    (the module itself) and `config` (the view's config)."""

    __slots__ = ("_graph_modules", "_view")

    def __init__(self, view: GraphModule, graph_modules: GraphModules) -> None:
        object.__setattr__(self, "_view", view)
        object.__setattr__(self, "_graph_modules", graph_modules)

    def to(self, *args, **kwargs):
        if len(args) == 1 and not kwargs:
            if args[0] is GraphModule:
                return self._view
            if args[0] is Module:
                return self._view.module
        self._view.module.to(*args, **kwargs)
        return self

    @property
    def config(self) -> ModuleConfig:
        module = self._view.module
        if hasattr(module, "config"):
            raise TideflowError(
                f"module {self._view.name!r} ({module._get_name()}) has an attribute 'config' "
                "of its own: use .to(flow.nn.graph.GraphModule).config for the graph's module "
                "config, or .to(flow.nn.Module).config for the module's attribute"
            )
        return self._view.config

    def __call__(self, *args, **kwargs):
        return self._view.module(*args, **kwargs)

    def __getattr__(self, name: str):
        value = getattr(self._view.module, name)
        return self._wrap(value, name) if isinstance(value, Module) else value

    def __setattr__(self, name: str, value) -> None:
        setattr(self._view.module, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._view.module, name)

    def __getitem__(self, key):
        value = self._view.module[key]
        return self._wrap(value, str(key)) if isinstance(value, Module) else value

    def __iter__(self) -> Iterator:
        names = {id(m): k for k, m in self._view.module._modules.items() if m is not None}
        for value in self._view.module:
            yield self._wrap(value, names[id(value)]) if id(value) in names else value

    def __len__(self) -> int:
        return len(self._view.module)

    def __repr__(self) -> str:
        return f"ProxyModule({self._view.name}): {self._view.module!r}"

    def _wrap(self, module: Module, key: str) -> ProxyModule:
        graph_modules = self._graph_modules
        return ProxyModule(graph_modules.view(module, f"{self._view.name}.{key}"), graph_modules)


class GraphModules:
    """A graph's view of each module of its module trees, by module identity. `version`
    changes whenever a config does (it is part of the key a plan is compiled for)."""

    def __init__(self) -> None:
        self._views: dict[int, GraphModule] = {}
        self.version = 0

    def proxy(self, module: Module, name: str) -> ProxyModule:
        """The proxy of `module`, known as `name` in the graph unless it was met before,
        and of its sub-modules."""
        for path, sub in module.named_modules(prefix=name):
            self.view(sub, path)
        return ProxyModule(self._views[id(module)], self)

    def view(self, module: Module, name: str) -> GraphModule:
        # NOTE: views hold their modules, so the id of a module with a view is never reused.
        view = self._views.get(id(module))
        if view is None:
            view = self._views[id(module)] = GraphModule(name, module, self._bump)
        return view

    def pipeline_stage(self, rank: int) -> tuple[int, int] | None:
        """(this rank's stage, the number of stages) when the modules' stages have
        placements and `rank` is in exactly one of them; None otherwise."""
        placed = {v.config.stage_id: v.config.placement for v in self._views.values()}
        placed = {s: p for s, p in placed.items() if s is not None and p is not None}
        mine = [s for s, p in placed.items() if rank in p.flat_ranks]
        if len(placed) < 2 or len(mine) != 1:
            return None
        return mine[0], max(placed) + 1

    def config_of(self, module: Module) -> ModuleConfig | None:
        view = self._views.get(id(module))
        return None if view is None else view.config

    def _bump(self) -> None:
        self.version += 1

    @contextmanager
    def scopes(self, tracer, roots: dict[str, Module]) -> Iterator[None]:
        """While tracing: each call of a module of `roots` (attribute name -> module) runs
        in its scope. Stages are inherited from enclosing calls; a call of a checkpointed
        module opens a new checkpointing segment unless it is inside one already."""
        segments = itertools.count()

        def enter(view: GraphModule, module: Module, args) -> tuple | None:
            parent = tracer.forward_scope or Scope()
            config = view.config
            stage = parent.stage_id if config.stage_id is None else config.stage_id
            segment = parent.checkpoint
            if segment is None and config.activation_checkpointing:
                segment = next(segments)
            tracer.push_scope(Scope(view.name, stage, segment, micro_batch=parent.micro_batch))
            return None if config.placement is None else _moved(args, config.placement)

        def leave(module: Module, args, output) -> None:
            tracer.pop_scope()

        handles = []
        seen: set[int] = set()
        for prefix, root in roots.items():
            for path, module in root.named_modules(prefix=prefix):
                if id(module) in seen:
                    continue
                seen.add(id(module))
                hook = partial(enter, self.view(module, path))
                handles.append(module.register_forward_pre_hook(hook, prepend=True))
                handles.append(module.register_forward_hook(leave))
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()


def _moved(args: tuple, placement: Placement) -> tuple:
    """The global tensors among a stage's inputs on the stage's placement (their SBP kept
    where the placements have as many axes, else broadcast); other arguments as they are."""

    def move(a):
        if not isinstance(a, Tensor) or not a.is_global or a.placement == placement:
            return a
        sbp = a.sbp if a.placement.ndim == placement.ndim else (broadcast,) * placement.ndim
        return a.to_global(placement=placement, sbp=sbp)

    return tuple(move(a) for a in args)
