"""`Tensor`: an array of one backend plus its autograd identity.

This class holds data and metadata only. Methods that are ops (`x + y`, `x.sum()`, `x.view`)
are bound by `tideflow.ops` and `backward` by `tideflow.autograd`, so the layers below never
import the layers above.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import dtype as dtypes
from .conventions import follows_pytorch
from .device import CPU
from .errors import AutogradError, DTypeError, GlobalOnlyError, TideflowError
from .printing import format_tensor


class Size(tuple):
    """`torch.Size`: a tuple of ints with `numel()`."""

    __slots__ = ()

    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"tideflow.Size([{', '.join(map(str, self))}])"


_new = object.__new__


class Tensor:
    # NOTE: only the attributes every tensor sets are slots; the rest default at class level
    # and land in the instance __dict__ (created lazily by CPython) when set. Creating a
    # tensor is on the dispatch path of every op, so it assigns two attributes, not nine.
    __slots__ = ("__dict__", "__weakref__", "_data", "_version")

    requires_grad = False
    _grad = None
    grad_fn = None
    _out_nr = 0  # which output of grad_fn this tensor is
    _base = None  # the tensor this one is a view of
    _view = None  # a view op's output: (autograd base, view steps, version), framework/views.py
    _accum = None  # the AccumulateGrad node of a leaf
    _retains_grad = False

    def __init__(self, *args, dtype=None, device=None, requires_grad: bool = False) -> None:
        """`flow.Tensor(2, 3)` (uninitialized, default dtype) or `flow.Tensor(data)`."""
        dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
        if len(args) == 1 and not isinstance(args[0], int):
            src = args[0]
            if isinstance(src, Tensor):
                src = src._data
            data = np.array(src, dtype=dt.np)
        else:
            shape = args[0] if len(args) == 1 and isinstance(args[0], tuple) else args
            data = np.empty(tuple(shape), dtype=dt.np)
        _init(self, data)
        self.requires_grad = requires_grad

    # -- metadata -------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        return Size(self._data.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return Size(self._data.shape)
        return self._data.shape[_wrap_dim(dim, self._data.ndim, "size")]

    @property
    def dtype(self) -> dtypes.DType:
        return dtypes.from_numpy(self._data.dtype)

    @property
    def device(self):
        return CPU

    @property
    def ndim(self) -> int:
        return self._data.ndim

    def dim(self) -> int:
        return self._data.ndim

    def ndimension(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return self._data.size

    nelement = numel

    def element_size(self) -> int:
        return self._data.itemsize

    @property
    def itemsize(self) -> int:
        return self._data.itemsize

    @property
    def nbytes(self) -> int:
        return self._data.nbytes

    @property
    def is_leaf(self) -> bool:
        return self.grad_fn is None

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    def is_contiguous(self) -> bool:
        return self._data.flags.c_contiguous

    def stride(self, dim: int | None = None):
        item = self._data.itemsize
        strides = tuple(s // item for s in self._data.strides)
        return strides if dim is None else strides[_wrap_dim(dim, self._data.ndim, "stride")]

    def data_ptr(self) -> int:
        return self._data.__array_interface__["data"][0]

    def _is_view(self) -> bool:
        return self._base is not None

    @property
    def is_global(self) -> bool:
        return False

    @property
    def is_local(self) -> bool:
        return True

    @property
    def placement(self):
        raise GlobalOnlyError(
            "placement: only global tensors have a placement; a local tensor has a device "
            "(tensor.device), and tensor.to_global(placement, sbp) makes it global"
        )

    @property
    def sbp(self):
        raise GlobalOnlyError(
            "sbp: only global tensors have an sbp; tensor.to_global(placement, sbp) makes a "
            "local tensor global"
        )

    @property
    def is_cuda(self) -> bool:
        return False

    @property
    def _version_count(self) -> int:
        return self._version[0]

    @property
    def grad(self) -> Tensor | None:
        """The gradient accumulated by backward (leaves, and tensors that retain_grad)."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(
                    f"assigned grad expected to be a Tensor or None, got {type(value).__name__}"
                )
            if tuple(value.shape) != tuple(self.shape):
                raise TideflowError(
                    f"attempting to assign a gradient of size {list(value.shape)} to a tensor "
                    f"of size {list(self.shape)}; please ensure that the gradient and the tensor "
                    "are the same size"
                )
        self._grad = value

    # -- data access ----------------------------------------------------------------------
    @property
    def data(self) -> Tensor:
        return self.detach()

    @data.setter
    def data(self, value: Tensor) -> None:
        self._data = value._data
        self._version = value._version

    def numpy(self) -> np.ndarray:
        """The values as a NumPy array sharing the tensor's memory. OneFlow returns them
        also for a tensor that requires grad; PyTorch (under `mock_torch`) refuses it."""
        if self.requires_grad and follows_pytorch():
            raise AutogradError(
                "numpy(): can't call numpy() on a tensor that requires grad; "
                "use tensor.detach().numpy()"
            )
        return self._data

    # NOTE: NumPy defers its binary operators to an operand of higher priority: with it,
    # `np.float32(2) * t` calls `t.__rmul__` (a tensor, autograd kept) instead of turning `t`
    # into an array through `__array__`. Ufuncs (`np.exp(t)`) still convert.
    __array_priority__ = 1000

    def __array__(self, dtype=None, copy=None):
        a = self._data
        return a if dtype is None else a.astype(dtype, copy=False)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """The tensor's memory as a DLPack capsule (NumPy's export of the data), for
        `np.from_dlpack`, `torch.from_dlpack` or `flow.from_dlpack`."""
        if self.is_global:
            raise TideflowError(
                "__dlpack__: a global tensor has no single memory to share; export its shard "
                "(tensor.to_local())"
            )
        if self.requires_grad and follows_pytorch():
            raise AutogradError(
                "__dlpack__: can't export a tensor that requires grad; use tensor.detach()"
            )
        try:
            return self._data.__dlpack__(
                stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
            )
        except BufferError as e:
            raise DTypeError(f"__dlpack__: can't export a {self.dtype} tensor: {e}") from None

    def __dlpack_device__(self) -> tuple:
        return self._data.__dlpack_device__()

    def to_dlpack(self):
        """A DLPack capsule sharing the tensor's memory. It is DLPack 1.0's versioned capsule,
        which says whether the memory is writable, so importers may write to it."""
        return self.__dlpack__(max_version=(1, 0))

    def item(self):
        if self._data.size != 1:
            raise TideflowError(
                f"item(): only one element tensors can be converted to Python scalars, "
                f"got shape {tuple(self._data.shape)}"
            )
        v = self._data.reshape(()).item()
        return float(v) if self.dtype is dtypes.bfloat16 else v

    def tolist(self):
        if self.dtype is dtypes.bfloat16:
            return self._data.astype(np.float32).tolist()
        return self._data.tolist()

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise TideflowError(
                f"bool(): a tensor with {self._data.size} elements is ambiguous; "
                "use .any() or .all()"
            )
        return bool(self._data.reshape(()))

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be used as an index")
        return int(self._data.reshape(()))

    def __complex__(self) -> complex:
        return complex(self.item())

    __hash__ = object.__hash__

    def __reduce_ex__(self, protocol):
        """Pickle the values only (a view carries its own elements, not its base), as
        DataLoader workers and multiprocessing need; history cannot cross processes."""
        if self.requires_grad and self.grad_fn is not None:
            raise AutogradError(
                "cannot pickle a non-leaf tensor that requires grad (it carries autograd "
                "history); pickle tensor.detach() instead"
            )
        return (_rebuild, (type(self), np.array(self._data), self.requires_grad))

    def __repr__(self) -> str:
        return format_tensor(self._data, requires_grad=self.requires_grad, grad_fn=self.grad_fn)

    def __str__(self) -> str:
        return self.__repr__()  # subclasses (Parameter) override __repr__ only

    def __format__(self, format_spec: str) -> str:
        # As PyTorch: a 0-d tensor formats as its value ('{:.2f}'.format(loss)); others, and
        # Parameters, take object's rule (str() for '', else a TypeError). A global tensor
        # is its logical value (one class in OneFlow), so it formats like a local one.
        if self.dim() == 0 and (type(self) is Tensor or self.is_global):
            return format(self.item(), format_spec)
        return object.__format__(self, format_spec)

    # -- autograd identity ----------------------------------------------------------------
    def detach(self) -> Tensor:
        """A tensor sharing data and version counter, cut from the graph."""
        t = _new(Tensor)
        _init(t, self._data)
        t._version = self._version
        t._base = self._base if self._base is not None else self
        return t

    # -- where autograd.grad/backward start and what they return (global tensors convert) --
    def _grad_root(self, gradient) -> tuple[Tensor, object]:
        """(the tensor backward starts from, its gradient as given)."""
        return self, gradient

    def _grad_result(self, g: Tensor) -> Tensor:
        """A gradient the engine captured at this tensor, as `autograd.grad` returns it."""
        return g

    def detach_(self) -> Tensor:
        self.grad_fn = None
        self.requires_grad = False
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        if not requires_grad and self.grad_fn is not None:
            raise AutogradError(
                "requires_grad_(False): only leaf tensors can stop requiring grad; "
                "use detach() for a non-leaf"
            )
        if requires_grad and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise AutogradError(
                f"requires_grad_(): only floating point and complex tensors can require "
                f"gradients, got {self.dtype}"
            )
        self.requires_grad = requires_grad
        return self

    def retain_grad(self) -> None:
        if not self.requires_grad:
            raise AutogradError("retain_grad(): the tensor does not require grad")
        if self.grad_fn is None or self._retains_grad:
            return
        self._retains_grad = True
        ref = weakref.ref(self)

        def store(grad):
            t = ref()
            if t is not None:
                t.grad = grad.detach() if t.grad is None else t.grad + grad.detach()
            return grad

        self.grad_fn.register_prehook(self._out_nr, store, last=True)

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    def register_hook(self, hook):
        """Call `hook(grad)` when this tensor's gradient is computed; it may return a
        replacement. Returns a handle with `remove()`."""
        if not self.requires_grad:
            raise AutogradError("register_hook(): the tensor does not require grad")
        node = self.grad_fn if self.grad_fn is not None else accumulator(self)
        return node.register_prehook(self._out_nr, hook)

    def register_post_accumulate_grad_hook(self, hook):
        if self.grad_fn is not None:
            raise AutogradError("post accumulate grad hooks can only be registered on leaves")
        return accumulator(self).register_posthook(hook)


def _init(t: Tensor, data) -> None:
    t._data = data
    t._version = [0]


def _rebuild(cls, data, requires_grad: bool) -> Tensor:
    t = object.__new__(cls)
    _init(t, data)
    t.requires_grad = requires_grad
    return t


# The `_data` slot itself. Subclasses may put a property in front of it (the outputs and the
# variables of a graph's runs in flight wait for the runs); what must never wait, the runtime
# reading the variables of its own plan, reads and writes the slot.
raw_data = Tensor.__dict__["_data"].__get__
set_raw_data = Tensor.__dict__["_data"].__set__


def make_tensor(data, requires_grad: bool = False) -> Tensor:
    """Wrap a backend array without copying (the dispatcher's and creators' constructor)."""
    t = _new(Tensor)
    _init(t, data)
    t.requires_grad = requires_grad
    return t


def accumulator(leaf: Tensor):
    """The AccumulateGrad node of a leaf, created once. The tensor holds it and it holds the
    tensor weakly: no reference cycle, and no new node per op that uses the leaf."""
    node = leaf._accum
    if node is None:
        from .node import AccumulateGrad

        node = leaf._accum = AccumulateGrad(leaf)
    return node


def _wrap_dim(dim: int, ndim: int, op: str) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dimension {dim} is out of range for a {ndim}-d tensor")
    return dim % n
