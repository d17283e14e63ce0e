"""`functional_call`: run a module with some of its parameters and buffers replaced by given
tensors for one call (PyTorch's `torch.func.functional_call`), e.g. to differentiate with
respect to weights that are plain tensors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from ...framework.tensor import Tensor
from ..modules.module import Module

__all__ = ["functional_call"]


def _owner(module: Module, path: str) -> tuple[Module, str]:
    *parents, leaf = path.split(".")
    for name in parents:
        module = getattr(module, name)
    return module, leaf


def _tied_names(module: Module) -> dict[str, list[str]]:
    """Each parameter's and buffer's first name -> all its names (tied weights share one)."""
    names: dict[int, list[str]] = {}
    for name, t in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(t), []).append(name)
    for name, t in module.named_buffers(remove_duplicate=False):
        names.setdefault(id(t), []).append(name)
    return {group[0]: group for group in names.values()}


@contextlib.contextmanager
def _swapped(module: Module, tensors: Mapping[str, Tensor]) -> Iterator[None]:
    saved = []
    try:
        for path, value in tensors.items():
            owner, leaf = _owner(module, path)
            store = owner._parameters if leaf in owner._parameters else owner._buffers
            saved.append((store, leaf, store[leaf]))
            store[leaf] = value
        yield
    finally:
        for store, leaf, value in reversed(saved):
            store[leaf] = value


def functional_call(module: Module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights: bool = True, strict: bool = False):  # fmt: skip
    """`module(*args, **kwargs)` with the parameters and buffers named in
    `parameters_and_buffers` (a dict, or a tuple of dicts) replaced for this call; the module
    is unchanged afterwards. With `tie_weights`, replacing one name of a tied weight replaces
    all its names; with `strict`, every parameter and buffer must be given.

    >>> m = flow.nn.Linear(2, 1)
    >>> w = flow.ones(1, 2, requires_grad=True)
    >>> out = flow.nn.utils.stateless.functional_call(m, {"weight": w}, (flow.ones(1, 2),))
    """
    if isinstance(parameters_and_buffers, tuple | list):
        merged: dict[str, Tensor] = {}
        for part in parameters_and_buffers:
            repeated = set(merged) & set(part)
            if repeated:
                raise ValueError(
                    f"functional_call: {sorted(repeated)} appeared in multiple dictionaries"
                )
            merged.update(part)
        parameters_and_buffers = merged
    tensors = dict(parameters_and_buffers)
    groups = _tied_names(module)
    if tie_weights:
        for group in groups.values():
            given = [name for name in group if name in tensors]
            if given and any(tensors[name] is not tensors[given[0]] for name in given):
                raise ValueError(
                    f"functional_call: the tied weights {group} were given different values"
                )
            for name in group if given else ():
                tensors[name] = tensors[given[0]]
    known = {name for group in groups.values() for name in group}
    unexpected = sorted(set(tensors) - known)
    missing = sorted(known - set(tensors))
    if unexpected or (strict and missing):
        raise RuntimeError(
            f"functional_call: unexpected key(s): {unexpected}; missing key(s): "
            f"{missing if strict else []}"
        )
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    with _swapped(module, tensors):
        return module(*args, **(kwargs or {}))
