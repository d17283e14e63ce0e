"""Collation: turning a list of samples into a batch, with PyTorch's `default_collate` rules.

`collate` walks the sample structure (mappings, namedtuples, sequences) and hands each leaf
type to the function registered for it in `collate_fn_map`; `default_collate_fn_map` holds
PyTorch's rules for tensors, NumPy arrays and scalars, numbers and strings. Extend it (or pass
your own map to `collate`) to batch custom types.
"""

from __future__ import annotations

import collections.abc
import copy
import re
from collections.abc import Callable

import numpy as np

from ....framework import dtype as dtypes
from ....framework.tensor import Tensor
from ....ops.creation import as_tensor, from_numpy, tensor
from ....ops.shape import stack

__all__ = ["collate", "default_collate", "default_collate_fn_map", "default_convert"]

# NumPy dtype codes of bytes (S, a), unicode (U) and objects (O): no tensor holds those.
_STR_OR_OBJECT_DTYPE = re.compile(r"[SaUO]")

_ERR_FORMAT = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)

CollateFnMap = dict[type | tuple[type, ...], Callable]


def default_convert(data):
    """Convert NumPy arrays and scalars (also inside mappings, namedtuples and sequences) to
    tensors; leave everything else unchanged. The DataLoader's `collate_fn` when automatic
    batching is off (`batch_size=None`).

    >>> flow.utils.data.default_convert({"x": np.array([1, 2]), "name": "a"})
    {'x': tensor([1, 2]), 'name': 'a'}
    """
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "bytes_"):
        if isinstance(data, np.ndarray) and _STR_OR_OBJECT_DTYPE.search(data.dtype.str):
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]  # a list, like PyTorch
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, str | bytes):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def collate(batch, *, collate_fn_map: CollateFnMap | None = None):
    """Collate `batch` (a list of samples of one structure), batching each leaf type with
    `collate_fn_map[type]` (exact type first, then the first key it is an instance of).

    >>> def first_only(batch, *, collate_fn_map=None):
    ...     return batch[0]
    >>> from tideflow.utils.data._utils.collate import collate
    >>> collate([{"k": "a"}, {"k": "b"}], collate_fn_map={str: first_only})
    {'k': 'a'}
    """
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for leaf_type, fn in collate_fn_map.items():
            if isinstance(elem, leaf_type):
                return fn(batch, collate_fn_map=collate_fn_map)

    def merge(samples):
        return collate(samples, collate_fn_map=collate_fn_map)

    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {key: merge([d[key] for d in batch]) for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(merge(field) for field in zip(*batch, strict=True)))
    if isinstance(elem, collections.abc.Sequence):
        sizes = [len(sample) for sample in batch]
        if any(size != sizes[0] for size in sizes):
            raise RuntimeError(
                f"each element in list of batch should be of equal size, got sizes {sizes}"
            )
        fields = [merge(field) for field in zip(*batch, strict=True)]
        return fields if isinstance(elem, tuple) else _rebuild_sequence(elem, fields)
    raise TypeError(_ERR_FORMAT.format(elem_type))


def _rebuild_mapping(like, items: dict):
    """`items` in a mapping of `like`'s type where that type allows it, else a dict."""
    try:
        if isinstance(like, collections.abc.MutableMapping):
            # NOTE: a copy keeps the extra state of the mapping type (a defaultdict's factory).
            clone = copy.copy(like)
            clone.update(items)
            return clone
        return type(like)(items)
    except TypeError:
        return items


def _rebuild_sequence(like, items: list):
    """`items` in a sequence of `like`'s type where that type allows it, else a list."""
    try:
        if isinstance(like, collections.abc.MutableSequence):
            clone = copy.copy(like)
            for i, item in enumerate(items):
                clone[i] = item
            return clone
        return type(like)(items)
    except TypeError:
        return items


def collate_tensor_fn(batch, *, collate_fn_map: CollateFnMap | None = None):
    return stack(batch, 0)


def collate_numpy_array_fn(batch, *, collate_fn_map: CollateFnMap | None = None):
    dtype = batch[0].dtype
    if _STR_OR_OBJECT_DTYPE.search(dtype.str):
        raise TypeError(_ERR_FORMAT.format(dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch, *, collate_fn_map: CollateFnMap | None = None):
    # NOTE: through an array: the scalars' own dtype is kept (float32 stays float32).
    return from_numpy(np.asarray(batch))


def collate_float_fn(batch, *, collate_fn_map: CollateFnMap | None = None):
    return tensor(batch, dtype=dtypes.float64)


def collate_int_fn(batch, *, collate_fn_map: CollateFnMap | None = None):
    return tensor(batch)  # int64; bools give bool; a float later in the batch gives float


def collate_str_fn(batch, *, collate_fn_map: CollateFnMap | None = None):
    return batch


default_collate_fn_map: CollateFnMap = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch):
    """Stack a list of samples into a batch with PyTorch's rules: tensors are stacked along a
    new first dimension, NumPy arrays become tensors and are stacked, NumPy scalars become a
    tensor of their dtype, Python floats a float64 tensor, ints an int64 tensor (bools a
    bool tensor); strings and bytes stay a list; mappings, namedtuples and sequences are
    collated field by field (tuples come back as lists).

    >>> flow.utils.data.default_collate([(0, 1.5), (2, 3.5)])
    [tensor([0, 2]), tensor([1.5000, 3.5000], dtype=tideflow.float64)]
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
