"""PyTorch's legacy tensor types (`torch.FloatTensor`, `torch.LongTensor`, ...): constructors
of one dtype, and `isinstance` tests of a tensor's dtype. Programs still call them
(`torch.LongTensor(n).zero_()` in pytorch/examples' word_language_model)."""

from __future__ import annotations

import tideflow
from tideflow.framework import dtype as dtypes


class _LegacyType(type):
    """`T(*sizes)`: an uninitialized tensor of those sizes; `T(data)`: a tensor of the data;
    `T()`: an empty one. `isinstance(t, T)`: `t` is a tensor of T's dtype."""

    dtype: dtypes.DType

    def __call__(cls, *args):
        if len(args) == 1 and not isinstance(args[0], int | tideflow.Size):
            return tideflow.tensor(args[0], dtype=cls.dtype)
        sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], tideflow.Size) else args
        return tideflow.empty(sizes if sizes else (0,), dtype=cls.dtype)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, tideflow.Tensor) and obj.dtype is cls.dtype


_TYPES = {
    "FloatTensor": dtypes.float32,
    "DoubleTensor": dtypes.float64,
    "HalfTensor": dtypes.float16,
    "BFloat16Tensor": dtypes.bfloat16,
    "ByteTensor": dtypes.uint8,
    "CharTensor": dtypes.int8,
    "ShortTensor": dtypes.int16,
    "IntTensor": dtypes.int32,
    "LongTensor": dtypes.int64,
    "BoolTensor": dtypes.bool_,
}


def legacy_tensor_types() -> dict[str, type]:
    """torch name -> its legacy tensor type."""
    return {name: _LegacyType(name, (), {"dtype": dtype}) for name, dtype in _TYPES.items()}
