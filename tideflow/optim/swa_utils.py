"""Weight averaging, as `torch.optim.swa_utils`: `AveragedModel` keeps a running average
(SWA's equal weights, or an exponential moving average) of a model's parameters, `SWALR`
anneals each group's rate to a constant SWA rate, and `update_bn` recomputes batch-norm
statistics for the averaged weights."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable

from ..framework import dtype as dtypes
from ..framework.grad_mode import no_grad
from ..framework.tensor import Tensor
from ..nn.modules.module import Module
from ..nn.modules.normalization import _BatchNorm
from ..ops.creation import tensor
from .lr_scheduler import LRScheduler, _format_param
from .optimizer import Optimizer

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """An exponential moving average with `decay`, updating lists of tensors in place."""

    def ema_update(ema_params: list, current_params: list, num_averaged) -> None:
        for ema, current in zip(ema_params, current_params, strict=True):
            ema.lerp_(current, 1 - decay)

    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """SWA's equal-weight average, updating lists of tensors in place."""

    def swa_update(averaged_params: list, current_params: list, num_averaged) -> None:
        weight = 1 / (int(num_averaged) + 1)
        for averaged, current in zip(averaged_params, current_params, strict=True):
            if averaged.dtype.is_floating_point or averaged.dtype.is_complex:
                averaged.lerp_(current, weight)
            else:  # integer buffers (batch counts): the average truncated
                averaged.copy_(averaged + (current - averaged) / (int(num_averaged) + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """An exponential moving average with `decay`, one tensor at a time (returns the new one)."""

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable:
    """SWA's equal-weight average, one tensor at a time (returns the new one)."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A copy of `model` whose parameters (and, with `use_buffers`, buffers) average the
    model's over the calls to `update_parameters(model)`: equally (SWA) by default, or by
    `avg_fn(averaged, current, n)` (one tensor, returning the new value) or
    `multi_avg_fn(averaged_list, current_list, n)` (in place). The first call copies.
    Calling the averaged model runs the copy.

    >>> import tideflow as flow
    >>> model = flow.nn.Linear(3, 2)
    >>> ema = flow.optim.swa_utils.AveragedModel(
    ...     model, multi_avg_fn=flow.optim.swa_utils.get_ema_multi_avg_fn(0.99))
    >>> ema.update_parameters(model)
    """

    def __init__(
        self,
        model: Module,
        device=None,
        avg_fn: Callable | None = None,
        multi_avg_fn: Callable | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=dtypes.int64))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _averaged(self, model: Module) -> tuple[list[Tensor], list[Tensor]]:
        if self.use_buffers:
            ours = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            ours, theirs = self.module.parameters(), model.parameters()
        return [p.detach() for p in ours], [p.detach() for p in theirs]

    @no_grad()
    def update_parameters(self, model: Module) -> None:
        """Fold `model`'s current weights into the average."""
        ours, theirs = self._averaged(model)
        n = int(self.n_averaged.item())
        if n == 0:
            for averaged, current in zip(ours, theirs, strict=True):
                averaged.copy_(current)
        elif self.multi_avg_fn is not None:
            self.multi_avg_fn(ours, theirs, self.n_averaged)
        else:
            # NOTE: by default one tensor at a time, as PyTorch does on CPU (its in-place
            # list form serves the devices with fused list kernels)
            avg_fn = self.avg_fn or get_swa_avg_fn()
            for averaged, current in zip(ours, theirs, strict=True):
                averaged.copy_(avg_fn(averaged, current, self.n_averaged))
        if not self.use_buffers:
            # buffers follow the model itself (batch-norm statistics: see update_bn)
            for ours_buffer, model_buffer in zip(self.module.buffers(), model.buffers(),
                                                 strict=True):  # fmt: skip
                ours_buffer.detach().copy_(model_buffer.detach())
        self.n_averaged.add_(1)


@no_grad()
def update_bn(loader: Iterable, model: Module, device=None) -> None:
    """Recompute the running statistics of `model`'s batch norms over one pass of `loader`
    (their cumulative average: momentum None), in training mode; the model's mode and the
    norms' momenta are restored. Batches that are lists or tuples give their first item."""
    momenta = {m: m.momentum for m in model.modules() if isinstance(m, _BatchNorm)}
    if not momenta:
        return
    for norm in momenta:
        norm.reset_running_stats()
        norm.momentum = None
    was_training = model.training
    model.train()
    for batch in loader:
        if isinstance(batch, list | tuple):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for norm, momentum in momenta.items():
        norm.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's rate from where it is to `swa_lr` over `anneal_epochs` epochs,
    along a half cosine ('cos') or a line ('linear'), then hold it: the schedule of SWA's
    averaging phase.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> swa = flow.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=5)
    """

    def __init__(self, optimizer: Optimizer, swa_lr, anneal_epochs: int = 10,
                 anneal_strategy: str = "cos", last_epoch: int = -1) -> None:  # fmt: skip
        for rate, group in zip(_format_param("swa_lr", optimizer, swa_lr),
                               optimizer.param_groups, strict=True):  # fmt: skip
            group["swa_lr"] = rate
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must by one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2 if self.anneal_strategy == "cos" else t

    def _fraction(self, step: int) -> float:
        return max(0.0, min(1.0, step / max(1, self.anneal_epochs)))

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        # the rate the schedule started from, recovered from the group's current one
        previous = self._anneal(self._fraction(step - 1))
        alpha = self._anneal(self._fraction(step))
        rates = []
        for group in self.optimizer.param_groups:
            swa_lr = group["swa_lr"]
            start = swa_lr if previous == 1 else (group["lr"] - previous * swa_lr) / (1 - previous)
            rates.append(swa_lr * alpha + start * (1 - alpha))
        return rates
