"""Numerical gradient checks (float64 finite differences against autograd)."""

from __future__ import annotations

import numpy as np

from ..framework.errors import AutogradError
from ..framework.grad_mode import no_grad
from ..framework.tensor import Tensor, make_tensor
from .engine import run_backward


def _as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _float_outputs(outputs) -> list[Tensor]:
    return [o for o in _as_tuple(outputs) if isinstance(o, Tensor) and o.dtype.is_floating_point]


def _numerical_jacobians(fn, inputs: tuple, eps: float) -> list[list[np.ndarray]]:
    """J[i][j]: d output j / d input i, shape (input numel, output numel)."""
    outs = _float_outputs(fn(*inputs))
    jac = []
    for x in inputs:
        if not (isinstance(x, Tensor) and x.requires_grad):
            jac.append(None)
            continue
        flat = x._data.reshape(-1)  # a view: x must be contiguous (callers pass fresh tensors)
        cols = [np.zeros((x.numel(), o.numel())) for o in outs]
        for k in range(flat.size):
            orig = flat[k]
            # NOTE: grad mode stays on: fn may differentiate itself (gradgradcheck)
            flat[k] = orig + eps
            plus = [o._data.astype(np.float64).ravel() for o in _float_outputs(fn(*inputs))]
            flat[k] = orig - eps
            minus = [o._data.astype(np.float64).ravel() for o in _float_outputs(fn(*inputs))]
            flat[k] = orig
            for c, p, m in zip(cols, plus, minus, strict=True):
                c[k] = (p - m) / (2 * eps)
        jac.append(cols)
    return jac


def _analytical_jacobians(fn, inputs: tuple, create_graph=False) -> list[list[np.ndarray]]:
    outs = _float_outputs(fn(*inputs))
    diff = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    jac = [
        [np.zeros((x.numel(), o.numel())) for o in outs]
        if isinstance(x, Tensor) and x.requires_grad
        else None
        for x in inputs
    ]
    pos = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    for j, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for k in range(o.numel()):
            seed = np.zeros(o.numel())
            seed[k] = 1.0
            grads = run_backward(
                [o],
                [make_tensor(seed.reshape(o._data.shape).astype(o._data.dtype))],
                retain_graph=True,
                create_graph=create_graph,
                inputs=diff,
                allow_unused=True,
                accumulate=False,
                what="gradcheck",
            )
            for p, g in zip(pos, grads, strict=True):
                if g is not None:
                    jac[p][j][:, k] = g._data.astype(np.float64).ravel()
    return jac


def gradcheck(
    func,
    inputs,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """Compare autograd's Jacobian of `func` at `inputs` with central differences.
    Inputs that require grad must be float64 for the check to be meaningful."""
    inputs = _as_tuple(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad and x._data.dtype != np.float64:
            raise AutogradError(f"gradcheck: input {i} is {x.dtype}; gradcheck needs float64")
    numerical = _numerical_jacobians(func, inputs, eps)
    analytical = _analytical_jacobians(func, inputs)
    for i, (num, ana) in enumerate(zip(numerical, analytical, strict=True)):
        if num is None:
            continue
        for j, (n, a) in enumerate(zip(num, ana, strict=True)):
            if not np.allclose(a, n, atol=atol, rtol=rtol, equal_nan=True):
                if not raise_exception:
                    return False
                raise AutogradError(
                    f"gradcheck: Jacobian mismatch for output {j} with respect to input {i}:\n"
                    f"numerical:\n{n}\nanalytical:\n{a}"
                )
    return True


def gradgradcheck(
    func,
    inputs,
    grad_outputs=None,
    *,
    eps=1e-6,
    atol=1e-5,
    rtol=1e-3,
    raise_exception=True,
) -> bool:
    """gradcheck of the gradient: checks second derivatives through create_graph=True."""
    inputs = _as_tuple(inputs)
    with no_grad():
        outs = _float_outputs(func(*inputs))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            make_tensor(rng.standard_normal(o._data.shape)).requires_grad_() for o in outs
        )
    grad_outputs = _as_tuple(grad_outputs)
    n = len(inputs)

    def first_grads(*args):
        xs, gos = args[:n], args[n:]
        outs = _float_outputs(func(*xs))
        d = [x for x in xs if isinstance(x, Tensor) and x.requires_grad]
        gs = run_backward(
            outs,
            list(gos),
            retain_graph=True,
            create_graph=True,
            inputs=d,
            allow_unused=True,
            accumulate=False,
            what="gradgradcheck",
        )
        return tuple(g for g in gs if g is not None)

    return gradcheck(
        first_grads,
        inputs + grad_outputs,
        eps=eps,
        atol=atol,
        rtol=rtol,
        raise_exception=raise_exception,
    )
