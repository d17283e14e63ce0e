"""Tensor creation: from data (`tensor`, `from_numpy`) and from sizes (`zeros`, `arange`, ...).

Creators from sizes are ops with no tensor operands, so graph tracing records them like any
other op and global tensors can create their shards locally.

Given `placement=` and `sbp=`, a creator returns a global tensor (OneFlow's keywords): every
rank makes the logical tensor and keeps its shard (`tideflow.parallel.create_global`, reached
through `Tensor._create_global`: that package sits above this one). `*_like(x)` and
`x.new_*()` of a global `x` are global with `x`'s placement and sbp unless told otherwise.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable

import numpy as np

from ..framework import dtype as dtypes
from ..framework.device import check_available
from ..framework.dispatch import inplace
from ..framework.errors import TideflowError
from ..framework.sbp import Split
from ..framework.tensor import Tensor, make_tensor
from ._default_layout import DEFAULT
from ._rules import B, Meta, Signature, defop, dispatch, methods, sizes_arg

__all__ = [
    "tensor",
    "as_tensor",
    "from_numpy",
    "zeros",
    "ones",
    "empty",
    "full",
    "zeros_like",
    "ones_like",
    "empty_like",
    "full_like",
    "arange",
    "linspace",
    "eye",
]


def _check_device(device) -> None:
    if device is not None:
        check_available(device)


def global_layout(op: str, device, placement, sbp, like: Tensor | None = None, ndim=None):
    """`(placement, sbp)` of the global tensor `op` creates, or None for a local one. A global
    `like` (the input of `*_like`, the tensor of `new_*`) gives what is not given; for a
    result of `ndim` dims, its splits of dims the result lacks become broadcast. Without
    either, an enclosing `global_mode` gives the layout (and a `device=` is ignored, as in
    OneFlow)."""
    if like is not None and like.is_global:
        placement = like.placement if placement is None else placement
        if sbp is None:
            sbp = like.sbp if ndim is None else tuple(_fitted(s, ndim) for s in like.sbp)
    elif placement is None and sbp is None:
        return DEFAULT.layout
    elif device is not None:
        raise TideflowError(
            f"{op}: give device= for a local tensor or placement= and sbp= for a global one, "
            f"not both (got device={device!r}, placement={placement!r})"
        )
    if placement is None or sbp is None:
        missing = "sbp" if placement is not None else "placement"
        raise TideflowError(
            f"{op}: a global tensor needs both placement= and sbp=, but {missing}= is missing"
        )
    return placement, sbp


def on_placement_of(t: Tensor) -> dict:
    """Creator keywords for a composite's own constant (a mask, positions) used with `t`:
    broadcast on `t`'s placement if `t` is global, nothing if it is local.

    >>> mask = ones(4, 4, dtype=flow.bool, **on_placement_of(scores)).tril()
    """
    if not t.is_global:
        return {}
    return {"placement": t.placement, "sbp": (B,) * t.placement.ndim}


def _fitted(sbp, ndim: int):
    """`sbp` (a `flow.sbp`) for a tensor of `ndim` dims: a split of a dim it lacks becomes
    broadcast."""
    value = sbp.value
    return B if isinstance(value, Split) and value.axis >= ndim else value


def make(local: Callable[[], Tensor], layout, requires_grad: bool, *, synchronize: bool = False):
    """`local()` as the creator returns it: local, or global with `layout`. `synchronize`:
    broadcast axes take the first rank's values, for creators whose values may differ
    between ranks (random draws, user data)."""
    if layout is None:
        return _finish(local(), requires_grad)
    whole = local()
    placement, sbp = layout
    return Tensor._create_global(
        lambda shape: whole,
        tuple(whole.shape),
        placement,
        sbp,
        requires_grad=requires_grad,
        synchronize=synchronize,
    )


def _first_leaf(data):
    while isinstance(data, list | tuple) and data:
        data = data[0]
    return data


def _infer_dtype(data, array: np.ndarray) -> dtypes.DType:
    """PyTorch's inference: Python floats -> default dtype; NumPy arrays and scalars (also
    inside lists) keep theirs."""
    if isinstance(data, np.ndarray | np.generic) or isinstance(_first_leaf(data), np.generic):
        return dtypes.from_numpy(array.dtype)
    if array.dtype.kind == "f":
        return dtypes.get_default_dtype()
    if array.dtype.kind in "iu":
        return dtypes.int64
    if array.dtype.kind == "c":
        return dtypes.get_default_complex_dtype()
    return dtypes.from_numpy(array.dtype)


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False, placement=None,
           sbp=None) -> Tensor:  # fmt: skip
    """A new tensor holding a copy of `data` (nested lists, scalars, arrays, tensors). With
    `placement` and `sbp`, a global tensor whose logical value is `data` (every rank passes
    the same data; broadcast axes take the first rank's).

    >>> flow.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    """
    _check_device(device)
    layout = global_layout("tensor", device, placement, sbp)
    if isinstance(data, Tensor):
        data = data._data
    array = np.array(data)
    dt = _infer_dtype(data, array) if dtype is None else dtypes.to_dtype(dtype)
    if array.dtype == object:
        raise TideflowError(f"tensor(): could not infer a numeric dtype from {type(data).__name__}")

    def local() -> Tensor:
        return make_tensor(array.astype(dt.np, copy=array.dtype != dt.np or array is data))

    return make(local, layout, requires_grad, synchronize=True)


def as_tensor(data, dtype=None, device=None) -> Tensor:
    """Like `tensor`, but shares memory with a tensor or a NumPy array of the same dtype."""
    _check_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtypes.to_dtype(dtype))
    if isinstance(data, np.ndarray) and (dtype is None or dtypes.to_dtype(dtype).np == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype=dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with `array` (writes to either are seen by both)."""
    if not isinstance(array, np.ndarray):
        raise TideflowError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    dtypes.from_numpy(array.dtype)  # raises for unsupported dtypes
    return make_tensor(array)


def _creation(name: str, kernel, meta) -> object:
    return defop(
        name,
        inputs=(),
        meta=meta,
        sbp=lambda **_: [Signature((), (B,))],
        kernels={"cpu": kernel},
        # NOTE: a tensor of the attributes alone: the same constant as constant folding makes
        onnx=lambda g, **attrs: g.constant(kernel(**attrs), g.out[0].dtype),
    )


def _check_shape(op: str, shape: tuple) -> tuple:
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise TideflowError(f"{op}: negative dimension in size {list(shape)}")
    return shape


_full = _creation(
    "full",
    lambda *, shape, fill_value, dtype: np.full(shape, fill_value, dtype=dtype.np),
    lambda *, shape, fill_value, dtype: Meta(shape, dtype),
)


def _finish(t: Tensor, requires_grad: bool) -> Tensor:
    if requires_grad:
        t.requires_grad_(True)
    return t


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False, placement=None,
         sbp=None) -> Tensor:  # fmt: skip
    """A tensor of `size` filled with `fill_value` (dtype inferred from the value)."""
    _check_device(device)
    layout = global_layout("full", device, placement, sbp)
    dt = dtypes.scalar_dtype(fill_value) if dtype is None else dtypes.to_dtype(dtype)
    shape = _check_shape("full", sizes_arg((size,)))
    attrs = {"shape": shape, "fill_value": fill_value, "dtype": dt}
    return make(lambda: dispatch(_full, (), attrs), layout, requires_grad)


def _filled(name: str, value):
    def create(*size, dtype=None, device=None, requires_grad=False, placement=None, sbp=None):
        _check_device(device)
        layout = global_layout(name, device, placement, sbp)
        dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
        shape = _check_shape(name, sizes_arg(size))
        attrs = {"shape": shape, "fill_value": value, "dtype": dt}
        return make(lambda: dispatch(_full, (), attrs), layout, requires_grad)

    create.__name__ = name
    create.__doc__ = (
        f"A tensor of the given size filled with {value} (default dtype); global with "
        "`placement=` and `sbp=`."
    )
    return create


zeros = _filled("zeros", 0)
ones = _filled("ones", 1)
empty = _filled("empty", 0)  # NOTE: zero-filled: deterministic, and np.empty saves little


def _like(create):
    def like(input, *, dtype=None, device=None, requires_grad=False, placement=None, sbp=None):
        name = create.__name__ + "_like"
        layout = global_layout(name, device, placement, sbp, like=input)
        return create(
            tuple(input.shape),
            dtype=input.dtype if dtype is None else dtype,
            requires_grad=requires_grad,
            **layout_kwargs(layout),
        )

    like.__name__ = create.__name__ + "_like"
    like.__doc__ = (
        f"`{create.__name__}` of `input`'s shape and dtype; global like a global `input`."
    )
    return like


def layout_kwargs(layout) -> dict:
    """`global_layout`'s result as the keywords of a creator."""
    return {} if layout is None else {"placement": layout[0], "sbp": layout[1]}


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, placement=None,
              sbp=None) -> Tensor:  # fmt: skip
    """`full` of `input`'s shape and dtype; global like a global `input`."""
    layout = global_layout("full_like", device, placement, sbp, like=input)
    return full(
        tuple(input.shape),
        fill_value,
        dtype=input.dtype if dtype is None else dtype,
        requires_grad=requires_grad,
        **layout_kwargs(layout),
    )


def _arange_len(start, end, step) -> int:
    if step == 0:
        raise TideflowError("arange: step must be nonzero")
    n = math.ceil((end - start) / step)
    if n < 0:
        raise TideflowError(
            f"arange: upper bound and step sign are inconsistent (start={start}, end={end}, "
            f"step={step})"
        )
    return n


_arange = _creation(
    "arange",
    lambda *, start, end, step, dtype: (
        start + np.arange(_arange_len(start, end, step)) * step
    ).astype(dtype.np),
    lambda *, start, end, step, dtype: Meta((_arange_len(start, end, step),), dtype),
)


def arange(start=0, end=None, step=1, *, dtype=None, device=None, requires_grad=False,
           placement=None, sbp=None) -> Tensor:  # fmt: skip
    """`[start, start + step, ...)` up to `end`; int64 for integer arguments."""
    _check_device(device)
    layout = global_layout("arange", device, placement, sbp)
    if end is None:
        start, end = 0, start
    if dtype is None:
        is_int = builtins.all(isinstance(v, int) for v in (start, end, step))
        dt = dtypes.int64 if is_int else dtypes.get_default_dtype()
    else:
        dt = dtypes.to_dtype(dtype)
    attrs = {"start": start, "end": end, "step": step, "dtype": dt}
    return make(lambda: dispatch(_arange, (), attrs), layout, requires_grad)


_linspace = _creation(
    "linspace",
    lambda *, start, end, steps, dtype: np.linspace(start, end, steps).astype(dtype.np),
    lambda *, start, end, steps, dtype: Meta((steps,), dtype),
)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False, placement=None,
             sbp=None) -> Tensor:  # fmt: skip
    """`steps` evenly spaced values from `start` to `end` inclusive."""
    _check_device(device)
    layout = global_layout("linspace", device, placement, sbp)
    if steps < 0:
        raise TideflowError(f"linspace: number of steps must be non-negative, got {steps}")
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    attrs = {"start": start, "end": end, "steps": steps, "dtype": dt}
    return make(lambda: dispatch(_linspace, (), attrs), layout, requires_grad)


_eye = _creation(
    "eye",
    lambda *, n, m, dtype: np.eye(n, m, dtype=dtype.np),
    lambda *, n, m, dtype: Meta((n, m), dtype),
)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False, placement=None,
        sbp=None) -> Tensor:  # fmt: skip
    """The identity matrix of shape (n, m) (m defaults to n)."""
    _check_device(device)
    layout = global_layout("eye", device, placement, sbp)
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    attrs = {"n": n, "m": n if m is None else m, "dtype": dt}
    return make(lambda: dispatch(_eye, (), attrs), layout, requires_grad)


def _new_creator(create):
    def method(self, *size, dtype=None, device=None, requires_grad=False, placement=None,
               sbp=None):  # fmt: skip
        name = "new_" + create.__name__
        layout = global_layout(name, device, placement, sbp, like=self, ndim=len(sizes_arg(size)))
        return create(
            *size,
            dtype=self.dtype if dtype is None else dtype,
            requires_grad=requires_grad,
            **layout_kwargs(layout),
        )

    method.__name__ = "new_" + create.__name__
    return method


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False,
              placement=None, sbp=None):  # fmt: skip
    layout = global_layout(
        "new_full", device, placement, sbp, like=self, ndim=len(sizes_arg((size,)))
    )
    return full(
        size,
        fill_value,
        dtype=self.dtype if dtype is None else dtype,
        requires_grad=requires_grad,
        **layout_kwargs(layout),
    )


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, placement=None,
                sbp=None):  # fmt: skip
    layout = global_layout("new_tensor", device, placement, sbp, like=self, ndim=np.ndim(data))
    dtype = self.dtype if dtype is None else dtype
    return tensor(data, dtype=dtype, requires_grad=requires_grad, **layout_kwargs(layout))


def _filled_like(self, value):
    if isinstance(value, Tensor):  # a 0-d tensor value keeps its autograd history
        return value.to(self.dtype).expand(tuple(self.shape))
    return full(tuple(self.shape), value, dtype=self.dtype)


def _zeros_like_self(self):
    return full(tuple(self.shape), 0, dtype=self.dtype)


methods(
    fill_=inplace(_filled_like, "fill_"),
    zero_=inplace(_zeros_like_self, "zero_"),
    new_zeros=_new_creator(zeros),
    new_ones=_new_creator(ones),
    new_empty=_new_creator(empty),
    new_full=_new_full,
    new_tensor=_new_tensor,
)
