"""`nn.Module`: parameters, buffers and submodules registered by attribute assignment, with
PyTorch's traversal, state-dict keys, train/eval, hooks and printing."""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator
from typing import Any

from ...framework import dtype as dtypes
from ...framework.errors import ShapeError, TideflowError
from ...framework.grad_mode import no_grad
from ...framework.node import RemovableHandle
from ...framework.tensor import Tensor
from ...parallel.to_global import module_to_global
from ..parameter import Buffer, Parameter

_hook_ids = itertools.count()
_EXTRA_STATE = "_extra_state"  # the state_dict key of a module's get_extra_state()


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


class Module:
    """Base class of every layer and model.

    >>> class Net(flow.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = flow.nn.Linear(4, 2)
    ...     def forward(self, x):
    ...         return self.fc(x).relu()
    """

    training: bool
    _version: int = 1  # state_dict format, stored in metadata like PyTorch

    def __init__(self) -> None:
        super().__setattr__("training", True)
        super().__setattr__("_parameters", OrderedDict())
        super().__setattr__("_buffers", OrderedDict())
        super().__setattr__("_non_persistent_buffers_set", set())
        super().__setattr__("_modules", OrderedDict())
        super().__setattr__("_forward_pre_hooks", OrderedDict())
        super().__setattr__("_forward_pre_hooks_with_kwargs", set())
        super().__setattr__("_forward_hooks", OrderedDict())
        super().__setattr__("_forward_hooks_with_kwargs", set())

    forward: Callable[..., Any]

    def forward(self, *args, **kwargs):  # type: ignore[no-redef]
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing "forward"')

    # -- registration -----------------------------------------------------------------------
    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' as parameter '{name}' "
                "(nn.Parameter or None expected)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' as buffer '{name}'")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        self._modules[name] = module

    register_module = add_module

    def _check_name(self, name: str, kind: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
        if "." in name or name == "":
            raise KeyError(f"{kind} name can't contain \".\" and can't be empty, got {name!r}")
        registered = name in self._parameters or name in self._buffers or name in self._modules
        if hasattr(self, name) and not registered:
            raise KeyError(f"attribute '{name}' already exists")

    def __setattr__(self, name: str, value) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, self.__dict__, self._buffers, self._modules)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if params is None:
                raise AttributeError("cannot assign modules before Module.__init__() call")
            self._remove_from(name, self.__dict__, self._parameters, self._buffers)
            self._modules[name] = value
        elif params is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}'")
            self._modules[name] = None
        elif isinstance(value, Buffer):
            self._remove_from(name, self.__dict__, self._parameters, self._modules)
            self.register_buffer(name, value, value.persistent)
        elif params is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}'")
            self._buffers[name] = value
        else:
            super().__setattr__(name, value)

    @staticmethod
    def _remove_from(name: str, *dicts) -> None:
        for d in dicts:
            d.pop(name, None)

    def __getattr__(self, name: str):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        super().__delattr__(name)

    def __dir__(self):
        return sorted(
            set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules)
        )

    def get_submodule(self, target: str) -> Module:
        mod = self
        for part in target.split(".") if target else []:
            if part not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule `{part}` ({target})")
            mod = mod._modules[part]
        return mod

    def get_parameter(self, target: str) -> Parameter:
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}` ({target})")
        return mod._parameters[name]

    def get_buffer(self, target: str) -> Tensor:
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}` ({target})")
        return mod._buffers[name]

    # -- traversal --------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "", remove_duplicate=True):
        memo = set() if memo is None else memo
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, m in self.named_children():
            yield m

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        modules = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or (remove_duplicate and value in seen):
                    continue
                if remove_duplicate:
                    seen.add(value)
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        yield from self._named_members(
            lambda m: m._parameters.items(), prefix, recurse, remove_duplicate
        )

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate=True):
        yield from self._named_members(
            lambda m: m._buffers.items(), prefix, recurse, remove_duplicate
        )

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes and bulk updates -------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad = p.grad.detach()
                p.grad.requires_grad_(False)
                p.grad.zero_()

    def apply(self, fn: Callable[[Module], None]) -> Module:
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Replace every parameter's and buffer's data with `fn(tensor)`, keeping the
        Parameter objects (optimizers hold them) and their gradients in step."""
        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                with no_grad():
                    new = fn(p)
                if new is not p:
                    p._data = new._data
                    p._version = new._version
                    if p.grad is not None:
                        p.grad = fn(p.grad)
            for name, b in m._buffers.items():
                if b is not None:
                    m._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs) -> Module:
        """`to(dtype)` converts floating and complex parameters and buffers; `to(device)` moves
        them."""
        if args and isinstance(args[0], type):
            from ..graph.module_config import GraphModule  # here: nn.graph imports this module

            if args[0] is GraphModule:
                raise TideflowError(
                    f"{self._get_name()}.to(GraphModule): the module is not seen from inside an "
                    "nn.Graph; call it on the graph's attribute in the graph's __init__ or "
                    "build (self.model.to(GraphModule) after self.model = model)"
                )

        def convert(t: Tensor) -> Tensor:
            if t.dtype.is_floating_point or t.dtype.is_complex:
                return t.to(*args, **kwargs)
            kw = {k: v for k, v in kwargs.items() if k != "dtype"}
            pos = [a for a in args if not _is_dtype(a)]
            return t.to(*pos, **kw) if pos or kw else t

        return self._apply(convert)

    def float(self) -> Module:
        return self.to(dtypes.float32)

    def double(self) -> Module:
        return self.to(dtypes.float64)

    def half(self) -> Module:
        return self.to(dtypes.float16)

    def bfloat16(self) -> Module:
        return self.to(dtypes.bfloat16)

    def cpu(self) -> Module:
        return self

    def to_global(self, placement=None, sbp=None) -> Module:
        """Make every parameter and buffer global on `placement` with `sbp` (which may be a
        function of the tensor), in place: optimizers holding the parameters stay valid."""
        return module_to_global(self, placement, sbp)

    def type(self, dst_type) -> Module:
        return self.to(dst_type)

    # -- state dict -------------------------------------------------------------------------
    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """Parameters and persistent buffers by PyTorch's dotted key names."""
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                out[prefix + name] = b if keep_vars else b.detach()
        if type(self).get_extra_state is not Module.get_extra_state:
            out[prefix + _EXTRA_STATE] = self.get_extra_state()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=out, prefix=prefix + name + ".", keep_vars=keep_vars)
        return out

    def get_extra_state(self) -> Any:
        """State beyond parameters and buffers (PyTorch's hook): a subclass that defines it
        has its value in `state_dict()` under `<prefix>_extra_state`, given back to its
        `set_extra_state` by `load_state_dict`."""
        raise TideflowError(
            f"{type(self).__name__}.get_extra_state: the module keeps no extra state"
        )

    def set_extra_state(self, state: Any) -> None:
        """Restore what `get_extra_state` returned (see there)."""
        raise TideflowError(
            f"{type(self).__name__}.set_extra_state: the module keeps no extra state"
        )

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy values into the parameters and buffers by key. With `strict`, missing or
        unexpected keys raise; shape mismatches always raise, naming every offending key."""
        own = self.state_dict(keep_vars=True)
        extras = {
            f"{name}.{_EXTRA_STATE}" if name else _EXTRA_STATE: m
            for name, m in self.named_modules()
            if type(m).get_extra_state is not Module.get_extra_state
        }
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        for key, target in own.items():
            if key not in state_dict or key in extras:
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                errors.append(f'While copying the parameter named "{key}", expected a tensor, '
                              f"got {type(value).__name__}.")  # fmt: skip
                continue
            if tuple(value.shape) != tuple(target.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {list(value.shape)} "
                    f"from checkpoint, the shape in current model is {list(target.shape)}."
                )
        if strict:
            if unexpected:
                keys = ", ".join(f'"{k}"' for k in unexpected)
                errors.insert(0, f"Unexpected key(s) in state_dict: {keys}.")
            if missing:
                keys = ", ".join(f'"{k}"' for k in missing)
                errors.insert(0, f"Missing key(s) in state_dict: {keys}.")
        if errors:
            raise TideflowError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        with no_grad():
            for key, target in own.items():
                if key in extras:
                    if key in state_dict:
                        extras[key].set_extra_state(state_dict[key])
                elif key in state_dict:
                    if assign:
                        self._assign(key, state_dict[key])
                    else:
                        target.copy_(state_dict[key])
        return IncompatibleKeys(missing, unexpected)

    def _assign(self, key: str, value: Tensor) -> None:
        path, _, name = key.rpartition(".")
        mod = self.get_submodule(path)
        if name in mod._parameters:
            old = mod._parameters[name]
            mod._parameters[name] = Parameter(value, requires_grad=old.requires_grad)
        else:
            mod._buffers[name] = value

    # -- calling and hooks ------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        for key, hook in list(self._forward_pre_hooks.items()):
            if key in self._forward_pre_hooks_with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        out = self.forward(*args, **kwargs)
        for key, hook in list(self._forward_hooks.items()):
            if key in self._forward_hooks_with_kwargs:
                res = hook(self, args, kwargs, out)
            else:
                res = hook(self, args, out)
            if res is not None:
                out = res
        return out

    def register_forward_pre_hook(self, hook, *, prepend: bool = False, with_kwargs=False):
        """`hook(module, args)` (or `(module, args, kwargs)`) runs before forward and may
        return replacement inputs."""
        return self._add_hook(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs,
                              hook, prepend, with_kwargs)  # fmt: skip

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs=False):
        """`hook(module, args, output)` runs after forward and may return a replacement."""
        return self._add_hook(self._forward_hooks, self._forward_hooks_with_kwargs,
                              hook, prepend, with_kwargs)  # fmt: skip

    @staticmethod
    def _add_hook(hooks: OrderedDict, with_kwargs_set: set, hook, prepend, with_kwargs):
        key = next(_hook_ids)
        hooks[key] = hook
        if prepend:
            hooks.move_to_end(key, last=False)
        if with_kwargs:
            with_kwargs_set.add(key)
        return RemovableHandle(hooks, key)

    # -- printing ---------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, module in self._modules.items():
            lines.append(f"({name}): " + _addindent(repr(module), 2))
        if not lines:
            return f"{self._get_name()}()"
        if len(lines) == 1 and not self._modules:
            return f"{self._get_name()}({lines[0]})"
        return f"{self._get_name()}(\n  " + "\n  ".join(lines) + "\n)"

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)


def _is_dtype(obj) -> bool:
    return isinstance(obj, dtypes.DType)


def check_input_dim(module: str, x: Tensor, dims: tuple[int, ...]) -> None:
    """Shared check for layers that accept a fixed set of input ranks."""
    if x.ndim not in dims:
        expected = " or ".join(f"{d}D" for d in dims)
        raise ShapeError(f"{module}: expected {expected} input, got input of shape {list(x.shape)}")
