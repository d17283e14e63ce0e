"""The op registry: every operator is one `OpDef`, registered once, serving every mode.

An OpDef holds what the eager, lazy (graph) and global paths need to know about an op:

- `inputs`: names of the positional operands (tensors, Python scalars or None); a name
  starting with '*' takes the rest (cat, stack). Everything else is a keyword attribute.
- `optional`: the inputs that may be None (clamp's bounds). The dispatcher refuses None
  elsewhere, naming the argument, where it would otherwise compute with it (promotion) or
  fail reading it (a kernel's AttributeError or TypeError).
- `promote`: how operand dtypes combine before the kernel runs: None (as given), "common"
  (PyTorch result type) or "float" (result type, integers and bool go to the default float).
  `promote_args` limits it to some operand positions (e.g. `where` promotes x and y, not cond).
- `meta(*metas, **attrs)`: output `Meta` (shape, dtype) from input metadata alone; it also
  validates and raises the op's user-facing errors.
- `sbp(*metas, **attrs)`: the list of accepted `Signature`s.
- `kernels`: device type -> function(*arrays, **attrs) returning array(s); `kernel_for`
  picks one.
- `out_kernels`: backend -> the variant of that backend's kernel that writes its results
  into arrays it is given: `fn(*arrays, out=..., **attrs)`, `out` as NumPy's (the array of
  a single output, a tuple for several; C-contiguous, of the shapes and dtypes the kernel
  returns). It returns its results as the kernel does: `out` where it wrote them, fresh
  arrays where it could not (a result computed wider and rounded). It may be the kernel
  itself, taking `out=None`. Compiled plans give these kernels buffers they reuse step
  after step (`compiler/arena.py`); ops without one allocate their outputs. An elementwise
  op's out kernel may be given one of its operands as `out` (same shape and dtype).
- `grad(ctx, *gys)`: the backward rule in tideflow ops, returning one gradient (or None) per
  operand; `ctx.<name>` reads a saved operand/output (`saves`) or an attribute.
- `n_out`: the number of outputs; None when it depends on the attributes (split into k
  pieces): the kernel and meta then return tuples.
- `state_outputs`: positions of outputs that are state for the backward, not results (as
  PyTorch's attention kernels' logsumexp): they never require grad and receive no cotangent.
- `view`: the output aliases operand 0 (shares memory and its version counter).
- `elementwise`: the output has the broadcast shape of the tensor operands and each output
  element depends only on the operands' elements at the same (broadcast) position, so the
  op may run on matching tiles of its operands (graph fusion relies on it).
- `mutates`: operand positions the kernel writes in place (optimizer update ops, n_out=0);
  their version counters advance. Such ops are not differentiable.
- `scalar(g, *operands, **attrs)`: the scalar rule of an elementwise op, from which generated
  loops are built (`compiler/codegen.py`): the Python source of one output element given its
  operands' element expressions (names, rendered constants, or None for absent operands),
  written with the generator's helpers `g` (constants, math functions, the operands' dtypes);
  None where the rule does not cover those dtypes. An op without one is never generated: a
  group holding it runs its NumPy kernels.
- `onnx(g, *operands, **attrs)`: the op's ONNX lowering (`tideflow.onnx`, whose docstring
  describes `g`): the ONNX value name(s) of the outputs, built with `g.op(...)` from the
  operands (value names, or the node's Python scalars and None). An op without one is not
  exportable.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from ..backends import jit
from .dtype import DType
from .errors import DeviceError


class Meta(NamedTuple):
    """Metadata of one tensor: what infer rules see instead of data."""

    shape: tuple
    dtype: DType

    @property
    def ndim(self) -> int:
        return len(self.shape)


class OpDef:
    __slots__ = (
        "__weakref__",
        "chosen",
        "communicates",
        "differentiable",
        "elementwise",
        "grad",
        "inputs",
        "kernels",
        "local_attrs",
        "meta",
        "mutates",
        "n_out",
        "name",
        "onnx",
        "optional",
        "out_kernels",
        "promote",
        "promote_args",
        "save_spec",
        "saves",
        "sbp",
        "scalar",
        "state_outputs",
        "view",
    )

    def __init__(
        self,
        name: str,
        *,
        inputs: tuple[str, ...],
        optional: tuple[str, ...] = (),
        meta: Callable[..., Any],
        sbp: Callable[..., list],
        kernels: dict[str, Callable[..., Any]],
        grad: Callable[..., tuple] | None = None,
        saves: tuple[str, ...] = (),
        promote: str | None = None,
        promote_args: tuple[int, ...] | None = None,
        n_out: int | None = 1,
        state_outputs: tuple[int, ...] = (),
        view: bool = False,
        differentiable: bool | None = None,
        local_attrs: Callable[..., dict] | None = None,
        mutates: tuple[int, ...] = (),
        elementwise: bool = False,
        communicates: bool = False,
        scalar: Callable[..., str | None] | None = None,
        onnx: Callable[..., Any] | None = None,
        out_kernels: dict[str, Callable[..., Any]] | None = None,
    ) -> None:
        if promote not in (None, "common", "float"):
            raise ValueError(f"op {name}: promote must be None, 'common' or 'float'")
        self.name = name
        self.inputs = inputs
        if not set(optional) <= set(inputs):
            raise ValueError(f"op {name}: optional inputs {optional} are not among {inputs}")
        self.optional = tuple(inputs.index(n) for n in optional)
        self.meta = meta
        self.sbp = sbp
        self.kernels = kernels
        if not set(out_kernels or ()) <= set(kernels):
            raise ValueError(f"op {name}: out_kernels {sorted(out_kernels or ())} without kernels")
        self.out_kernels = dict(out_kernels or {})
        self.grad = grad
        self.saves = saves
        self.promote = promote
        self.promote_args = promote_args
        self.n_out = n_out
        self.state_outputs = state_outputs
        self.view = view
        self.elementwise = elementwise
        if scalar is not None and not elementwise:
            raise ValueError(f"op {name}: only elementwise ops have scalar rules")
        self.scalar = scalar
        self.onnx = onnx
        self.differentiable = grad is not None if differentiable is None else differentiable
        if self.differentiable and grad is None:
            raise ValueError(f"op {name}: differentiable ops need a grad rule")
        if mutates and self.differentiable:
            raise ValueError(f"op {name}: ops that write their operands cannot be differentiable")
        self.mutates = mutates
        # NOTE: an op that runs a collective must run on every rank of its group, in the same
        # order: compiler passes never fold, merge or drop it.
        self.communicates = communicates
        # NOTE: ops whose attributes name logical sizes (reshape's target shape) give
        # `local_attrs(attrs, signature, *logical_metas)`: the attributes each rank's kernel
        # runs with under that signature.
        self.local_attrs = local_attrs
        self.save_spec = tuple(_save_slot(name, inputs, s) for s in saves)
        self.chosen: dict[str, Callable[..., Any]] = {}  # device type -> `kernel_for`'s pick
        _ALL_OPS.add(self)

    def kernel(self, backend: str, out: Callable[..., Any] | None = None):
        """Decorator registering a kernel for another backend (`"cpu-jit"`: generated CPU
        loops) from that backend's module, with its `out` variant if it has one
        (`out_kernels`); `kernel_for` picks among them."""

        def register(fn):
            self.kernels[backend] = fn
            if out is None:
                self.out_kernels.pop(backend, None)
            else:
                self.out_kernels[backend] = out
            self.chosen.clear()
            return fn

        return register

    def __repr__(self) -> str:
        return f"<op {self.name}>"


def _save_slot(op: str, inputs: tuple[str, ...], name: str) -> tuple[str, str, int]:
    """'x' -> ('x', 'in', position); 'xs' for a variadic '*xs' -> ('xs', 'rest', position);
    'out' / 'out1' -> ('out', 'out', 0) / ('out1', 'out', 1)."""
    if name in inputs:
        return (name, "in", inputs.index(name))
    if "*" + name in inputs:
        return (name, "rest", inputs.index("*" + name))
    if name == "out":
        return (name, "out", 0)
    if name.startswith("out") and name[3:].isdigit():
        return (name, "out", int(name[3:]))
    raise ValueError(f"op {op}: cannot save {name!r}: not an input ({inputs}) nor an output")


_REGISTRY: dict[str, OpDef] = {}
_ALL_OPS: weakref.WeakSet[OpDef] = weakref.WeakSet()  # registered or not (boxing, fused)


def register(op: OpDef) -> OpDef:
    if op.name in _REGISTRY:
        raise ValueError(f"op {op.name!r} is registered twice")
    _REGISTRY[op.name] = op
    return op


def get_op(name: str) -> OpDef:
    return _REGISTRY[name]


def all_ops() -> dict[str, OpDef]:
    return dict(_REGISTRY)


# The backends whose kernels run on a device type, preferred first: on CPU generated loops
# (`backends/jit.py`) where numba is available, else NumPy.
_BACKENDS = {"cpu": (jit.KERNEL_KEY, "cpu") if jit.available() else ("cpu",)}


def kernel_for(op: OpDef, device_type: str = "cpu") -> Callable[..., Any]:
    """The kernel `op` runs with on `device_type`: that of the first of the device's
    backends the op has a kernel for. The one place a kernel is chosen, for eager calls and
    compiled plans alike."""
    try:
        return op.chosen[device_type]
    except KeyError:
        pass
    for backend in _BACKENDS.get(device_type, (device_type,)):
        fn = op.kernels.get(backend)
        if fn is not None:
            op.chosen[device_type] = fn
            return fn
    raise DeviceError(
        f"{op.name}: no kernel for device type {device_type!r} (it has kernels for "
        f"{sorted(op.kernels)})"
    )


def out_kernel_for(op: OpDef, device_type: str = "cpu") -> Callable[..., Any] | None:
    """The variant of `kernel_for(op, device_type)` writing into given arrays
    (`OpDef.out_kernels`), or None where that kernel has none."""
    for backend in _BACKENDS.get(device_type, (device_type,)):
        if backend in op.kernels:
            return op.out_kernels.get(backend)
    return None


def use_generated_kernels(enabled: bool) -> bool:
    """Let `kernel_for` pick generated CPU kernels (where numba is available) or not;
    returns the previous setting. Tests compare the two this way."""
    before = _BACKENDS["cpu"][0] == jit.KERNEL_KEY
    _BACKENDS["cpu"] = (jit.KERNEL_KEY, "cpu") if enabled and jit.available() else ("cpu",)
    for op in _ALL_OPS:
        op.chosen.clear()
    return before
