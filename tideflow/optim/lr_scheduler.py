"""Learning-rate schedulers with PyTorch's `torch.optim.lr_scheduler` behaviour.

Each scheduler computes the same learning rates as its PyTorch namesake at every step: the
chainable (recursive) form when stepped, the closed form when `step(epoch)` is given, both
written in the same order of floating-point operations as PyTorch.

OneFlow's spellings are accepted too: `last_step=` for `last_epoch=` (and `.last_step`),
and PolynomialLR's OneFlow form (steps, end_learning_rate, cycle) under `import tideflow`.

A scheduler's `state_dict()` holds every attribute but the optimizer (and the lambdas of
LambdaLR / MultiplicativeLR, as in PyTorch), as plain Python values, so `flow.save` can
store it. Call `optimizer.step()` before `scheduler.step()`; the reverse order warns.
"""

from __future__ import annotations

import math
import types
import warnings
import weakref
from bisect import bisect_right
from collections import Counter
from contextlib import contextmanager
from functools import partial, wraps
from inspect import signature

from ..framework.conventions import follows_pytorch
from .optimizer import Optimizer

__all__ = [
    "LRScheduler",
    "LambdaLR",
    "MultiplicativeLR",
    "StepLR",
    "MultiStepLR",
    "ConstantLR",
    "LinearLR",
    "ExponentialLR",
    "SequentialLR",
    "PolynomialLR",
    "CosineAnnealingLR",
    "ChainedScheduler",
    "ReduceLROnPlateau",
    "CyclicLR",
    "CosineAnnealingWarmRestarts",
    "CosineDecayLR",
    "OneCycleLR",
    "WarmupLR",
    "WarmUpLR",
]

EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated "
    "where possible. Please use `scheduler.step()` to step the scheduler. During the "
    "deprecation, if epoch is different from None, the closed form is used instead of the "
    "new chainable form, where available."
)


def _format_param(name: str, optimizer: Optimizer, param) -> list:
    """One value per parameter group: a list/tuple of them, or one value for all."""
    if isinstance(param, list | tuple):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has "
                f"{len(param)} values, param_groups has {len(optimizer.param_groups)}."
            )
        return list(param)
    return [param] * len(optimizer.param_groups)


def _group_values(optimizer: Optimizer, key: str) -> list:
    return [group[key] for group in optimizer.param_groups]


def _check_optimizer(optimizer) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")


def _track_optimizer_steps(optimizer: Optimizer) -> None:
    """Wrap `optimizer.step` (once) so that it records having been called: a scheduler
    stepped before its optimizer warns, as the first learning rate would be skipped."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    step = type(optimizer).step
    # NOTE: a weak reference: the wrapper lives on the optimizer and must not keep it alive.
    optimizer_ref = weakref.ref(optimizer)

    def wrapper(*args, **kwargs):
        opt = optimizer_ref()
        opt._opt_called = True
        return step(opt, *args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


def _accepting_last_step(init):
    """`init` taking OneFlow's `last_step=` as its `last_epoch=` (OneFlow's schedulers count
    steps where PyTorch's count epochs; the value means the same)."""
    if "last_epoch" not in signature(init).parameters:
        return init

    @wraps(init)
    def wrapper(self, *args, **kwargs):
        if "last_step" in kwargs:
            if "last_epoch" in kwargs:
                raise TypeError(f"{type(self).__name__}: give last_epoch or last_step, not both")
            kwargs["last_epoch"] = kwargs.pop("last_step")
        init(self, *args, **kwargs)

    return wrapper


@contextmanager
def _flag(scheduler, name: str):
    setattr(scheduler, name, True)
    try:
        yield
    finally:
        setattr(scheduler, name, False)


class LRScheduler:
    """Base class: subclasses compute `get_lr()` from `last_epoch` and the optimizer's
    current learning rates (and may give a closed form `_get_closed_form_lr()`).

    Constructing a scheduler records each group's `initial_lr` (unless resuming with
    `last_epoch >= 0`) and takes the first step, setting the epoch-0 learning rates.

    >>> import tideflow as flow
    >>> w = flow.nn.Parameter(flow.zeros(2))
    >>> opt = flow.optim.SGD([w], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    >>> for epoch in range(4):
    ...     opt.step()
    ...     sched.step()
    >>> sched.get_last_lr()
    [0.025]
    """

    _get_lr_called_within_step = False
    _is_initial = False
    # NOTE: attributes that are not state: the optimizer (saved on its own) and the flags
    # set only while a step runs.
    _not_state = frozenset({"optimizer", "_get_lr_called_within_step", "_is_initial"})

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _accepting_last_step(cls.__init__)

    @property
    def last_step(self) -> int:
        """OneFlow's name for `last_epoch`."""
        return self.last_epoch

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when "
                        f"resuming scheduler with last_epoch={last_epoch} >= 0: load the "
                        "optimizer's state dict first, or start with last_epoch=-1"
                    )
        self.base_lrs = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _track_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        with _flag(self, "_is_initial"):
            self.step()

    def state_dict(self) -> dict:
        """Every attribute but the optimizer, as plain Python values."""
        return {k: v for k, v in self.__dict__.items() if k not in self._not_state}

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[float]:
        """The learning rates of the last step, one per parameter group."""
        return list(self._last_lr)

    def get_lr(self) -> list[float]:
        """The learning rates of the step being taken; use `get_last_lr()` to read them."""
        raise NotImplementedError

    def _warn_if_called_outside_step(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn(
                "To get the last learning rate computed by the scheduler, please use "
                "`get_last_lr()`.",
                UserWarning,
                stacklevel=3,
            )

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or, deprecated, jump to `epoch` using the closed form)."""
        if self._step_count == 1:
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate "
                    "scheduler initialization. Please, make sure to call `optimizer.step()` "
                    "before `lr_scheduler.step()`.",
                    UserWarning,
                    stacklevel=2,
                )
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. You "
                    "should call them in the opposite order: `optimizer.step()` before "
                    "`lr_scheduler.step()`. Failure to do this will result in skipping the "
                    "first value of the learning rate schedule.",
                    UserWarning,
                    stacklevel=2,
                )
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        with _flag(self, "_get_lr_called_within_step"):
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = _group_values(self.optimizer, "lr")


class _LambdaState:
    """State dicts of schedulers holding functions: a plain function is saved as None, a
    callable object as a copy of its `__dict__` (restored into the live object on load)."""

    lr_lambdas: list

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items()
                 if k not in self._not_state and k != "lr_lambdas"}  # fmt: skip
        state["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
            for fn in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "lr_lambdas"})
        for fn, saved in zip(self.lr_lambdas, state_dict["lr_lambdas"], strict=True):
            if saved is not None:
                fn.__dict__.update(saved)


def _lambdas(optimizer: Optimizer, lr_lambda) -> list:
    if not isinstance(lr_lambda, list | tuple):
        return [lr_lambda] * len(optimizer.param_groups)
    if len(lr_lambda) != len(optimizer.param_groups):
        raise ValueError(
            f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}"
        )
    return list(lr_lambda)


class LambdaLR(_LambdaState, LRScheduler):
    """lr = initial_lr * lr_lambda(epoch), with one function or one per parameter group.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.5**epoch)
    """

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        return [
            base_lr * fn(self.last_epoch)
            for fn, base_lr in zip(self.lr_lambdas, self.base_lrs, strict=True)
        ]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """lr = lr * lr_lambda(epoch) at every step after the first.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.MultiplicativeLR(opt, lambda epoch: 0.95)
    """

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1) -> None:
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [
            group["lr"] * fn(self.last_epoch)
            for fn, group in zip(self.lr_lambdas, self.optimizer.param_groups, strict=True)
        ]


class StepLR(LRScheduler):
    """Multiply the learning rate by `gamma` every `step_size` epochs.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    """

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:  # fmt: skip
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]  # fmt: skip


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by `gamma` at each milestone epoch (a milestone listed
    twice multiplies twice).

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.MultiStepLR(opt, milestones=[30, 80], gamma=0.1)
    """

    def __init__(self, optimizer: Optimizer, milestones, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:  # fmt: skip
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self.last_epoch not in self.milestones:
            return _group_values(self.optimizer, "lr")
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [group["lr"] * factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base_lr in self.base_lrs]  # fmt: skip

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["milestones"] = dict(self.milestones)  # a plain dict: savable by flow.save
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.milestones = Counter(self.milestones)


class ConstantLR(LRScheduler):
    """Multiply the learning rate by `factor` until epoch `total_iters`.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=4)
    """

    def __init__(self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5,
                 last_epoch: int = -1) -> None:  # fmt: skip
        if factor > 1.0 or factor < 0:
            raise ValueError(
                f"Constant multiplicative factor expected to be between 0 and 1, got {factor}."
            )
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [
            base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
            for base_lr in self.base_lrs
        ]


class LinearLR(LRScheduler):
    """Scale the learning rate linearly from `start_factor` to `end_factor` over
    `total_iters` epochs.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=10)
    """

    def __init__(self, optimizer: Optimizer, start_factor: float = 1.0 / 3,
                 end_factor: float = 1.0, total_iters: int = 5,
                 last_epoch: int = -1) -> None:  # fmt: skip
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                "Starting multiplicative factor expected to be greater than 0 and less or "
                f"equal to 1, got {start_factor}."
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(
                f"Ending multiplicative factor expected to be between 0 and 1, got {end_factor}."
            )
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        change = self.end_factor - self.start_factor
        factor = 1.0 + change / (
            self.total_iters * self.start_factor + (self.last_epoch - 1) * change
        )
        return [group["lr"] * factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [
            base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                       * min(self.total_iters, self.last_epoch) / self.total_iters)
            for base_lr in self.base_lrs
        ]  # fmt: skip


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by `gamma` every epoch.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9)
    """

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base_lr * self.gamma**self.last_epoch for base_lr in self.base_lrs]


def _pytorch_polynomial(optimizer, total_iters=5, power=1.0, last_epoch=-1):
    """PyTorch's PolynomialLR arguments (the rate decays to 0)."""


def _oneflow_polynomial(optimizer, steps, end_learning_rate=0.0001, power=1.0, cycle=False,
                        last_epoch=-1):  # fmt: skip
    """OneFlow's PolynomialLR arguments (to end_learning_rate; `cycle` restarts the decay
    with a period of a multiple of `steps`)."""


class PolynomialLR(LRScheduler):
    """Decay the learning rate polynomially over `total_iters` steps: `(base_lr - end) *
    (1 - step / total_iters) ** power + end`.

    The arguments are PyTorch's `(optimizer, total_iters=5, power=1.0, last_epoch=-1)` (the
    rate ends at 0) under `mock_torch`, and OneFlow's `(optimizer, steps, end_learning_rate=
    1e-4, power=1.0, cycle=False, last_step=-1)` under `import tideflow`, where `cycle`
    stretches the decay to the next multiple of `steps` instead of holding the end rate.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.PolynomialLR(opt, steps=4, end_learning_rate=0.0, power=2.0)
    """

    def __init__(self, optimizer: Optimizer, *args, **kwargs) -> None:
        form = _pytorch_polynomial if follows_pytorch() else _oneflow_polynomial
        try:
            bound = signature(form).bind(optimizer, *args, **kwargs)
        except TypeError as e:
            raise TypeError(f"PolynomialLR{signature(form)}: {e}") from None
        bound.apply_defaults()
        given = bound.arguments
        self.total_iters = given.get("total_iters", given.get("steps"))
        if not self.total_iters > 0:
            raise ValueError(f"steps must greater than zero, but got {self.total_iters}")
        self.power = given["power"]
        self.end_learning_rate = given.get("end_learning_rate", 0.0)
        self.cycle = given.get("cycle", False)
        # NOTE: PyTorch's form steps the rate from the current one (chainable); OneFlow's is
        # closed, from the initial rates
        self._chainable = form is _pytorch_polynomial
        super().__init__(optimizer, given["last_epoch"])

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        if not self._chainable:
            return self._get_closed_form_lr()
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        decay = (
            (1.0 - self.last_epoch / self.total_iters)
            / (1.0 - (self.last_epoch - 1) / self.total_iters)
        ) ** self.power
        return [group["lr"] * decay for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        period, step = self.total_iters, self.last_epoch
        if self.cycle:
            period *= math.ceil(max(step, 1) / period)
        else:
            step = min(step, period)
        decay = (1.0 - step / period) ** self.power
        end = self.end_learning_rate
        return [(base_lr - end) * decay + end for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Anneal the learning rate from `initial_lr` to `eta_min` along a half cosine over
    `T_max` epochs (and back up over the next `T_max`, as PyTorch's recursive form does).

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=1e-4)
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:  # fmt: skip
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        groups = self.optimizer.param_groups
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        if self._step_count == 1 and self.last_epoch > 0:  # resumed: closed form once
            return [
                self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(self.last_epoch * math.pi / self.T_max)) / 2
                for base_lr in self.base_lrs
            ]  # fmt: skip
        if (self.last_epoch - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [
                group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max)) / 2
                for base_lr, group in zip(self.base_lrs, groups, strict=True)
            ]
        return [
            (1 + math.cos(math.pi * self.last_epoch / self.T_max))
            / (1 + math.cos(math.pi * (self.last_epoch - 1) / self.T_max))
            * (group["lr"] - self.eta_min) + self.eta_min
            for group in groups
        ]  # fmt: skip

    def _get_closed_form_lr(self) -> list[float]:
        return [
            self.eta_min + (base_lr - self.eta_min)
            * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
            for base_lr in self.base_lrs
        ]  # fmt: skip


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every `T_i` epochs (SGDR): `T_0` for the first cycle, each
    next cycle `T_mult` times longer. `step(epoch)` accepts fractional epochs.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=10, T_mult=2)
    """

    def __init__(self, optimizer: Optimizer, T_0: int, T_mult: int = 1, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:  # fmt: skip
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, float | int):
            raise ValueError(
                f"Expected float or int eta_min, but got {eta_min} of type {type(eta_min)}"
            )
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        return [
            self.eta_min + (base_lr - self.eta_min)
            * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
            for base_lr in self.base_lrs
        ]  # fmt: skip

    def step(self, epoch=None) -> None:
        """Advance one epoch, or go to `epoch` (a float works: `epoch + i / iters`)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        with _flag(self, "_get_lr_called_within_step"):
            values = self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            group["lr"] = lr
        self._last_lr = _group_values(self.optimizer, "lr")


class CosineDecayLR(LRScheduler):
    """OneFlow's cosine decay: over `decay_steps` steps the rate falls along a half cosine
    from `initial_lr` to `alpha * initial_lr`, and stays there.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.CosineDecayLR(opt, decay_steps=4, alpha=0.1)
    >>> for _ in range(4):
    ...     opt.step()
    ...     sched.step()
    >>> round(sched.get_last_lr()[0], 6)
    0.01
    """

    def __init__(self, optimizer: Optimizer, decay_steps: int, alpha: float = 0.0,
                 last_epoch: int = -1) -> None:  # fmt: skip
        if not decay_steps > 0:
            raise ValueError(f"decay_steps must greater than zero, but got {decay_steps}")
        self.decay_steps = decay_steps
        self.alpha = alpha
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        return self._get_closed_form_lr()

    def _get_closed_form_lr(self) -> list[float]:
        done = min(self.last_epoch, self.decay_steps) / self.decay_steps
        factor = (1 - self.alpha) * 0.5 * (1 + math.cos(math.pi * done)) + self.alpha
        return [base_lr * factor for base_lr in self.base_lrs]


class _Composite:
    """State dicts of schedulers made of schedulers: each one's own state dict, nested."""

    _schedulers: list
    _not_state = LRScheduler._not_state | {"_schedulers"}

    def state_dict(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in self._not_state}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self.__dict__.update({k: v for k, v in state_dict.items() if k != "_schedulers"})
        for scheduler, saved in zip(self._schedulers, state_dict["_schedulers"], strict=True):
            scheduler.load_state_dict(saved)


def _check_members(kind: str, optimizer: Optimizer, schedulers) -> None:
    for i, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{kind} at index {i} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(
                f"{kind} does not support `ReduceLROnPlateau` scheduler as it requires "
                "additional kwargs to be specified when calling `step`, but got one at index "
                f"{i} in the given schedulers sequence."
            )
        if optimizer != scheduler.optimizer:
            raise ValueError(
                f"{kind} expects all schedulers to belong to the same optimizer, but got "
                f"scheduler {type(scheduler).__name__} at index {i} has a different optimizer."
            )


class SequentialLR(_Composite, LRScheduler):
    """Run `schedulers` one after another, switching at each of the `milestones` epochs
    (the next scheduler starts from its epoch 0).

    >>> import tideflow as flow
    >>> from tideflow.optim import lr_scheduler
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> warmup = lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
    >>> decay = lr_scheduler.ExponentialLR(opt, gamma=0.9)
    >>> sched = lr_scheduler.SequentialLR(opt, [warmup, decay], milestones=[3])
    """

    def __init__(self, optimizer: Optimizer, schedulers: list, milestones: list[int],
                 last_epoch: int = -1) -> None:  # fmt: skip
        kind = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(f"{kind} expects at least one scheduler, but got no scheduler.")
        _check_members(kind, optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more "
                f"than the number of milestone points, but got number of schedulers "
                f"{len(schedulers)} and the number of milestones to be equal to "
                f"{len(milestones)}"
            )
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # NOTE: each member already took its initial step when it was built: undo them all
        # and start over from the first scheduler's epoch 0.
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self._undo_initial_steps(self)
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def _undo_initial_steps(self, scheduler) -> None:
        if hasattr(scheduler, "_schedulers"):
            for s in scheduler._schedulers:
                self._undo_initial_steps(s)
        elif hasattr(scheduler, "last_epoch"):
            scheduler.last_epoch -= 1

    def step(self) -> None:
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ChainedScheduler(_Composite, LRScheduler):
    """Step every scheduler in `schedulers` at each step, their effects multiplying.

    >>> import tideflow as flow
    >>> from tideflow.optim import lr_scheduler
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = lr_scheduler.ChainedScheduler([
    ...     lr_scheduler.ConstantLR(opt, factor=0.1, total_iters=2),
    ...     lr_scheduler.ExponentialLR(opt, gamma=0.9),
    ... ])
    """

    def __init__(self, schedulers, optimizer: Optimizer | None = None) -> None:
        kind = type(self).__name__
        if len(schedulers) < 1:
            raise ValueError(
                f"{kind} expects at least one scheduler to be chained, but got no scheduler."
            )
        optimizer = optimizer or schedulers[0].optimizer
        _check_members(kind, optimizer, schedulers)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")

    def step(self) -> None:
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")


class ReduceLROnPlateau(LRScheduler):
    """Multiply the learning rate by `factor` when a metric stopped improving for more than
    `patience` epochs; `step(metric)` takes the metric.

    Improvement is relative (`threshold_mode="rel"`: better than best * (1 -+ threshold))
    or absolute ("abs": best -+ threshold), in `mode` "min" or "max". After a reduction,
    `cooldown` epochs pass before bad epochs count again. The learning rate never goes below
    `min_lr`, and changes smaller than `eps` are skipped.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1)
    >>> sched = flow.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=2)
    >>> for val_loss in [1.0, 0.9, 0.95, 0.93, 0.91]:
    ...     sched.step(val_loss)
    >>> sched.get_last_lr()
    [0.010000000000000002]
    """

    def __init__(self, optimizer: Optimizer, mode: str = "min", factor: float = 0.1,
                 patience: int = 10, threshold: float = 1e-4, threshold_mode: str = "rel",
                 cooldown: int = 0, min_lr=0, eps: float = 1e-8) -> None:  # fmt: skip
        if factor >= 1.0:
            raise ValueError(f"Factor should be < 1.0, got {factor}.")
        self.factor = factor
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if isinstance(min_lr, list | tuple):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(
                    f"expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}"
                )
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _group_values(self.optimizer, "lr")
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None) -> None:
        """Record one epoch's metric (a float or a one-element tensor)."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs do not count during cooldown
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _group_values(self.optimizer, "lr")

    def _reduce_lr(self) -> None:
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` "
                    f"({len(self.optimizer.param_groups)}) differs from when "
                    f"`ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due "
                    "to a new param group being added to the optimizer. Please modify the "
                    "`min_lrs` field to match the length of the `optimizer` param groups."
                )
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for i, group in enumerate(self.optimizer.param_groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in {"min", "max"}:
            raise ValueError(f"mode {mode} is unknown! Expected 'min' or 'max'")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError(f"threshold mode {threshold_mode} is unknown! Expected 'rel' or 'abs'")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


def _set_momentum(optimizer: Optimizer, use_beta1: bool, values: list[float]) -> None:
    for group, momentum in zip(optimizer.param_groups, values, strict=True):
        if use_beta1:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum


def _momentum_key(kind: str, optimizer: Optimizer) -> bool:
    """Whether momentum cycling drives `betas[0]` (Adam-like) rather than `momentum`."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError(
            f"{kind}: optimizer must support momentum or beta1 with `cycle_momentum` option "
            f"enabled; {type(optimizer).__name__} has neither"
        )
    return "betas" in optimizer.defaults


class CyclicLR(LRScheduler):
    """Cycle the learning rate between `base_lr` and `max_lr` (Smith, 2017), stepped per
    batch: "triangular", "triangular2" (amplitude halved each cycle), "exp_range"
    (scaled by gamma**iterations), or a custom `scale_fn`. With `cycle_momentum`, momentum
    (or Adam's beta1) cycles inversely between `max_momentum` and `base_momentum`.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1, momentum=0.9)
    >>> sched = flow.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4)
    """

    def __init__(self, optimizer: Optimizer, base_lr, max_lr, step_size_up: int = 2000,
                 step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn=None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum=0.8, max_momentum=0.9,
                 last_epoch: int = -1) -> None:  # fmt: skip
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups, strict=True):
                group["lr"] = lr
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"mode {mode!r} is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _momentum_key(type(self).__name__, optimizer)
            self.base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            self.max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                _set_momentum(optimizer, self.use_beta1, self.max_momentums)
                for m_max, m_base, group in zip(self.max_momentums, self.base_momentums,
                                                optimizer.param_groups, strict=True):  # fmt: skip
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = _triangular_scale
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = _triangular2_scale
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = partial(_exp_range_scale, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [
            base_lr + (max_lr - base_lr) * scale_factor * scale
            for base_lr, max_lr in zip(self.base_lrs, self.max_lrs, strict=True)
        ]
        if self.cycle_momentum:
            momentums = [
                max_m - (max_m - base_m) * scale_factor * scale
                for base_m, max_m in zip(self.base_momentums, self.max_momentums, strict=True)
            ]
            _set_momentum(self.optimizer, self.use_beta1, momentums)
        return lrs

    def state_dict(self) -> dict:
        state = {k: v for k, v in super().state_dict().items()
                 if k not in ("_scale_fn_ref", "_scale_fn_custom")}  # fmt: skip
        fn = self._scale_fn_custom
        custom = fn is not None and not isinstance(fn, types.FunctionType)
        state["_scale_fn_custom"] = fn.__dict__.copy() if custom else None
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        saved_fn = state_dict["_scale_fn_custom"]
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "_scale_fn_custom"})
        if saved_fn is not None:
            self._scale_fn_custom.__dict__.update(saved_fn)
        self._init_scale_fn()


def _triangular_scale(x: float) -> float:
    return 1.0


def _triangular2_scale(x: float) -> float:
    return 1 / (2.0 ** (x - 1))


def _exp_range_scale(gamma: float, x: float) -> float:
    return gamma**x


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin, 2017), stepped per batch for `total_steps` (or
    `epochs * steps_per_epoch`) steps: the learning rate rises from `max_lr / div_factor` to
    `max_lr` over the first `pct_start` of the steps, then anneals to
    `initial_lr / final_div_factor` ("cos" or "linear"); with `cycle_momentum`, momentum
    (or Adam's beta1) moves inversely between `max_momentum` and `base_momentum`.
    `three_phase=True` mirrors the rise before the final annealing.

    >>> import tideflow as flow
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.1, momentum=0.9)
    >>> sched = flow.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=100)
    """

    def __init__(self, optimizer: Optimizer, max_lr, total_steps: int | None = None,
                 epochs: int | None = None, steps_per_epoch: int | None = None,
                 pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = True, base_momentum=0.85, max_momentum=0.95,
                 div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False, last_epoch: int = -1) -> None:  # fmt: skip
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(
                    f"Expected positive integer steps_per_epoch, but got {steps_per_epoch}"
                )
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._schedule_phases = _one_cycle_phases(pct_start, self.total_steps, three_phase)
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for max_lr_i, group in zip(max_lrs, optimizer.param_groups, strict=True):
                group["initial_lr"] = max_lr_i / div_factor
                group["max_lr"] = max_lr_i
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _momentum_key(type(self).__name__, optimizer)
            max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                _set_momentum(optimizer, self.use_beta1, max_momentums)
                for m_max, m_base, group in zip(max_momentums, base_momentums,
                                                optimizer.param_groups, strict=True):  # fmt: skip
                    group["max_momentum"] = m_max
                    group["base_momentum"] = m_base
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        self._warn_if_called_outside_step()
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(
                f"Tried to step {step_num} times. The specified number of total steps is "
                f"{self.total_steps}"
            )
        lrs, momentums = [], []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct))
                    if self.cycle_momentum:
                        start, end = group[phase["start_momentum"]], group[phase["end_momentum"]]
                        momentums.append(self._anneal(start, end, pct))
                    break
                start_step = phase["end_step"]
        if self.cycle_momentum:
            _set_momentum(self.optimizer, self.use_beta1, momentums)
        return lrs


def _one_cycle_phases(pct_start: float, total_steps: int, three_phase: bool) -> list[dict]:
    """OneCycleLR's phases: the step each ends at and the group keys it anneals between."""
    rise = _phase(float(pct_start * total_steps) - 1, "initial_lr", "max_lr", "max_momentum",
                  "base_momentum")  # fmt: skip
    if not three_phase:
        return [rise, _phase(total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum")]
    return [
        rise,
        _phase(float(2 * pct_start * total_steps) - 2, "max_lr", "initial_lr", "base_momentum",
               "max_momentum"),
        _phase(total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
    ]  # fmt: skip


def _phase(end_step, start_lr: str, end_lr: str, start_momentum: str, end_momentum: str) -> dict:
    return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
            "start_momentum": start_momentum, "end_momentum": end_momentum}  # fmt: skip


class WarmupLR(_Composite, LRScheduler):
    """OneFlow's warmup: for the first `warmup_iters` steps the learning rate is scaled by
    `warmup_factor` ('constant') or rises linearly from `warmup_factor` times the initial rate
    to where the wrapped scheduler is at step `warmup_iters` ('linear'); then the wrapped
    scheduler's rates (or the initial ones, when an optimizer is given). With
    `warmup_prefix`, the wrapped scheduler starts after the warmup, from its own step 0, and
    the linear warmup ends at the initial rate.

    >>> import tideflow as flow
    >>> from tideflow.optim import lr_scheduler
    >>> opt = flow.optim.SGD([flow.nn.Parameter(flow.zeros(2))], lr=0.001)
    >>> sched = lr_scheduler.WarmupLR(opt, warmup_factor=0.5, warmup_iters=5)
    >>> sched.get_last_lr()
    [0.0005]
    """

    def __init__(
        self, scheduler_or_optimizer, warmup_factor: float = 1.0 / 3, warmup_iters: int = 5,
        warmup_method: str = "linear", warmup_prefix: bool = False,
    ) -> None:  # fmt: skip
        if isinstance(scheduler_or_optimizer, LRScheduler):
            inner, optimizer = scheduler_or_optimizer, scheduler_or_optimizer.optimizer
        elif isinstance(scheduler_or_optimizer, Optimizer):
            inner, optimizer = None, scheduler_or_optimizer
        else:
            raise TypeError(
                "WarmupLR: scheduler_or_optimizer must be an LRScheduler or an Optimizer, got "
                f"{type(scheduler_or_optimizer).__name__}"
            )
        if warmup_method not in ("linear", "constant"):
            raise ValueError(
                f"WarmupLR: warmup_method must be 'linear' or 'constant', got {warmup_method!r}"
            )
        if inner is None and warmup_iters <= 0:
            raise ValueError("WarmupLR: warmup_iters must be positive when warming up an optimizer")
        self._schedulers = [] if inner is None else [inner]
        self.warmup_factor = warmup_factor
        self.warmup_iters = warmup_iters
        self.warmup_method = warmup_method
        self.warmup_prefix = warmup_prefix
        # the wrapped scheduler's own rates: it computes each step from its previous one
        self._inner_lrs = _group_values(optimizer, "lr")
        self._end_factors = self._linear_end_factors(optimizer)
        super().__init__(optimizer)

    def _linear_end_factors(self, optimizer: Optimizer) -> list[float]:
        """Where a linear warmup ends, relative to each group's initial rate: 1, or the
        wrapped scheduler's rate at step `warmup_iters` (from its closed form)."""
        groups = len(optimizer.param_groups)
        if self.warmup_method != "linear" or not self._schedulers or self.warmup_prefix:
            return [1.0] * groups
        inner = self._schedulers[0]
        closed_form = getattr(inner, "_get_closed_form_lr", None)
        if closed_form is None:
            raise ValueError(
                f"WarmupLR: a linear warmup into {type(inner).__name__} ends at its rate at step "
                f"{self.warmup_iters}, which needs a closed form it does not have; use "
                "warmup_prefix=True or warmup_method='constant'"
            )
        current = inner.last_epoch
        inner.last_epoch = self.warmup_iters
        try:
            end = closed_form()
        finally:
            inner.last_epoch = current
        return [e / b for e, b in zip(end, inner.base_lrs, strict=True)]

    def step(self, epoch: int | None = None) -> None:
        if epoch is not None:
            raise ValueError("WarmupLR: step() takes no epoch")
        self._advance_inner(self.last_epoch + 1)
        super().step()

    def _advance_inner(self, step: int) -> None:
        """Step the wrapped scheduler to `step` (shifted by the warmup with a prefix) from its
        own previous rates, whatever the warmup wrote into the optimizer."""
        own_step = step - self.warmup_iters if self.warmup_prefix else step
        if not self._schedulers or own_step <= 0:
            return
        for group, lr in zip(self.optimizer.param_groups, self._inner_lrs, strict=True):
            group["lr"] = lr
        self._schedulers[0].step()
        self._inner_lrs = _group_values(self.optimizer, "lr")

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step < self.warmup_iters:
            if self.warmup_method == "constant":
                return [base * self.warmup_factor for base in self.base_lrs]
            start = self.warmup_factor
            return [
                base * (start + (end - start) * step / self.warmup_iters)
                for base, end in zip(self.base_lrs, self._end_factors, strict=True)
            ]
        return list(self._inner_lrs) if self._schedulers else list(self.base_lrs)


WarmUpLR = WarmupLR  # NOTE: OneFlow's documentation spells it both ways
