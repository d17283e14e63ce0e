"""`Optimizer`: parameter groups, per-parameter state, and PyTorch's state_dict format."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from copy import deepcopy

from ..framework.dtype import get_default_dtype
from ..framework.errors import TideflowError
from ..framework.grad_mode import enable_grad, no_grad
from ..framework.tensor import Tensor


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class. Subclasses define `defaults` and `_step_group(group)`.

    The state dict matches PyTorch's layout: `{"state": {index: {...}}, "param_groups":
    [{hyperparameters..., "params": [index, ...]}]}`, parameters numbered in group order."""

    def __init__(self, params, defaults: dict) -> None:
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        params = list(params)
        if not params:
            raise TideflowError(f"{type(self).__name__} got an empty parameter list")
        groups = params if isinstance(params[0], dict) else [{"params": params}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict) -> None:
        group = dict(param_group)
        params = group["params"]
        group["params"] = [params] if isinstance(params, Tensor) else list(params)
        for p in group["params"]:
            if not isinstance(p, Tensor) or not p.is_leaf:
                raise TideflowError(f"{type(self).__name__} can only optimize leaf tensors")
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise TideflowError(f"{type(self).__name__}: parameter group didn't specify {key}")
            group.setdefault(key, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise TideflowError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad = p.grad.detach()
                    p.grad.zero_()

    @no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._step_group(group)
        return loss

    def _step_group(self, group: dict) -> None:
        raise NotImplementedError

    # -- state dict -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        index = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in g["params"]]
            groups.append(packed)
        state = {
            index[id(p)]: {k: (v.detach().clone() if isinstance(v, Tensor) else v)
                           for k, v in s.items()}
            for p, s in self.state.items()
            if id(p) in index
        }  # fmt: skip
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise TideflowError(
                f"loaded state dict has {len(groups)} parameter groups, the optimizer has "
                f"{len(self.param_groups)}"
            )
        for ours, theirs in zip(self.param_groups, groups, strict=True):
            if len(ours["params"]) != len(theirs["params"]):
                raise TideflowError(
                    "loaded state dict contains a parameter group that doesn't match the size "
                    f"of optimizer's group ({len(theirs['params'])} vs {len(ours['params'])})"
                )
        by_index = {
            i: p
            for ours, theirs in zip(self.param_groups, groups, strict=True)
            for i, p in zip(theirs["params"], ours["params"], strict=True)
        }
        self.state = defaultdict(dict)
        for i, s in state_dict["state"].items():
            p = by_index[int(i)]
            self.state[p] = {k: _restore(v, p) for k, v in s.items()}
        for ours, theirs in zip(self.param_groups, groups, strict=True):
            ours.update({k: deepcopy(v) for k, v in theirs.items() if k != "params"})

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(g.items()) if k != "params"]
        return "\n".join([*lines, ")"])


def _restore(value, param: Tensor):
    """A state entry as loaded: a private copy, floating state in the parameter's dtype."""
    if not isinstance(value, Tensor):
        return deepcopy(value)
    value = value.detach().clone()
    if value.dtype.is_floating_point or value.dtype.is_complex:
        value = value.to(param.dtype)
    if param.is_global and value.shape == param.shape:  # state follows its parameter's layout
        if value.is_global:
            return value.to_global(placement=param.placement, sbp=param.sbp)
        return Tensor._create_global(lambda _: value, tuple(param.shape), param.placement,
                                     param.sbp)  # fmt: skip
    return value


def params_with_grad(group: dict) -> Iterable[Tensor]:
    return (p for p in group["params"] if p.grad is not None)


def scalar_state(value: float) -> float:
    """A scalar of an optimizer's state (NAdam's mu_product, ASGD's eta and mu) rounded as
    PyTorch keeps it, in a tensor of the default dtype (float32 unless that is float64)."""
    return float(get_default_dtype().np.type(value))
