"""`nn.utils.parametrize` (PyTorch's API): a module's tensor computed from other tensors.

`register_parametrization(module, "weight", P)` moves the weight to
`module.parametrizations.weight.original` and makes `module.weight` a property returning
`P(original)`, so every read (every forward) recomputes it and gradients reach the original.
The module's class is swapped for a subclass carrying the property (properties live on
classes), named `Parametrized<Class>`; removing the last parametrization swaps it back.
Assigning `module.weight = value` stores `P.right_inverse(value)` in the original.
"""

from __future__ import annotations

import contextlib

from ...framework.grad_mode import no_grad
from ...framework.tensor import Tensor
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter

__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "type_before_parametrizations",
]

_cache_depth = 0
_cache: dict[tuple[int, str], Tensor] = {}


@contextlib.contextmanager
def cached():
    """Within the block, each parametrized tensor is computed once, at its first read (for
    a module whose weight is read several times per forward, as in recurrent layers)."""
    global _cache_depth
    _cache_depth += 1
    try:
        yield
    finally:
        _cache_depth -= 1
        if not _cache_depth:
            _cache.clear()


def _register_tensor(module: Module, name: str, value: Tensor) -> None:
    """A parameter stays a parameter; any other tensor becomes a buffer."""
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _check_like(what: str, value, original: Tensor, unsafe: bool) -> None:
    if unsafe:
        return
    if not isinstance(value, Tensor):
        raise ValueError(f"parametrize: {what} must return a tensor, got {type(value).__name__}")
    if value.dtype != original.dtype or tuple(value.shape) != tuple(original.shape):
        raise ValueError(
            f"parametrize: {what} changed the tensor from {original.dtype} of shape "
            f"{list(original.shape)} to {value.dtype} of shape {list(value.shape)}; pass "
            "unsafe=True to allow it"
        )


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to the original tensor(s): one
    `original`, or `original0, original1, ...` when the first parametrization's
    `right_inverse` returns a sequence (its forward then takes that many tensors)."""

    def __init__(self, modules, original: Tensor, unsafe: bool = False) -> None:
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            stored = self._inverse(original)
        self.is_tensor = isinstance(stored, Tensor)
        self.ntensors = 1 if self.is_tensor else len(stored)
        if self.is_tensor:
            _check_like("right_inverse", stored, original, unsafe)
            # NOTE: the original object keeps its identity (an optimizer may hold it)
            original.data = stored.detach()
            _register_tensor(self, "original", original)
        else:
            for i, part in enumerate(stored):
                if not isinstance(part, Tensor):
                    raise ValueError(
                        f"parametrize: right_inverse must return tensors, got "
                        f"{type(part).__name__} at position {i}"
                    )
                part = part.detach()
                if isinstance(original, Parameter):
                    part = Parameter(part, original.requires_grad)
                _register_tensor(self, f"original{i}", part)
        if not unsafe:
            _check_like("the parametrization", self(), original, unsafe)

    def _inverse(self, value):
        """`value` through the right inverses, last parametrization first; one without
        `right_inverse` passes its input on, as at registration PyTorch does."""
        for module in reversed(list(self)):
            if hasattr(module, "right_inverse"):
                value = module.right_inverse(value)
        return value

    def right_inverse(self, value: Tensor) -> None:
        """Store the original(s) for which the parametrized tensor is `value`."""
        with no_grad():
            for module in reversed(list(self)):
                if not hasattr(module, "right_inverse"):
                    raise RuntimeError(
                        f"parametrize: {type(module).__name__} does not implement "
                        "right_inverse, so the parametrized tensor cannot be assigned"
                    )
                value = module.right_inverse(value)
            if self.is_tensor:
                _check_like("right_inverse", value, self.original, self.unsafe)
                self.original.data = value.detach()
                return
            if len(value) != self.ntensors:
                raise ValueError(
                    f"parametrize: right_inverse returned {len(value)} tensors, expected "
                    f"{self.ntensors}"
                )
            for i, part in enumerate(value):
                getattr(self, f"original{i}").data = part.detach()

    def forward(self):
        first, *rest = list(self)
        if self.is_tensor:
            x = first(self.original)
        else:
            x = first(*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in rest:
            x = module(x)
        return x


def _inject_class(module: Module) -> None:
    cls = type(module)
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {})


def _inject_property(module: Module, name: str) -> None:
    def get(self):
        parametrization = self.parametrizations[name]
        if not _cache_depth:
            return parametrization()
        key = (id(self), name)
        if key not in _cache:
            _cache[key] = parametrization()
        return _cache[key]

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get, set_))


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether `module` has a parametrization (on `tensor_name`, if given)."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def type_before_parametrizations(module: Module) -> type:
    """The module's class as it was before any parametrization."""
    return type(module).__bases__[0] if is_parametrized(module) else type(module)


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Make `module.<tensor_name>` the output of `parametrization` applied to the stored
    original (a parameter or buffer of the module); a second registration on the same name
    applies after the first. `unsafe=True` allows a parametrization that changes the
    tensor's shape or dtype.

    >>> class Symmetric(flow.nn.Module):
    ...     def forward(self, x):
    ...         return x.triu() + x.triu(1).mT
    >>> m = register_parametrization(flow.nn.Linear(3, 3), "weight", Symmetric())
    >>> bool((m.weight == m.weight.T).all())
    True
    """
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            before = getattr(module, tensor_name)
            after = parametrization(before)
            _check_like(f"{type(parametrization).__name__}", after, before, unsafe)
            if hasattr(parametrization, "right_inverse"):
                inverse = parametrization.right_inverse(after)
                _check_like(
                    f"{type(parametrization).__name__}.right_inverse", inverse, before, unsafe
                )
        plist.append(parametrization)
        plist.unsafe = plist.unsafe or unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(
            f"register_parametrization: {type(module).__name__} has no parameter or buffer "
            f"named {tensor_name!r}"
        )
    original = getattr(module, tensor_name)
    plist = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _inject_class(module)
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = plist
    _inject_property(module, tensor_name)
    return module


def remove_parametrizations(
    module: Module, tensor_name: str, leave_parametrized: bool = True
) -> Module:
    """Undo the parametrizations of `tensor_name`: it becomes a plain parameter (or buffer)
    again, holding its current parametrized value (`leave_parametrized`) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(
            f"remove_parametrizations: {type(module).__name__} has no parametrization on "
            f"{tensor_name!r}"
        )
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
            _check_like("the parametrization", value, original, unsafe=plist.unsafe)
            original.data = value.detach()
    elif leave_parametrized:
        with no_grad():
            value = getattr(module, tensor_name).detach()
        original = (
            Parameter(value, plist.original0.requires_grad)
            if isinstance(plist.original0, Parameter)
            else value
        )
    else:
        raise ValueError(
            "remove_parametrizations: a tensor parametrized by several originals cannot be "
            "left unparametrized (leave_parametrized=False)"
        )
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_tensor(module, tensor_name, original)
    if not is_parametrized(module):
        del module.parametrizations
        module.__class__ = type(module).__bases__[0]
    return module
