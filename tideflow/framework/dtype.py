"""Data types and PyTorch's type-promotion rules.

A `DType` names a NumPy dtype (bfloat16 comes from `ml_dtypes`). Promotion follows PyTorch,
not NumPy: categories bool < integer < floating < complex, and operands are ranked dimensioned
tensors > zero-dim tensors > Python scalars, so `int_tensor * 2.5` is float32 (the default
dtype), not float64, `float16_tensor + float64_scalar_tensor` stays float16, and
`float64_tensor * 1j` is complex128 (the complex dtype of the float operand's precision).

There is no complex32 (PyTorch's ComplexHalf, which has few kernels): where PyTorch would
pick it (`float16_tensor * 1j`), tideflow computes in complex64.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import DTypeError

_BOOL, _INT, _FLOAT, _COMPLEX = 0, 1, 2, 3


class DType:
    __slots__ = ("category", "itemsize", "name", "np")

    def __init__(self, name: str, np_dtype, category: int) -> None:
        self.name = name
        self.np = np.dtype(np_dtype)
        self.category = category
        self.itemsize = self.np.itemsize

    @property
    def is_floating_point(self) -> bool:
        return self.category == _FLOAT

    @property
    def is_complex(self) -> bool:
        return self.category == _COMPLEX

    @property
    def is_signed(self) -> bool:
        return self.name != "uint8" and self.name != "bool"

    def __repr__(self) -> str:
        return f"tideflow.{self.name}"

    def __reduce__(self):
        return (_by_name, (self.name,))


bool_ = DType("bool", np.bool_, _BOOL)
uint8 = DType("uint8", np.uint8, _INT)
int8 = DType("int8", np.int8, _INT)
int16 = DType("int16", np.int16, _INT)
int32 = DType("int32", np.int32, _INT)
int64 = DType("int64", np.int64, _INT)
float16 = DType("float16", np.float16, _FLOAT)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, _FLOAT)
float32 = DType("float32", np.float32, _FLOAT)
float64 = DType("float64", np.float64, _FLOAT)
complex64 = DType("complex64", np.complex64, _COMPLEX)
complex128 = DType("complex128", np.complex128, _COMPLEX)

ALL = (
    bool_,
    uint8,
    int8,
    int16,
    int32,
    int64,
    float16,
    bfloat16,
    float32,
    float64,
    complex64,
    complex128,
)
FLOATING = (float16, bfloat16, float32, float64)
COMPLEX = (complex64, complex128)
INTEGRAL = (uint8, int8, int16, int32, int64)

_NAMES = {d.name: d for d in ALL}
_NAMES.update(half=float16, float=float32, double=float64, short=int16, int=int32, long=int64)
_NAMES.update(cfloat=complex64, cdouble=complex128)
_FROM_NP = {d.np: d for d in ALL}


def _by_name(name: str) -> DType:
    return _NAMES[name]


def from_numpy(np_dtype) -> DType:
    """The DType of a NumPy dtype; raises for dtypes tideflow does not support."""
    try:
        return _FROM_NP[np_dtype]
    except KeyError:
        d = np.dtype(np_dtype)
        if d in _FROM_NP:
            return _FROM_NP[d]
        raise DTypeError(f"numpy dtype {d} is not supported by tideflow") from None


def to_dtype(obj) -> DType:
    """Accepts a DType, a name ('float32'), a Python type (float/int/bool) or a NumPy dtype."""
    if isinstance(obj, DType):
        return obj
    if obj is float:
        return get_default_dtype()
    if obj is int:
        return int64
    if obj is bool:
        return bool_
    if isinstance(obj, str) and obj in _NAMES:
        return _NAMES[obj]
    try:
        return from_numpy(np.dtype(obj))
    except TypeError:
        raise DTypeError(f"cannot interpret {obj!r} as a tideflow dtype") from None


def to_complex(d: DType) -> DType:
    """The complex dtype holding values of `d`'s precision: float64 -> complex128, every other
    real dtype -> complex64 (see the module note on complex32)."""
    if d.is_complex:
        return d
    return complex128 if d is float64 else complex64


def to_real(d: DType) -> DType:
    """The dtype of the real and imaginary parts of `d` (`d` itself when it is real)."""
    if d is complex128:
        return float64
    return float32 if d is complex64 else d


def _promote_pair(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if {a.category, b.category} == {_FLOAT, _COMPLEX}:  # complex64 + float64 -> complex128
        return to_complex(_promote_pair(to_real(a), to_real(b)))
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == _BOOL:
        return a
    if a.category == _INT:
        return _FROM_NP[np.promote_types(a.np, b.np)]
    if {a.name, b.name} == {"float16", "bfloat16"}:
        return float32
    return a if a.itemsize > b.itemsize else b


_PROMOTE = {(a, b): _promote_pair(a, b) for a in ALL for b in ALL}


def promote_types(a: DType, b: DType) -> DType:
    return _PROMOTE[a, b]


_default = [float32]


def get_default_dtype() -> DType:
    return _default[0]


def get_default_complex_dtype() -> DType:
    """The dtype of Python complex numbers as tensors: complex64, or complex128 when the
    default dtype is float64 (PyTorch ties the two)."""
    return to_complex(_default[0])


def set_default_dtype(d) -> None:
    d = to_dtype(d)
    if not d.is_floating_point:
        raise DTypeError(f"set_default_dtype: only floating dtypes can be the default, got {d}")
    _default[0] = d


def scalar_dtype(value) -> DType:
    """The dtype a Python scalar takes when it becomes a tensor (`flow.tensor(2.5)`)."""
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int):
        return int64
    if isinstance(value, complex):
        return get_default_complex_dtype()
    return get_default_dtype()


def _combine_categories(higher: DType | None, lower: DType | None) -> DType | None:
    """PyTorch's merge of a higher-priority group's dtype with a lower one's: the lower group
    counts only when its category is higher, and a complex lower group keeps a floating
    higher group's precision (`float32_tensor + complex128_zero_dim` is complex64)."""
    if higher is None:
        return lower
    if lower is None or higher.is_complex:
        return higher
    if lower.is_complex:
        return to_complex(higher) if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is bool_ or lower.is_floating_point:
        return _PROMOTE[higher, lower]
    return higher


def result_type(dims, zero_dims, scalars) -> DType:
    """PyTorch's result type: `dims`/`zero_dims` are dtypes of dimensioned / 0-dim tensor
    operands, `scalars` the Python scalars. Higher-priority groups win within a category."""
    groups = []
    for dtypes in (dims, zero_dims, [scalar_dtype(s) for s in scalars]):
        r = None
        for d in dtypes:
            r = d if r is None else _PROMOTE[r, d]
        groups.append(r)
    out = _combine_categories(groups[0], _combine_categories(groups[1], groups[2]))
    if out is None:
        raise DTypeError("result_type needs at least one operand")
    return out
