"""Sparse optimizer rules: the update a wrapped optimizer applies to the rows looked up.

A row holds the embedding (dim values) and then the optimizer's state, `dim` values per
state tensor. Each rule runs its dense optimizer's own kernel on the gathered rows (the ops
in ops/optim.py, FTRL's in _ftrl.py), so a row moves exactly as the same row of a dense
table would under that optimizer in a step where it has a gradient. Steps count per
embedding (Adam's bias correction, Adagrad's lr decay), as OneFlow's and PyTorch's sparse
optimizers count them.
"""

from __future__ import annotations

import numpy as np

from ..framework.errors import TideflowError
from ..framework.registry import get_op, kernel_for
from ..optim import SGD, Adagrad, Adam
from ..optim.optimizer import Optimizer
from ._ftrl import Ftrl, ftrl_rows
from ._ftrl import hyper as ftrl_hyper


class RowRule:
    """An optimizer's update of embedding rows. `state_fill(group)`: the initial value of
    each state tensor (its length is the number of state tensors)."""

    name: str

    def state_fill(self, group: dict) -> tuple[float, ...]:
        return ()

    def hyper(self, group: dict, step: int) -> dict:
        raise NotImplementedError

    def apply(self, rows: np.ndarray, grads: np.ndarray, dim: int, hyper: dict) -> None:
        """Update `rows` (n, dim * (1 + state tensors)) in place with `grads` (n, dim)."""
        raise NotImplementedError


def _blocks(rows: np.ndarray, dim: int, n: int) -> list[np.ndarray]:
    return [rows[:, i * dim : (i + 1) * dim] for i in range(n)]


class SGDRows(RowRule):
    name = "sgd"

    def state_fill(self, group):
        return (0.0,) if group["momentum"] else ()

    def hyper(self, group, step):
        keys = ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize")
        return {**{k: group[k] for k in keys}, "first": step == 1}

    def apply(self, rows, grads, dim, hyper):
        kernel = kernel_for(get_op("sgd_update"))
        if hyper["momentum"]:
            w, buf = _blocks(rows, dim, 2)
        else:
            (w,), buf = _blocks(rows, dim, 1), None
        kernel(w, grads, buf, **hyper)


class AdamRows(RowRule):
    name = "adam"

    def __init__(self, decoupled: bool) -> None:
        self.decoupled = decoupled

    def state_fill(self, group):
        return (0.0, 0.0, 0.0) if group["amsgrad"] else (0.0, 0.0)

    def hyper(self, group, step):
        beta1, beta2 = group["betas"]
        return dict(
            lr=group["lr"], beta1=beta1, beta2=beta2, eps=group["eps"],
            weight_decay=group["weight_decay"], decoupled=self.decoupled,
            amsgrad=group["amsgrad"], maximize=group["maximize"], step=step,
            bias_correction=group.get("do_bias_correction", True),
        )  # fmt: skip

    def apply(self, rows, grads, dim, hyper):
        blocks = _blocks(rows, dim, 4 if hyper["amsgrad"] else 3)
        w, m, v = blocks[:3]
        vmax = blocks[3] if hyper["amsgrad"] else None
        kernel_for(get_op("adam_update"))(w, grads, m, v, vmax, **hyper)


class AdagradRows(RowRule):
    name = "adagrad"

    def __init__(self, initial_accumulator_value: float) -> None:
        # NOTE: PyTorch fills every group's sum with the constructor's value; so do we
        self.initial = initial_accumulator_value

    def state_fill(self, group):
        return (self.initial,)

    def hyper(self, group, step):
        keys = ("lr", "lr_decay", "weight_decay", "eps", "maximize")
        return {**{k: group[k] for k in keys}, "step": step}

    def apply(self, rows, grads, dim, hyper):
        w, state_sum = _blocks(rows, dim, 2)
        kernel_for(get_op("adagrad_update"))(w, grads, state_sum, **hyper)


class FtrlRows(RowRule):
    name = "ftrl"

    def state_fill(self, group):
        return (group["initial_accumulator_value"], 0.0)

    def hyper(self, group, step):
        return ftrl_hyper(group)

    def apply(self, rows, grads, dim, hyper):
        w, accumulate, z = _blocks(rows, dim, 3)
        ftrl_rows(w, grads, accumulate, z, **hyper)


def rule_for(optimizer: Optimizer) -> RowRule:
    """The row rule of `optimizer`'s kind (checked most derived first: AdamW is an Adam)."""
    if isinstance(optimizer, Ftrl):
        return FtrlRows()
    if isinstance(optimizer, Adam):
        return AdamRows(decoupled=type(optimizer)._decoupled)
    if isinstance(optimizer, Adagrad):
        return AdagradRows(optimizer.defaults["initial_accumulator_value"])
    if type(optimizer) is SGD:
        return SGDRows()
    raise TideflowError(
        "one_embedding.Optimizer: embeddings train with SGD, Adam, AdamW, Adagrad or "
        f"one_embedding.Ftrl; got {type(optimizer).__name__}"
    )
