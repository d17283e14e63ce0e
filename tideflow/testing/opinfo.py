"""Op database records (like PyTorch's OpInfo / JAX's OpRecord) and sample builders.

A record names a public tideflow callable, how to build sample calls, and an oracle: the same
call on PyTorch tensors (`torch`) or a NumPy reference (`ref`). The tests under `tests/ops/`
are generated from `tideflow.testing.op_db.OP_DB`: forward and backward against the oracle,
float64 gradcheck, non-contiguous inputs, meta == kernel, and every SBP signature of every op
the samples reach (traced through the dispatcher).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

FLOATS = ("float32", "float64")
ALL_FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int32", "int64")
COMPLEX = ("complex64", "complex128")

# NOTE: PyTorch's default tolerances for assert_close, per dtype.
TOLERANCES = {
    "float16": (1e-3, 1e-5),  # halves: tideflow vs tideflow, and dtype-dependent records
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}


@dataclass
class Sample:
    """One call: `args` (NumPy arrays become tensors; anything else is passed as is) and
    `kwargs`. `grad=False` marks a sample whose outputs are not differentiable (e.g. ties)."""

    args: tuple
    kwargs: dict = field(default_factory=dict)
    grad: bool = True
    name: str = ""

    def __repr__(self) -> str:
        parts = [
            f"array{list(a.shape)}:{a.dtype}" if isinstance(a, np.ndarray) else repr(a)
            for a in self.args
        ]
        parts += [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.name or 'sample'}({', '.join(parts)})"


@dataclass
class OpInfo:
    """`name` is the public path under `tideflow` and, unless `torch` says otherwise, under
    `torch` ("add", "nn.functional.gelu", "linalg.inv"); `variant` tells records of one op
    apart. `torch` may be a dotted path or `f(torch_module, *args, **kwargs)`; `ref` is a NumPy
    reference for ops PyTorch lacks."""

    name: str
    samples: Callable[[np.random.Generator, str], list[Sample]]
    op: Callable | None = None  # default: tideflow.<name>
    torch: str | Callable | None = None  # default: torch.<name> (unless `ref` is given)
    ref: Callable | None = None
    variant: str = ""
    dtypes: tuple[str, ...] = FLOATS
    grad: bool = True  # differentiable with respect to its float tensor arguments
    gradcheck: bool = True
    # float32/float64 tolerances against the oracle; half-precision outputs are held to the
    # error bound of `accuracy.half_error_bound` against the float64 value instead
    rtol: float | None = None
    atol: float | None = None
    random: bool = False  # outputs depend on the RNG: values are not compared
    # values depend on the dtype beyond rounding (nan_to_num's default replacements are the
    # dtype's extremes): half outputs are compared with the oracle in the same dtype
    dtype_dependent: bool = False
    skips: dict[str, str] = field(default_factory=dict)  # test kind -> reason

    @property
    def id(self) -> str:
        return f"{self.name}.{self.variant}" if self.variant else self.name

    def tolerance(self, dtype: str) -> tuple[float, float]:
        rtol, atol = TOLERANCES.get(dtype, (0.0, 0.0))
        return (self.rtol if self.rtol is not None else rtol), (
            self.atol if self.atol is not None else atol
        )


# -- sample builders ------------------------------------------------------------------------
SHAPES = ((), (0,), (5,), (3, 4), (2, 3, 4))
BROADCAST_PAIRS = (
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((3, 1), (1, 4)),
    ((2, 1, 4), (3, 1)),
    ((), (3,)),
    ((2, 3), ()),
    ((0, 3), (3,)),
)


def make_array(rng: np.random.Generator, shape, dtype: str, low=-3.0, high=3.0) -> np.ndarray:
    """Random values in [low, high) of a NumPy-representable dtype (bfloat16 via ml_dtypes)."""
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)  # asarray: a 0-d draw is a NumPy scalar
    if dtype.startswith(("int", "uint")):
        lo = max(int(np.floor(low)), 0 if dtype.startswith("uint") else -(2**31))
        return rng.integers(lo, max(int(np.ceil(high)), lo + 1), size=shape).astype(dtype)
    values = rng.uniform(low, high, size=shape)
    if dtype.startswith("complex"):  # real and imaginary parts both in [low, high)
        return (values + 1j * rng.uniform(low, high, size=shape)).astype(dtype)
    if dtype == "bfloat16":
        import ml_dtypes

        return values.astype(ml_dtypes.bfloat16)
    return values.astype(dtype)


def unary_samples(low=-3.0, high=3.0, shapes=SHAPES, **kwargs):
    """Samples for f(x, **kwargs) over the standard shapes, values in [low, high)."""

    def build(rng, dtype):
        return [Sample((make_array(rng, s, dtype, low, high),), dict(kwargs)) for s in shapes]

    return build


def binary_samples(low=-3.0, high=3.0, scalars=(2.5,), **kwargs):
    """Samples for f(x, y): every broadcasting pair, plus tensor-scalar calls."""

    def build(rng, dtype):
        out = [
            Sample(
                (make_array(rng, a, dtype, low, high), make_array(rng, b, dtype, low, high)),
                dict(kwargs),
            )
            for a, b in BROADCAST_PAIRS
        ]
        out += [
            Sample((make_array(rng, (3, 4), dtype, low, high), s), dict(kwargs)) for s in scalars
        ]
        return out

    return build


def reduction_samples(low=-3.0, high=3.0, dims=(None, 0, 1, -1, (0, 2)), keepdim=True, **kwargs):
    """Samples for f(x, dim=..., keepdim=...) on a 3-d tensor, plus scalar and 1-d inputs."""

    def build(rng, dtype):
        out = []
        for d in dims:
            x = make_array(rng, (2, 3, 4), dtype, low, high)
            kw = dict(kwargs) if d is None else dict(kwargs, dim=d)
            out.append(Sample((x,), kw))
            if keepdim and d is not None:
                out.append(Sample((x,), dict(kw, keepdim=True)))
        out.append(Sample((make_array(rng, (), dtype, low, high),), dict(kwargs)))
        out.append(Sample((make_array(rng, (5,), dtype, low, high),), dict(kwargs, dim=0)))
        return out

    return build
