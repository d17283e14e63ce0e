"""Autograd through in-place writes to views (PyTorch's view rebasing, its CopySlices).

The outputs of a view op (`view=True`) remember how they were made, in `Tensor._view`:
(base, steps, version). The base is the tensor the chain of view ops started from (never
itself such a view), the steps are the chain's calls, so the view can be made again from
the base, and the version is the shared counter's value when the view's history was last
derived. An in-place op on a view that takes part in autograd (`framework/dispatch.py:
write_back`) computes its result R out of place, writes R into the shared memory, and then
- gives the base the history of "the base with the view's region replaced by R":
  `base + f^T(R - f(base))`, f the view chain and f^T its transpose (the chain's own grad
  rules), whose gradient is gy outside the region, zero inside it, and f(gy) for R;
- gives the view the history of f(new base).
Other views of that base pick the new history up when they are next used: a view whose
counter moved past its recorded version derives its history again (`refresh_view`).

Only the history of `base + f^T(R - f(base))` is used, never its values: the memory holds
the exact values. (Where the gradient reaching the base is inf or nan inside the region,
gy - f^T(f(gy)) is nan instead of PyTorch's zero.)
"""

from __future__ import annotations

from . import dtype as dtypes
from .errors import AutogradError
from .grad_mode import STATE
from .modes import STACK
from .registry import OpDef
from .tensor import Tensor, make_tensor


def mark_views(op: OpDef, args: tuple, attrs: dict, outs: tuple) -> None:
    """`outs` are views of `args[0]`: they share its memory and version counter, and
    remember the chain of view ops from their base."""
    base = args[0]
    root = base if base._base is None else base._base
    made_from = base._view
    origin, steps = (base, ()) if made_from is None else (made_from[0], made_from[1])
    version = base._version[0]
    rest = args[1:]
    for i, o in enumerate(outs):
        o._version = base._version
        o._base = root
        o._view = (origin, (*steps, (op, rest, attrs, i)), version)


def is_stale(t: Tensor) -> bool:
    """`t` is a view whose base (or another view of it) was written in place since `t`'s
    history was derived."""
    view = t._view
    return view is not None and view[2] != t._version[0]


def refresh_view(view: Tensor) -> None:
    """Derive `view`'s history again from its base's current history. Without grad mode
    nothing is recorded, so the view stays stale until it is used with grad mode on."""
    base, steps, _ = view._view
    if base.requires_grad:
        if not STATE.enabled:
            return
        multi_output_view_error(
            view,
            "output {i} of {op} is a view and its base or another view of its base "
            "has been modified in place",
        )
        made = _replay(base, steps)
        view.requires_grad = made.requires_grad
        view.grad_fn = made.grad_fn
        view._out_nr = made._out_nr
    view._view = (base, steps, view._version[0])


def multi_output_view_error(view: Tensor, what: str) -> None:
    """PyTorch's refusal to rebase a view made by an op that returns several views (split,
    unbind, chunk): their common history node cannot be rewritten for one of them. `what`
    names the output with `{i}` and `{op}`."""
    for op, _, _, i in view._view[1]:
        if op.n_out != 1:
            raise AutogradError(
                what.format(i=i, op=op.name)
                + "; functions that return several views do not allow their outputs to be "
                "modified in place: replace the in-place op by its out-of-place form"
            )


def rebased_history(base: Tensor, steps: tuple, value: Tensor) -> Tensor:
    """A tensor of `base`'s shape whose history is the base's with the region that the view
    chain `steps` reads replaced by `value` (a tensor of that region's shape)."""
    region = _replay(base, steps)
    if value.dtype is not region.dtype:
        value = value.to(region.dtype)
    return base + _transpose(base, steps, value - region)


def _replay(t: Tensor, steps: tuple) -> Tensor:
    """The view chain `steps` applied to `t` (recorded like any op call)."""
    for op, rest, attrs, i in steps:
        out = STACK.top(op, (t, *rest), attrs)
        t = out if op.n_out == 1 else out[i]
    return t


def _transpose(base: Tensor, steps: tuple, z: Tensor) -> Tensor:
    """f^T(z) for the view chain f of `base`: z where the view reads the base, zeros
    elsewhere. It runs the chain's grad rules, recorded on a stand-in for the base, from
    the last step to the first, so it is differentiable in z."""
    node = _replay(make_tensor(base._data, requires_grad=True), steps).grad_fn
    for _ in steps:  # single-output views only (`multi_output_view_error`)
        z = node.apply([z])[0]
        np_dtype = node.in_meta[0][1]
        if z._data.dtype != np_dtype:  # a real view (real, imag) of a complex tensor
            z = z.to(dtypes.from_numpy(np_dtype))
        node = node.edges[0][0]
    return z
