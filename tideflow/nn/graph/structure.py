"""Nested inputs and outputs of a graph: tensors in tuples, lists, namedtuples and dicts,
flattened to a list of tensors and a hashable description of the nesting (the part of a
graph's input signature that is not shapes and dtypes)."""

from __future__ import annotations

from ...framework.errors import TideflowError
from ...framework.tensor import Tensor

TENSOR = "tensor"


def flatten_inputs(args: tuple, kwargs: dict) -> tuple[list[Tensor], tuple]:
    """The tensors among a call's arguments, and the nesting with every other value (which
    must be hashable: it is part of the signature a plan is compiled for)."""
    tensors: list[Tensor] = []
    spec = (_walk(args, "args", tensors, static=True), _walk(kwargs, "kwargs", tensors, True))
    return tensors, spec


def flatten_outputs(out, where: str) -> tuple[list[Tensor], object]:
    """The tensors `build` returned, and their nesting. Anything but tensors, None and
    tuples/lists/dicts of them raises, naming its position and `where` build is."""
    tensors: list[Tensor] = []
    return tensors, _walk(out, "output", tensors, static=False, where=where)


def unflatten(spec, tensors) -> object:
    """The nesting `spec` rebuilt with the next tensors of the iterator `tensors`."""
    if spec is TENSOR:
        return next(tensors)
    if spec is None:
        return None
    kind = spec[0]
    if kind == "static":
        return spec[2]
    if kind is dict:
        return {k: unflatten(s, tensors) for k, s in zip(spec[1], spec[2], strict=True)}
    items = [unflatten(s, tensors) for s in spec[1]]
    if kind is list:
        return items
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


def _walk(x, path: str, tensors: list, static: bool, where: str = ""):
    if isinstance(x, Tensor):
        tensors.append(x)
        return TENSOR
    if x is None:
        return None
    if isinstance(x, tuple | list):
        return (type(x), tuple(_walk(v, f"{path}[{i}]", tensors, static, where)
                               for i, v in enumerate(x)))  # fmt: skip
    if isinstance(x, dict):
        keys = tuple(x)
        return (dict, keys, tuple(_walk(x[k], f"{path}[{k!r}]", tensors, static, where)
                                  for k in keys))  # fmt: skip
    if not static:
        shown = repr(x)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise TideflowError(
            f"nn.Graph: build() ({where}) returned {path} = {shown} of type "
            f"{type(x).__name__}; a graph's outputs must be tensors (or None), possibly in "
            "nested tuples, lists and dicts"
        )
    try:
        hash(x)
    except TypeError:
        raise TypeError(
            f"nn.Graph: argument {path} of type {type(x).__name__} is neither a tensor nor "
            "hashable; other arguments are compiled into the plan as constants, so they must be "
            "hashable (int, float, str, bool, tuples of them)"
        ) from None
    return ("static", type(x), x)  # typed: 1, 1.0 and True compile different plans
