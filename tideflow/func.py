"""`flow.func`: PyTorch's composable function transforms (`torch.func`, functorch's API):
`vmap`, `grad`, `grad_and_value`, `vjp`, `jvp`, `jacrev`, `jacfwd`, `hessian`,
`functional_call`.

The derivatives are built on `autograd.grad`, keeping their own graph when an input requires
grad (an enclosing transform's), so transforms nest (`vmap(grad(f))` gives per-sample
gradients, `jacfwd(jacrev(f))` a Hessian). `vmap` runs the
function once per index of the mapped dims and stacks the results: the same values and
gradients as a batched rule, at the cost of a Python call per slice.
"""

from __future__ import annotations

from collections.abc import Callable

from .autograd import functional as autograd_functional
from .autograd import grad as autograd_grad
from .framework.errors import ArgumentError, ShapeError, TideflowError
from .framework.grad_mode import enable_grad
from .framework.random import get_rng_state, set_rng_state
from .framework.tensor import Tensor
from .nn.utils.stateless import functional_call
from .ops.creation import zeros_like
from .ops.shape import stack

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp",
           "vjp", "vmap"]  # fmt: skip


# -- trees of arguments and results -----------------------------------------------------------
def _leaves_with(tree, spec, fn):
    """`tree` with each tensor leaf replaced by `fn(leaf, its spec)`; `spec` is one value for
    the whole (sub)tree or a structure mirroring it."""
    if isinstance(tree, tuple | list):
        specs = spec if isinstance(spec, tuple | list) else [spec] * len(tree)
        if len(specs) != len(tree):
            raise ShapeError(
                f"vmap: in_dims {spec!r} does not match the structure of an input of "
                f"{len(tree)} items"
            )
        return type(tree)(_leaves_with(t, s, fn) for t, s in zip(tree, specs, strict=True))
    if isinstance(tree, dict):
        specs = spec if isinstance(spec, dict) else dict.fromkeys(tree, spec)
        return {k: _leaves_with(v, specs[k], fn) for k, v in tree.items()}
    return fn(tree, spec) if isinstance(tree, Tensor) else tree


def _batch_size(args, in_dims) -> int:
    sizes: list[int] = []

    def note(t, dim):
        if dim is not None:
            if not -t.ndim <= dim < t.ndim:
                raise ShapeError(
                    f"vmap: in_dim {dim} is out of range for an input of shape {list(t.shape)}"
                )
            sizes.append(t.shape[dim])
        return t

    _leaves_with(args, in_dims, note)
    if not sizes:
        raise TideflowError("vmap: at least one input must be mapped over (got in_dims=None)")
    if len(set(sizes)) > 1:
        raise ShapeError(
            "vmap: Expected all tensors to have the same size in the mapped dimension, got "
            f"sizes {sizes} for the mapped dimension"
        )
    return sizes[0]


def _stacked(results: list, out_dims):
    first = results[0]
    if isinstance(first, tuple | list):
        dims = out_dims if isinstance(out_dims, tuple | list) else [out_dims] * len(first)
        return type(first)(_stacked([r[i] for r in results], d) for i, d in enumerate(dims))
    if isinstance(first, dict):
        dims = out_dims if isinstance(out_dims, dict) else dict.fromkeys(first, out_dims)
        return {k: _stacked([r[k] for r in results], dims[k]) for k in first}
    if not isinstance(first, Tensor):
        raise TideflowError(
            f"vmap: the function must return tensors (or tuples, lists, dicts of them), got "
            f"{type(first).__name__}"
        )
    return stack(results, dim=out_dims)


def vmap(func: Callable, in_dims=0, out_dims=0, randomness: str = "error", *,
         chunk_size=None) -> Callable:  # fmt: skip
    """`func` mapped over dim `in_dims` of its inputs (an int for every tensor, None for an
    unmapped input, or a structure mirroring the arguments), results stacked along
    `out_dims`. `randomness`: 'error' refuses random ops inside `func`, 'different' draws
    anew for each slice, 'same' draws the same values for every slice.

    >>> x = flow.arange(6.0).reshape(2, 3)
    >>> flow.func.vmap(lambda row: row.sum())(x)
    tensor([ 3., 12.])
    """
    if randomness not in ("error", "different", "same"):
        raise ArgumentError(
            f"vmap: randomness must be 'error', 'different' or 'same', got {randomness!r}"
        )

    def mapped(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ShapeError(
                f"vmap: in_dims has {len(dims)} entries but the function was called with "
                f"{len(args)} positional arguments"
            )
        size = _batch_size(args, dims)
        state = get_rng_state()
        results = []
        for i in range(size):
            if randomness == "same":
                set_rng_state(state)
            sliced = _leaves_with(args, dims, lambda t, d, i=i: t if d is None else t.select(d, i))
            results.append(func(*sliced, **kwargs))
            if randomness == "error" and not bool((get_rng_state() == state).all()):
                raise TideflowError(
                    "vmap: called random operation while in randomness error mode. Please "
                    "either use the 'same' or 'different' randomness flags on vmap or perform "
                    "the randomness operation out of vmap"
                )
        return _stacked(results, out_dims)

    return mapped


# -- derivatives ----------------------------------------------------------------------------------
def _nested(*values) -> bool:
    """Whether a tensor among `values` (nested in tuples) requires grad: an enclosing
    transform differentiates this one, which must then record its own graph."""
    return any(
        _nested(*v) if isinstance(v, tuple | list) else isinstance(v, Tensor) and v.requires_grad
        for v in values
    )


def _selected(args: tuple, argnums) -> tuple[tuple, tuple]:
    """(args with the differentiated ones replaced by fresh leaves, those leaves)."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    args = list(args)
    leaves = []
    for n in nums:
        if not isinstance(args[n], Tensor):
            raise ArgumentError(
                f"grad: argument {n} must be a tensor to differentiate it, got "
                f"{type(args[n]).__name__}"
            )
        args[n] = args[n].detach().requires_grad_(True) if not args[n].requires_grad else args[n]
        leaves.append(args[n])
    return tuple(args), tuple(leaves)


def grad_and_value(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """`func` returning (its gradient with respect to argument `argnums`, its value); `func`
    returns a one-element tensor, or with `has_aux` a pair (value, aux), and then the
    transform returns (gradient, (value, aux)).

    >>> g, value = flow.func.grad_and_value(lambda x: (x * x).sum())(flow.tensor([1.0, 2.0]))
    >>> g
    tensor([2., 4.])
    """

    def transformed(*args, **kwargs):
        keep = _nested(*args)
        with enable_grad():
            args, leaves = _selected(args, argnums)
            out = func(*args, **kwargs)
            value, aux = out if has_aux else (out, None)
            if not isinstance(value, Tensor) or value.numel() != 1:
                shape = list(value.shape) if isinstance(value, Tensor) else type(value).__name__
                raise ShapeError(
                    f"grad: expected the function to return a one-element tensor, got {shape}"
                )
            grads = autograd_grad(value, leaves, create_graph=keep, allow_unused=True)
        grads = tuple(zeros_like(x) if g is None else g for g, x in zip(grads, leaves, strict=True))
        result = grads[0] if isinstance(argnums, int) else grads
        if not keep:
            value = value.detach()
        return (result, (value, aux)) if has_aux else (result, value)

    return transformed


def grad(func: Callable, argnums=0, has_aux: bool = False) -> Callable:
    """`func` returning its gradient with respect to argument `argnums` (an int, or a tuple of
    them for a tuple of gradients); `func` returns a one-element tensor (with `has_aux`, a
    pair (value, aux), and the transform returns (gradient, aux)).

    >>> flow.func.grad(lambda x: (x ** 3).sum())(flow.tensor([1.0, 2.0]))
    tensor([ 3., 12.])
    """
    both = grad_and_value(func, argnums, has_aux)

    def transformed(*args, **kwargs):
        gradient, value = both(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return transformed


def vjp(func: Callable, *primals, has_aux: bool = False):
    """(func(*primals), vjp_fn): `vjp_fn(cotangents)` gives the tuple of the gradients of
    `<cotangents, func(*primals)>` with respect to each primal.

    >>> out, vjp_fn = flow.func.vjp(lambda x: x * 2, flow.ones(2))
    >>> vjp_fn(flow.tensor([1.0, 3.0]))
    (tensor([2., 6.]),)
    """
    keep = _nested(*primals)
    with enable_grad():
        leaves = tuple(p if p.requires_grad else p.detach().requires_grad_(True) for p in primals)
        out = func(*leaves)
    recorded, aux = out if has_aux else (out, None)
    outs = recorded if isinstance(recorded, tuple | list) else (recorded,)

    def vjp_fn(cotangents):
        cts = cotangents if isinstance(cotangents, tuple | list) else (cotangents,)
        with enable_grad():
            grads = autograd_grad(
                outs, leaves, cts, retain_graph=True, create_graph=keep or _nested(*cts),
                allow_unused=True,
            )  # fmt: skip
        return tuple(zeros_like(x) if g is None else g for g, x in zip(grads, leaves, strict=True))

    output = recorded
    if not keep:
        output = (
            recorded.detach()
            if isinstance(recorded, Tensor)
            else type(recorded)(o.detach() for o in recorded)
        )
    return (output, vjp_fn, aux) if has_aux else (output, vjp_fn)


def jvp(func: Callable, primals: tuple, tangents: tuple, *, has_aux: bool = False):
    """(func(*primals), J tangents): the Jacobian-vector product (by the double backward
    trick, `autograd.functional.jvp`).

    >>> flow.func.jvp(lambda x: x ** 2, (flow.tensor([3.0]),), (flow.tensor([1.0]),))[1]
    tensor([6.])
    """
    if has_aux:
        raise TideflowError("jvp: has_aux is not supported; return the auxiliary value apart")
    output, product = autograd_functional.jvp(
        lambda *xs: func(*xs), tuple(primals), tuple(tangents),
        create_graph=_nested(primals, tangents),
    )  # fmt: skip
    return output, product


def _jacobian_transform(name: str, func: Callable, argnums) -> Callable:
    def transformed(*args):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

        def of_selected(*chosen):
            full = list(args)
            for n, value in zip(nums, chosen, strict=True):
                full[n] = value
            return func(*full)

        jac = autograd_functional.jacobian(
            of_selected, tuple(args[n] for n in nums), create_graph=_nested(*args)
        )
        return jac[0] if isinstance(argnums, int) else jac

    transformed.__name__ = name
    return transformed


def jacrev(func: Callable, argnums=0) -> Callable:
    """`func` returning its Jacobian with respect to argument `argnums` (output dims first,
    then the argument's).

    >>> flow.func.jacrev(lambda x: x ** 2)(flow.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    return _jacobian_transform("jacrev", func, argnums)


def jacfwd(func: Callable, argnums=0) -> Callable:
    """The Jacobian as `jacrev` gives it (PyTorch computes it column by column in forward
    mode; tideflow's reverse mode gives the same values)."""
    return _jacobian_transform("jacfwd", func, argnums)


def hessian(func: Callable, argnums=0) -> Callable:
    """`func` returning its Hessian with respect to argument `argnums`.

    >>> flow.func.hessian(lambda x: (x ** 3).sum())(flow.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)
