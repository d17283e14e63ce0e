"""`flow.autograd.functional`: derivatives of whole functions (PyTorch's API): `vjp`, `jvp`,
`jacobian`, `hessian`, `vhp`, `hvp`, all built on `autograd.grad`.

Forward-mode products (`jvp`, `hvp`) use the double backward trick: the vector-Jacobian
product is linear in its cotangent `u`, so differentiating it with respect to `u` gives the
Jacobian-vector product. Grad rules are written in tideflow ops, so every op supports it.

This layer sits below the ops: tensors are built only through `Tensor` methods.
"""

from __future__ import annotations

from collections.abc import Callable

from ..framework.errors import ArgumentError, AutogradError, ShapeError
from ..framework.grad_mode import enable_grad, is_grad_enabled, set_grad_enabled
from ..framework.tensor import Tensor
from . import grad as _grad

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(value, what: str, fn: str) -> tuple[bool, tuple]:
    """(was it a tuple, the tensors as a tuple); anything but tensors is refused."""
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, item in enumerate(items):
        if not isinstance(item, Tensor):
            where = f"the value at index {i}" if is_tuple else f"the given {what}"
            raise ArgumentError(
                f"autograd.functional.{fn}: the {what} must be a Tensor or a tuple of Tensors, "
                f"but {where} has type {type(item).__name__}"
            )
    return is_tuple, items


def _prepare(inputs: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """Inputs the function runs on: with `create_graph`, inputs that require grad stay in the
    caller's graph (as views, so their leaves are not the ones differentiated); otherwise
    detached copies of the caller's tensors that start a graph of their own."""
    return tuple(
        x.view_as(x) if create_graph and x.requires_grad else x.detach().requires_grad_(need_graph)
        for x in inputs
    )


def _finish(tensors, create_graph: bool):
    """Results leave the computation's graph unless the caller asked to keep it."""
    if isinstance(tensors, tuple):
        return tuple(_finish(t, create_graph) for t in tensors)
    return tensors if create_graph else tensors.detach()


def _unpack(result, is_tuple: bool):
    return result if is_tuple else result[0]


def _unpack2(result: tuple, outer_tuple: bool, inner_tuple: bool):
    if not inner_tuple:
        result = tuple(row[0] for row in result)
    return result if outer_tuple else result[0]


def _grads(outputs: tuple, inputs: tuple, cotangents=None, create_graph=False) -> tuple:
    """`autograd.grad` over the outputs that are in a graph (None: a derivative that is
    identically zero); None for the inputs none of them reaches."""
    cotangents = (None,) * len(outputs) if cotangents is None else cotangents
    pairs = [
        (o, c)
        for o, c in zip(outputs, cotangents, strict=True)
        if o is not None and o.requires_grad
    ]
    if not pairs:
        return (None,) * len(inputs)
    outs, cots = zip(*pairs, strict=True)
    return _grad(
        list(outs),
        list(inputs),
        list(cots),
        retain_graph=True,
        create_graph=create_graph,
        allow_unused=True,
    )


def _strict_check(tensors: tuple, fn: str, what: str, strict: bool) -> None:
    """Strict mode: every one of `tensors` (outputs or intermediate derivatives) must depend
    on the inputs."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None or not t.requires_grad:
            raise AutogradError(
                f"autograd.functional.{fn}: {what} {i} does not depend on the inputs; strict "
                "mode requires it to"
            )


def _zeros_for_missing(grads: tuple, refs: tuple, fn: str, strict: bool, create_graph: bool):
    """Missing gradients are zeros, or an error in strict mode (with `create_graph`, a
    gradient outside the graph also means the result does not depend on the inputs)."""
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs, strict=True)):
        if g is None or (strict and create_graph and not g.requires_grad):
            if strict:
                raise AutogradError(
                    f"autograd.functional.{fn}: the result is independent of input {i}; "
                    "strict mode requires every input to contribute"
                )
            g = ref.new_zeros(ref.shape)
        out.append(g)
    return tuple(out)


def _check_v(v: tuple, refs: tuple, refs_are_tuple: bool, fn: str) -> None:
    if len(v) != len(refs):
        raise ShapeError(
            f"autograd.functional.{fn}: v is a tuple of {len(v)} tensors, expected {len(refs)}"
        )
    for i, (a, ref) in enumerate(zip(v, refs, strict=True)):
        if tuple(a.shape) != tuple(ref.shape):
            entry = f"entry {i} of " if refs_are_tuple else ""
            raise ShapeError(
                f"autograd.functional.{fn}: {entry}v has shape {list(a.shape)}, expected "
                f"{list(ref.shape)}"
            )


def _v_or_single(v, refs: tuple, refs_are_tuple: bool, fn: str, of: str, create_graph: bool):
    """The vector `v` (checked against `refs`), or None where `refs` is a single element (the
    product is then the derivative itself)."""
    if v is None:
        if len(refs) != 1 or refs[0].numel() != 1:
            raise AutogradError(
                f"autograd.functional.{fn}: v can be omitted only when the {of} is a single "
                "tensor with a single element"
            )
        return None
    _, v = _as_tuple(v, "v", fn)
    v = _prepare(v, create_graph, need_graph=False)
    _check_v(v, refs, refs_are_tuple, fn)
    return v


def _single_scalar(outputs: tuple, is_tuple: bool, fn: str) -> None:
    if is_tuple or len(outputs) != 1:
        raise AutogradError(f"autograd.functional.{fn}: the function must return a single Tensor")
    if outputs[0].numel() != 1:
        raise ShapeError(
            f"autograd.functional.{fn}: the function must return a single element, got shape "
            f"{list(outputs[0].shape)}"
        )


def vjp(func: Callable, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): the vector-Jacobian product of `func` at `inputs`.
    `v` has the outputs' shapes; it may be omitted when the output is one element.
    `flow.autograd.functional.vjp(lambda x: x ** 2, flow.ones(3), flow.ones(3))[1]`"""
    with enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _prepare(inputs, create_graph, need_graph=True)
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the function", "vjp")
        _strict_check(outputs, "vjp", "output", strict)
        v = _v_or_single(v, outputs, outputs_tuple, "vjp", "output", create_graph)
    with set_grad_enabled(create_graph or is_grad_enabled()):
        grads = _grads(outputs, inputs, v, create_graph)
        result = _zeros_for_missing(grads, inputs, "vjp", strict, create_graph)
    return (
        _unpack(_finish(outputs, create_graph), outputs_tuple),
        _unpack(_finish(result, create_graph), inputs_tuple),
    )


def jvp(func: Callable, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): the Jacobian-vector product of `func` at `inputs`, by the double
    backward trick. `v` has the inputs' shapes; it may be omitted for one single-element input.
    `flow.autograd.functional.jvp(lambda x: x ** 2, flow.ones(3), flow.ones(3))[1]`"""
    with enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _prepare(inputs, create_graph, need_graph=True)
        v = _v_or_single(v, inputs, inputs_tuple, "jvp", "input", create_graph)
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the function", "jvp")
        _strict_check(outputs, "jvp", "output", strict)
        # NOTE: u^T J is linear in the cotangent u; its derivative in u along v is J v
        cotangents = tuple(o.new_zeros(o.shape).requires_grad_(True) for o in outputs)
        vjps = _grads(outputs, inputs, cotangents, create_graph=True)
        _strict_check(vjps, "jvp", "the gradient with respect to input", strict)
        grads = _grads(vjps, cotangents, v, create_graph)
        result = _zeros_for_missing(grads, outputs, "jvp", strict, create_graph)
    return (
        _unpack(_finish(outputs, create_graph), outputs_tuple),
        _unpack(_finish(result, create_graph), outputs_tuple),
    )


def _jacobian_rows(out: Tensor, inputs: tuple, create_graph: bool, strict: bool, index: int):
    """d out / d input for each input, shaped out.shape + input.shape: one `autograd.grad`
    per element of `out`, written row by row into the result."""
    flat = out.reshape(-1)
    blocks = [x.new_zeros((flat.shape[0], *x.shape)) for x in inputs]
    for row in range(flat.shape[0]):
        grads = _grads((flat[row],), inputs, create_graph=create_graph)
        for k, g in enumerate(grads):
            if g is None or (strict and create_graph and not g.requires_grad):
                if strict:
                    raise AutogradError(
                        f"autograd.functional.jacobian: output {index} is independent of "
                        f"input {k}; strict mode requires every input to contribute"
                    )
                continue  # the block's zeros stand
            blocks[k][row] = g
    return tuple(b.reshape(*out.shape, *x.shape) for b, x in zip(blocks, inputs, strict=True))


_STRATEGIES = ("reverse-mode", "forward-mode")


def jacobian(
    func: Callable,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    strategy="reverse-mode",
):
    """The Jacobian of `func` at `inputs`: for output i and input j a tensor of shape
    out_i.shape + in_j.shape (tuples of tuples when `func` returns / takes tuples).
    `vectorize` and `strategy` choose how PyTorch computes the same values; tideflow
    computes them row by row in reverse mode either way.
    `flow.autograd.functional.jacobian(lambda x: x ** 2, flow.ones(3))`"""
    if strategy not in _STRATEGIES:
        raise ValueError(
            f"autograd.functional.jacobian: strategy must be one of {list(_STRATEGIES)}, got "
            f"{strategy!r}"
        )
    with enable_grad():
        inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _prepare(inputs, create_graph, need_graph=True)
        outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the function", "jacobian")
        _strict_check(outputs, "jacobian", "output", strict)
        result = tuple(
            _jacobian_rows(out, inputs, create_graph, strict, i) for i, out in enumerate(outputs)
        )
    return _unpack2(_finish(result, create_graph), outputs_tuple, inputs_tuple)


def hessian(
    func: Callable,
    inputs,
    create_graph=False,
    strict=False,
    vectorize=False,
    outer_jacobian_strategy="reverse-mode",
):
    """The Hessian of the scalar function `func` at `inputs`: for inputs i and j a tensor of
    shape in_i.shape + in_j.shape (a tuple of tuples when `func` takes a tuple); the Jacobian
    of its gradient.
    `flow.autograd.functional.hessian(lambda x: (x ** 3).sum(), flow.ones(2))`"""
    inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")

    def scalar(*xs):
        outputs_tuple, outputs = _as_tuple(func(*xs), "outputs of the function", "hessian")
        _strict_check(outputs, "hessian", "output", strict)
        _single_scalar(outputs, outputs_tuple, "hessian")
        return outputs[0].reshape(())

    def gradient(*xs):
        jac = jacobian(scalar, xs, create_graph=True)
        _strict_check(jac, "hessian", "the gradient with respect to input", strict)
        return jac

    result = jacobian(
        gradient,
        inputs,
        create_graph=create_graph,
        strict=strict,
        vectorize=vectorize,
        strategy=outer_jacobian_strategy,
    )
    return _unpack2(result, inputs_tuple, inputs_tuple)


def _scalar_and_gradient(func: Callable, inputs, v, create_graph: bool, strict: bool, fn: str):
    """The prepared inputs, v, the single-element output and its gradient (in the graph)."""
    inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn)
    inputs = _prepare(inputs, create_graph, need_graph=True)
    v = _v_or_single(v, inputs, inputs_tuple, fn, "input", create_graph)
    outputs_tuple, outputs = _as_tuple(func(*inputs), "outputs of the function", fn)
    _strict_check(outputs, fn, "output", strict)
    _single_scalar(outputs, outputs_tuple, fn)
    gradient = _grads(outputs, inputs, create_graph=True)
    _strict_check(gradient, fn, "the gradient with respect to input", strict)
    return inputs_tuple, inputs, v, outputs[0], gradient


def vhp(func: Callable, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the vector-Hessian product of the scalar function `func` at
    `inputs`; `v` has the inputs' shapes.
    `flow.autograd.functional.vhp(lambda x: (x ** 3).sum(), flow.ones(2), flow.ones(2))[1]`"""
    with enable_grad():
        inputs_tuple, inputs, v, out, gradient = _scalar_and_gradient(
            func, inputs, v, create_graph, strict, "vhp"
        )
        grads = _grads(gradient, inputs, v, create_graph)
        result = _zeros_for_missing(grads, inputs, "vhp", strict, create_graph)
    return _finish(out, create_graph), _unpack(_finish(result, create_graph), inputs_tuple)


def hvp(func: Callable, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the Hessian-vector product of the scalar function `func` at
    `inputs`, by the double backward trick (equal to `vhp` for functions whose Hessian is
    symmetric, i.e. twice continuously differentiable ones).
    `flow.autograd.functional.hvp(lambda x: (x ** 3).sum(), flow.ones(2), flow.ones(2))[1]`"""
    with enable_grad():
        inputs_tuple, inputs, v, out, gradient = _scalar_and_gradient(
            func, inputs, v, create_graph, strict, "hvp"
        )
        # NOTE: u^T H is linear in u; its derivative in u along v is H v
        cotangents = tuple(x.new_zeros(x.shape).requires_grad_(True) for x in inputs)
        double = _grads(gradient, inputs, cotangents, create_graph=True)
        grads = _grads(double, cotangents, v, create_graph)
        result = _zeros_for_missing(grads, inputs, "hvp", strict, create_graph)
    return _finish(out, create_graph), _unpack(_finish(result, create_graph), inputs_tuple)
