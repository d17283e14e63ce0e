"""Numerical gradient checks (float64 finite differences against autograd).

Complex numbers are checked as PyTorch checks them: a complex input is two real inputs (its
real and imaginary parts), a complex output two real outputs, and autograd's gradient of a
real function L at z is dL/dx + i dL/dy (so the seed of an imaginary part is 1j).
"""

from __future__ import annotations

import numpy as np

from ..framework.errors import AutogradError
from ..framework.grad_mode import no_grad
from ..framework.tensor import Tensor, make_tensor
from .engine import run_backward

_DOUBLES = (np.dtype(np.float64), np.dtype(np.complex128))


def _as_tuple(x) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def _float_outputs(outputs) -> list[Tensor]:
    """The outputs that carry gradients: floating and complex."""
    return [
        o
        for o in _as_tuple(outputs)
        if isinstance(o, Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex)
    ]


def _real_values(a: np.ndarray) -> np.ndarray:
    """The array as real numbers, flat: a complex one gives its real then imaginary parts."""
    if a.dtype.kind == "c":
        return np.concatenate([a.real.ravel(), a.imag.ravel()])
    return a.astype(np.float64).ravel()


def _real_size(t: Tensor) -> int:
    return t.numel() * (2 if t.dtype.is_complex else 1)


def _numerical_jacobians(fn, inputs: tuple, eps: float) -> list[list[np.ndarray]]:
    """J[i][j]: d output j / d input i, shape (input numel, output numel)."""
    outs = _float_outputs(fn(*inputs))
    jac = []
    for x in inputs:
        if not (isinstance(x, Tensor) and x.requires_grad):
            jac.append(None)
            continue
        flat = x._data.reshape(-1)  # a view: x must be contiguous (callers pass fresh tensors)
        cols = [np.zeros((_real_size(x), _real_size(o))) for o in outs]
        steps = (eps, 1j * eps) if x.dtype.is_complex else (eps,)
        for part, step in enumerate(steps):  # the real, then the imaginary parts
            for k in range(flat.size):
                orig = flat[k]
                # NOTE: grad mode stays on: fn may differentiate itself (gradgradcheck)
                flat[k] = orig + step
                plus = [_real_values(o._data) for o in _float_outputs(fn(*inputs))]
                flat[k] = orig - step
                minus = [_real_values(o._data) for o in _float_outputs(fn(*inputs))]
                flat[k] = orig
                for c, p, m in zip(cols, plus, minus, strict=True):
                    c[part * flat.size + k] = (p - m) / (2 * eps)
        jac.append(cols)
    return jac


def _analytical_jacobians(fn, inputs: tuple, create_graph=False) -> list[list[np.ndarray]]:
    outs = _float_outputs(fn(*inputs))
    diff = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    jac = [
        [np.zeros((_real_size(x), _real_size(o))) for o in outs]
        if isinstance(x, Tensor) and x.requires_grad
        else None
        for x in inputs
    ]
    pos = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    for j, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for k in range(_real_size(o)):
            seed = np.zeros(o.numel(), o._data.dtype)
            seed[k % o.numel()] = 1.0 if k < o.numel() else 1j  # an imaginary part: 1j
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
                    jac[p][j][:, k] = _real_values(g._data)
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
    Inputs that require grad must be float64 or complex128 for the check to be meaningful."""
    inputs = _as_tuple(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad and x._data.dtype not in _DOUBLES:
            raise AutogradError(
                f"gradcheck: input {i} is {x.dtype}; gradcheck needs float64 or complex128"
            )
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


def _draw(rng: np.random.Generator, like: np.ndarray) -> np.ndarray:
    """Standard normal values shaped like `like`, complex (both parts drawn) if it is."""
    values = rng.standard_normal(like.shape)
    if like.dtype.kind == "c":
        values = values + 1j * rng.standard_normal(like.shape)
    return np.asarray(values)


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
        grad_outputs = tuple(make_tensor(_draw(rng, o._data)).requires_grad_() for o in outs)
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
