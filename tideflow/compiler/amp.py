"""Mixed precision in compiled graphs: tracing under autocast, and loss scaling.

With `config.enable_amp(True)` a graph traces build under `tideflow.amp.autocast`, so the plan
holds the casts eager autocast performs (float32 master weights, low-precision matmuls). With
a grad scaler (`Graph.set_grad_scaler`) the plan also does what eager
`scaler.scale(loss).backward(); scaler.step(opt); scaler.update()` does, although whether a
step overflows is known only when the plan runs:

- the scaler's scale and growth tracker are variables of the plan;
- each backward in build starts from the scale instead of ones (`Tracer.scale_backward_seeds`);
- after build the gradients are unscaled and checked for inf/NaN (`found_inf`) and the scale
  is updated, by the scaler's own tensor ops (`_unscale_grads_`, `_update_scale_`); with
  global parameters each rank checks its shards and an all-reduce node makes found_inf one
  answer on every rank of the graph's placements, so all of them skip a step or none does;
- every optimizer update becomes `guarded(update)`, which does nothing when `found_inf`;
- `found_inf` is also written to a variable of the plan: after a skipped step the
  optimizers' Python counters (step counts, which their step advanced when the update was
  captured) are set back, as soon as the host learns of it: when the step's outputs or the
  graph's tensors are read (`settle`), or before the next step is captured.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Callable
from numbers import Number

from ..framework.errors import TideflowError
from ..framework.registry import OpDef, kernel_for
from ..framework.sbp import B, Signature
from ..framework.tensor import Tensor
from ..ops.creation import tensor
from ..parallel.agreement import agreeing_ranks

_autocast: Callable | None = None

# scaler -> (found_inf variable, the optimizers' counters before the capture, the optimizers)
# of its latest graph call not settled yet, whichever compiled signature made it.
_LATEST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def bind_autocast(autocast: Callable) -> None:
    """Called by `tideflow.amp` when imported: it sits above the compiler, so it hands over its
    `autocast` instead of being imported (as autograd binds `Tensor.backward`)."""
    global _autocast
    _autocast = autocast


def autocast_region(config) -> contextlib.AbstractContextManager:
    """The autocast region build is traced in: `config.amp_dtype` when AMP is on, else none."""
    if not config.amp:
        return contextlib.nullcontext()
    if _autocast is None:
        raise TideflowError("nn.Graph: enable_amp(True) needs tideflow.amp (import tideflow)")
    return _autocast("cpu", dtype=config.amp_dtype)


@functools.cache
def guarded(update: OpDef) -> OpDef:
    """`update` with a boolean 0-d operand in front (found_inf): when it is true the kernel
    writes nothing. Operand positions (and `mutates`) shift by one."""
    kernel = kernel_for(update)

    def run(skip, *operands, **attrs):
        return () if skip else kernel(*operands, **attrs)

    def sbp(skip, *operands, **attrs) -> list[Signature]:
        return [Signature((B, *sig.ins), sig.outs) for sig in update.sbp(*operands, **attrs)]

    return OpDef(
        f"guarded_{update.name}",
        inputs=("skip", *update.inputs),
        meta=lambda skip, *operands, **attrs: update.meta(*operands, **attrs),
        sbp=sbp,
        kernels={"cpu": run},
        n_out=update.n_out,
        mutates=tuple(i + 1 for i in update.mutates),
    )


class LossScaling:
    """One compiled graph's loss scaling with `scaler` (a `tideflow.amp.GradScaler`); its
    tensors become variables of `tracer`, read through `holder(tensor)`."""

    def __init__(self, scaler, tracer, holder: Callable[[Tensor], object]) -> None:
        self.scaler = scaler
        self.tracer = tracer
        # NOTE: a variable the plan writes each call, so the host can read whether the step
        # was skipped (reading it waits for the run) without an extra output.
        self.found_inf = tensor(False)
        for name, t in (
            ("scale", scaler._scale),
            ("growth_tracker", scaler._growth_tracker),
            ("found_inf", self.found_inf),
        ):
            tracer.add_variable(f"_grad_scaler.{name}", t, holder(t))
        tracer.scale_backward_seeds(scaler._scale)

    def unscale_and_update(self, optimizers) -> Tensor:
        """Inside the trace, after build: unscale the optimized parameters' gradients in place
        and update the scale; the boolean 0-d `found_inf` to guard the updates with.

        With global parameters found_inf is agreed (a traced all-reduce) by the ranks of the
        graph's parameters, variables and inputs: every rank that reads the scale (a last
        stage whose backward starts from it may hold no parameters, but holds the targets)."""
        params = {
            id(p): p for opt in optimizers for group in opt.param_groups for p in group["params"]
        }
        ranks = agreeing_ranks(params.values(), self.tracer.source_ranks())
        found_inf = self.scaler._unscale_grads_(list(params.values()), ranks)
        self.scaler._update_scale_(found_inf)
        self.found_inf.copy_(found_inf)
        return found_inf

    def before_capture(self, optimizers) -> None:
        """Before the optimizers' step is captured for a call. Capturing advances their Python
        counters (step counts) whether or not the plan then skips the step; so first settle
        the previous call (waiting for it only when there are counters), then remember the
        counters as they are before this capture."""
        if any(_numbers(state) for opt in optimizers for state in opt.state.values()):
            self.settle()
        counters = {
            (id(opt), id(p)): _numbers(state)
            for opt in optimizers
            for p, state in opt.state.items()
        }
        _LATEST[self.scaler] = (self.found_inf, counters, optimizers)

    def settle(self) -> None:
        """If the scaler's latest call skipped its step (waiting for it to know), set the
        optimizers' counters back to what they were before it. Once per call. Counters the
        skipped step created restart at zero, where every optimizer starts them."""
        latest = _LATEST.pop(self.scaler, None)
        if latest is None:
            return
        found_inf, before, optimizers = latest
        if not bool(found_inf._data):
            return
        for opt in optimizers:
            for p, state in opt.state.items():
                counters = before.get((id(opt), id(p)), {})
                for key, value in _numbers(state).items():
                    state[key] = counters.get(key, type(value)())


def _numbers(state: dict) -> dict[str, Number]:
    return {
        k: v for k, v in state.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
