"""Records of the indexing family: subscripts, gather/scatter, index_*, masking, sorting and
searching.

Index tensors are positional NumPy arrays (the harness makes them tensors); a subscript's
layout is the `key` keyword, where `T` marks the place of the next positional index tensor.
Samples whose gradients are checked stay within 64 elements in all.
"""

import numpy as np

import tideflow as flow
from tideflow.ops.indexing import _where_single

from ..opinfo import FLOATS, OpInfo, Sample, make_array


class _Slot:
    """Placeholder in a subscript `key` for the next positional index tensor."""

    def __repr__(self) -> str:
        return "T"


T = _Slot()


def _key(key: tuple, idx: tuple) -> tuple:
    it = iter(idx)
    return tuple(next(it) if k is T else k for k in key)


def _subscript(x, *idx, key):
    return x[_key(key, idx)]


def _assign(x, value, *idx, key):
    """`x[key] = value` on a clone (a non-leaf, so it works with autograd too)."""
    y = x.clone()
    y[_key(key, idx)] = value
    return y


def _torch(fn):
    """The same call on torch tensors (the oracle gets the torch module first)."""
    return lambda t, *args, **kwargs: fn(*args, **kwargs)


def _long(*values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _rows(rng, n: int, k: int, cols: int) -> np.ndarray:
    """An index of shape (k, cols) into a dim of size n, distinct within each column (so a
    scatter that replaces has one writer per position)."""
    return np.stack([rng.permutation(n)[:k] for _ in range(cols)], axis=1).astype(np.int64)


def _ints(rng, shape, n: int) -> np.ndarray:
    return rng.integers(0, n, size=shape).astype(np.int64)


def _distinct(rng, shape, dtype) -> np.ndarray:
    """Values without ties (eighths, exact in every float dtype; integers otherwise): sorting
    and selecting ops have well-defined indices and gradients on them."""
    n = int(np.prod(shape))
    values = (rng.permutation(n) - n // 2).reshape(shape)
    if dtype.startswith(("int", "uint")):
        return values.astype(dtype)
    return (values / 8).astype(make_array(rng, (), dtype).dtype)


def _mask(rng, shape) -> np.ndarray:
    return rng.random(shape) < 0.5


# -- subscripts ---------------------------------------------------------------------------------
def _basic_samples(rng, dtype):
    x = make_array(rng, (3, 4, 5), dtype)
    keys = [
        (1,),
        (-1, slice(1, 3)),
        (Ellipsis, 2),
        (None, slice(None), None, slice(0, 4, 2)),
        (slice(None), slice(-2, None)),
        (0, 0, 0),
        (slice(5, 9),),
        (Ellipsis,),
        (slice(None), 1, slice(None, None, 3), None),
        (True,),
        (None, False),
    ]
    out = [Sample((x,), {"key": k}) for k in keys]
    out.append(Sample((make_array(rng, (), dtype),), {"key": (None, Ellipsis)}))
    return out


def _advanced_samples(rng, dtype):
    x2 = make_array(rng, (4, 5), dtype)
    x3 = make_array(rng, (3, 4, 5), dtype)
    return [
        Sample((x2, _long([0, 3], [1, 1])), {"key": (T,)}, name="repeated"),
        Sample((x2, _long(4, -1)), {"key": (slice(None), T)}, name="negative"),
        Sample((x3, _long(0, 2), _long(1, 4)), {"key": (T, slice(None), T)}, name="apart"),
        Sample((x3, _long([0], [3]), _long(1, 2, 4)), {"key": (slice(None), T, T)}),
        Sample((x3, _long(0, 3)), {"key": (1, slice(None), T)}, name="int_first"),
        Sample((x3, _long(2, 0), _long(1, 1)), {"key": (T, None, T)}),
        Sample((x2, _mask(rng, (4, 5))), {"key": (T,)}, name="mask"),
        Sample((x3, _mask(rng, (4, 5))), {"key": (slice(None), T)}, name="mask_last"),
        Sample((x3, np.array([True, False, True]), _long(0, 4)), {"key": (T, slice(None), T)}),
        Sample((x2, np.zeros(0, np.int64)), {"key": (T,)}, name="empty"),
        Sample((x2, np.array(2)), {"key": (T, slice(1, 3))}, name="scalar_tensor"),
        Sample((x2, np.array([3, 0], np.int32)), {"key": (Ellipsis, T)}, name="int32"),
    ]


def _setitem_samples(rng, dtype):
    x = make_array(rng, (3, 4), dtype)

    def value(shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((x, value((4,))), {"key": (1,)}),
        Sample((x, value((3, 1))), {"key": (slice(None), slice(1, 3))}),
        Sample((x, value(())), {"key": (Ellipsis, 0)}),
        Sample((x, 2.5), {"key": (0, 0)}, name="number"),
        Sample((x, value((1, 1, 4))), {"key": (1,)}, name="leading_ones"),
        Sample((x, value((2, 4)), _long(0, 2)), {"key": (T,)}, name="advanced"),
        Sample((x, value(()), _mask(rng, (3, 4))), {"key": (T,)}, name="mask"),
        Sample((x, value((2,)), _long(0, 3)), {"key": (1, T)}, name="mixed"),
        Sample((x, value((2, 1)), _long(2, 0)), {"key": (T, slice(1, 3))}, name="mixed_slice"),
    ]


def _getitem_int_samples(rng, dtype):
    return [Sample((make_array(rng, (3, 4), dtype),), {"key": k}) for k in ((1,), (-2, 3))]


# -- index_put ------------------------------------------------------------------------------------
def _index_put_samples(rng, dtype):
    x = make_array(rng, (4, 3), dtype)
    return [
        Sample((x, make_array(rng, (2, 3), dtype), _long(3, 0))),
        Sample((x, make_array(rng, (2,), dtype), _long(1, 2), _long(0, 2))),
        Sample((x, make_array(rng, (), dtype), _mask(rng, (4, 3)))),
        Sample((x, make_array(rng, (3,), dtype), _long(1, 1, 2)), {"accumulate": True}),
    ]


def _index_put(x, values, *indices, accumulate=False):
    return x.index_put(indices, values, accumulate)


def _index_put_inplace(x, values, *indices, accumulate=False):
    return x.clone().index_put_(indices, values, accumulate)


# -- gather / scatter -----------------------------------------------------------------------------
def _gather_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), 0, _ints(rng, (2, 4), 3))),
        Sample((make_array(rng, (3, 4), dtype), 1, _ints(rng, (3, 6), 4))),
        Sample((make_array(rng, (3, 4), dtype), -1, _ints(rng, (2, 2), 4)), name="smaller"),
        Sample((make_array(rng, (2, 3, 4), dtype), 1, _ints(rng, (2, 2, 4), 3))),
        Sample((make_array(rng, (), dtype), 0, np.array(0))),
        Sample((make_array(rng, (3, 4), dtype), 0, _ints(rng, (2, 4), 3).astype(np.int32))),
    ]


def _scatter_samples(rng, dtype):
    return [
        Sample(
            (make_array(rng, (3, 4), dtype), 0, _rows(rng, 3, 2, 4), make_array(rng, (2, 4), dtype))
        ),
        Sample(
            (
                make_array(rng, (3, 4), dtype),
                1,
                _rows(rng, 4, 2, 3).T.copy(),
                make_array(rng, (3, 5), dtype),
            ),
            name="src_larger",
            grad=False,  # PyTorch's backward rejects a src larger than the index
        ),
        Sample(
            (
                make_array(rng, (2, 3, 4), dtype),
                -1,
                _rows(rng, 4, 3, 6).T.reshape(2, 3, 3).copy(),
                make_array(rng, (2, 3, 3), dtype),
            )
        ),
        Sample((make_array(rng, (), dtype), 0, np.array(0), make_array(rng, (), dtype))),
    ]


def _scatter_value_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), 0, _ints(rng, (2, 4), 3)), {"value": 1.5}),
        Sample((make_array(rng, (3, 4), dtype), 1, _ints(rng, (3, 2), 4), -2.0)),
    ]


def _scatter_reduce_value_samples(rng, dtype):
    x = make_array(rng, (3, 4), dtype)
    return [
        Sample((x, 0, _ints(rng, (2, 4), 3)), {"value": 2.0, "reduce": "add"}),
        Sample((x, 1, _ints(rng, (3, 3), 4)), {"value": 2.0, "reduce": "multiply"}),
    ]


def _scatter_add_samples(rng, dtype):
    return [
        Sample(
            (
                make_array(rng, (3, 4), dtype),
                0,
                _ints(rng, (4, 4), 3),
                make_array(rng, (4, 4), dtype),
            )
        ),
        Sample(
            (
                make_array(rng, (3, 4), dtype),
                1,
                _ints(rng, (2, 3), 4),
                make_array(rng, (3, 5), dtype),
            ),
            grad=False,  # PyTorch's backward rejects a src larger than the index
        ),
        Sample(
            (
                make_array(rng, (0, 3), dtype),
                0,
                np.zeros((0, 3), np.int64),
                make_array(rng, (0, 3), dtype),
            )
        ),
    ]


def _scatter_reduce_samples(reduce: str):
    def build(rng, dtype):
        out = []
        for include_self in (True, False):
            kw = {"include_self": include_self}
            x = make_array(rng, (3, 4), dtype, low=0.5, high=2.0)
            src = make_array(rng, (4, 4), dtype, low=0.5, high=2.0)
            out.append(Sample((x, 0, _ints(rng, (4, 4), 3), src, reduce), kw))
            x = make_array(rng, (2, 5), dtype, low=0.5, high=2.0)
            src = make_array(rng, (2, 3), dtype, low=0.5, high=2.0)
            out.append(Sample((x, 1, _ints(rng, (2, 3), 5), src, reduce), kw))
        return out

    return build


# -- index_select / index_add / index_copy / index_fill -------------------------------------------
def _index_select_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), 0, _long(2, 0, 2))),
        Sample((make_array(rng, (3, 4), dtype), -1, _long(3, 1))),
        Sample((make_array(rng, (2, 3, 4), dtype), 1, np.array(1))),
        Sample((make_array(rng, (3, 4), dtype), 1, np.zeros(0, np.int64))),
        Sample((make_array(rng, (3, 4), dtype), 0, np.array([1, 0], np.int32))),
        Sample((make_array(rng, (), dtype), 0, _long(0))),
    ]


def _index_add_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), 0, _long(2, 0, 2), make_array(rng, (3, 4), dtype))),
        Sample((make_array(rng, (3, 4), dtype), 1, _long(3, 1), make_array(rng, (3, 2), dtype))),
        Sample(
            (
                make_array(rng, (2, 3, 4), dtype),
                -2,
                np.array([1], np.int32),
                make_array(rng, (2, 1, 4), dtype),
            )
        ),
        Sample(
            (make_array(rng, (3, 4), dtype), 0, _long(1, 1), make_array(rng, (2, 4), dtype)),
            {"alpha": 2},
        ),
    ]


def _index_copy_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), 0, _long(2, 0), make_array(rng, (2, 4), dtype))),
        Sample(
            (
                make_array(rng, (2, 3, 4), dtype),
                -1,
                _long(3, 1, 0),
                make_array(rng, (2, 3, 3), dtype),
            )
        ),
    ]


def _index_fill_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), 0, _long(2, 0, 2), 1.5)),
        Sample((make_array(rng, (3, 4), dtype), 1, _long(3), make_array(rng, (), dtype))),
        Sample((make_array(rng, (2, 3, 4), dtype), -1, np.zeros(0, np.int64), -1.0)),
    ]


# -- masking ------------------------------------------------------------------------------------
def _masked_fill_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), _mask(rng, (3, 4)), 2.5)),
        Sample((make_array(rng, (3, 4), dtype), _mask(rng, (3, 1)), make_array(rng, (), dtype))),
        Sample((make_array(rng, (4,), dtype), _mask(rng, (3, 4)), -1.0), name="mask_wider"),
        Sample((make_array(rng, (), dtype), np.array(True), 0.5)),
    ]


def _masked_select_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), _mask(rng, (3, 4)))),
        Sample((make_array(rng, (3, 4), dtype), _mask(rng, (4,)))),
        Sample((make_array(rng, (3, 1), dtype), _mask(rng, (3, 4))), name="input_broadcast"),
        Sample((make_array(rng, (), dtype), np.array(True))),
    ]


def _masked_scatter_samples(rng, dtype):
    return [
        Sample(
            (make_array(rng, (3, 4), dtype), _mask(rng, (3, 4)), make_array(rng, (3, 5), dtype))
        ),
        Sample((make_array(rng, (3, 4), dtype), _mask(rng, (4,)), make_array(rng, (12,), dtype))),
        Sample((make_array(rng, (4,), dtype), _mask(rng, (2, 4)), make_array(rng, (9,), dtype))),
    ]


# -- take ---------------------------------------------------------------------------------------
def _take_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), _long([0, 11], [-1, 5]))),
        Sample((make_array(rng, (2, 3), dtype), _long(4, 4, 0))),
        Sample((make_array(rng, (5,), dtype), np.array(3))),
    ]


def _take_along_dim_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), _ints(rng, (3, 2), 4), 1)),
        Sample((make_array(rng, (3, 4), dtype), _ints(rng, (5,), 12))),
        Sample((make_array(rng, (3, 1, 4), dtype), _ints(rng, (1, 2, 2), 4)), {"dim": -1}),
        Sample((make_array(rng, (2, 3), dtype), _ints(rng, (2, 1), 2), 0)),
    ]


# -- nonzero ------------------------------------------------------------------------------------
def _with_zeros(rng, shape, dtype):
    a = make_array(rng, shape, dtype)
    return np.where(rng.random(shape) < 0.4, np.zeros((), a.dtype), a)


def _nonzero_samples(rng, dtype):
    return [Sample((_with_zeros(rng, s, dtype),)) for s in ((3, 4), (2, 3, 2), (5,), (), (0, 3))]


# -- sorting ------------------------------------------------------------------------------------
def _sort_samples(rng, dtype):
    if dtype == "bool":  # only ties: a stable sort fixes their order
        x = make_array(rng, (3, 4, 5), dtype)
        kw = {"stable": True}
    else:
        x = _distinct(rng, (3, 4, 5), dtype)
        kw = {}
    return [
        Sample((x,), kw),
        Sample((x,), {"dim": 0, **kw}),
        Sample((x,), {"dim": 1, "descending": True, **kw}),
        Sample((x,), {"dim": -1, "descending": True, "stable": True}),
        Sample((make_array(rng, (), dtype),), kw),
        Sample((make_array(rng, (0, 3), dtype),), {"dim": 0, **kw}),
    ]


def _topk_samples(rng, dtype):
    x = _distinct(rng, (3, 4, 5), dtype)
    return [
        Sample((x, 2)),
        Sample((x, 3, 0)),
        Sample((x, 1, 1, False)),
        Sample((x, 5), {"largest": False, "sorted": True}),
        Sample((x, 0)),
        Sample((make_array(rng, (), dtype), 1)),
    ]


def _kthvalue_samples(rng, dtype):
    x = _distinct(rng, (3, 4, 5), dtype)
    return [
        Sample((x, 2)),
        Sample((x, 3, 0)),
        Sample((x, 1, 1, True)),
        Sample((x, 5), {"keepdim": True}),
        Sample((make_array(rng, (), dtype), 1)),
    ]


# -- unique -------------------------------------------------------------------------------------
def _unique_samples(rng, dtype):
    x = make_array(rng, (4, 5), dtype, low=0, high=3).round()
    rows = np.repeat(make_array(rng, (3, 2), dtype, low=0, high=3).round(), 2, axis=0)[[0, 4, 1, 2]]
    return [
        Sample((x,)),
        Sample((x,), {"return_inverse": True}),
        Sample((x,), {"return_counts": True, "sorted": False}),
        Sample((x, True, True, True)),
        Sample((rows,), {"dim": 0, "return_inverse": True, "return_counts": True}),
        Sample((rows.T.copy(),), {"dim": 1, "return_inverse": True}),
        Sample((make_array(rng, (), dtype),), {"return_inverse": True, "return_counts": True}),
        Sample((make_array(rng, (0, 3), dtype),), {"return_counts": True}),
    ]


def _unique_consecutive_samples(rng, dtype):
    x = np.repeat(make_array(rng, (6,), dtype, low=0, high=3).round(), [1, 2, 1, 3, 2, 1])
    rows = np.repeat(make_array(rng, (3, 2), dtype, low=0, high=2).round(), [2, 1, 2], axis=0)
    return [
        Sample((x,)),
        Sample((x.reshape(2, 5),), {"return_inverse": True, "return_counts": True}),
        Sample((rows,), {"dim": 0, "return_inverse": True, "return_counts": True}),
        Sample((rows.T.copy(),), {"dim": -1, "return_counts": True}),
        Sample((make_array(rng, (), dtype),), {"return_inverse": True}),
    ]


# -- searching and counting ---------------------------------------------------------------------
def _sorted(rng, shape, dtype):
    return np.sort(make_array(rng, shape, dtype, low=-3, high=3), axis=-1)


def _searchsorted_samples(rng, dtype):
    seq = _sorted(rng, (6,), dtype)
    values = np.concatenate([make_array(rng, (4,), dtype), seq[[1, 3]]]).reshape(2, 3)
    batch = _sorted(rng, (2, 5), dtype)
    hits = np.concatenate([make_array(rng, (2, 2), dtype), batch[:, [0, 4]]], axis=1)
    unsorted = make_array(rng, (5,), dtype)
    return [
        Sample((seq, values)),
        Sample((seq, values), {"right": True}),
        Sample((seq, values), {"side": "right", "out_int32": True}),
        Sample((batch, hits)),
        Sample((batch, hits), {"right": True}),
        Sample((seq, 1)),
        Sample((unsorted, values, np.argsort(unsorted, kind="stable")), name="sorter"),
    ]


def _searchsorted(lib):
    """searchsorted with the sorter as an optional third positional (so it becomes a tensor)."""
    return lambda seq, values, sorter=None, **kw: lib.searchsorted(seq, values, sorter=sorter, **kw)


def _bucketize_samples(rng, dtype):
    boundaries = _sorted(rng, (5,), dtype)
    x = np.concatenate([make_array(rng, (6,), dtype), boundaries[[0, 2]]]).reshape(2, 4)
    return [
        Sample((x, boundaries)),
        Sample((x, boundaries), {"right": True}),
        Sample((x, boundaries), {"out_int32": True}),
        Sample((make_array(rng, (), dtype), boundaries)),
    ]


def _bincount_samples(rng, dtype):
    x = _ints(rng, (7,), 5)
    return [
        Sample((x,)),
        Sample((x, make_array(rng, (7,), dtype))),
        Sample((x,), {"minlength": 8}),
        Sample((np.zeros(0, np.int64),), {"minlength": 2}),
        Sample((x.astype(np.uint8), make_array(rng, (7,), dtype)), {"minlength": 3}),
    ]


def _bincount_ref(x, weights=None, minlength=0):
    return np.bincount(x, weights, minlength)


def _put_samples(rng, dtype):
    def x(*shape):
        return make_array(rng, shape, dtype)

    def positions(n, size, distinct=True):
        chosen = rng.choice(n, size=size, replace=not distinct)
        return (chosen - rng.integers(0, 2, size=size) * n).astype(np.int64)  # some negative

    return [
        Sample((x(3, 4), positions(12, 5), x(5))),
        Sample((x(3, 4), positions(12, 6).reshape(2, 3), x(3, 2))),
        Sample((x(2, 3), positions(6, 8, distinct=False), x(8)), {"accumulate": True}),
        Sample((x(5), np.zeros((0,), np.int64), x(0))),
        Sample((np.asarray(x()), np.array([-1]), x(1))),
    ]


def _isin_samples(rng, dtype):
    def values(*shape):
        return make_array(rng, shape, dtype, -4, 5).round().astype(dtype)

    return [
        Sample((values(3, 4), values(5))),
        Sample((values(3, 4), values(2, 3)), {"invert": True}),
        Sample((values(6), values(3)), {"assume_unique": True}),
        Sample((values(0, 2), values(3))),
        Sample((np.asarray(values()), values(4))),
        Sample((values(3, 4), 2)),
        Sample((1, values(4))),
        Sample((values(4), make_array(rng, (3,), "int32", -4, 5))),  # promoted together
    ]


def _histc_samples(rng, dtype):
    x = make_array(rng, (3, 4), dtype)
    return [
        Sample((x,)),
        Sample((x, 5)),
        Sample((x,), {"bins": 4, "min": -1, "max": 2}),
        Sample((np.full((3,), 2, dtype=x.dtype),), {"bins": 4}),
        Sample((make_array(rng, (0,), dtype),), {"bins": 3}),
    ]


def _where_single_samples(rng, dtype):
    return [Sample((_with_zeros(rng, s, dtype),)) for s in ((3, 4), (5,), ())]


_INT_DTYPES = ("int64",)
# float32 first: the meta and SBP tests run the first dtype (partial sums of half-precision
# shards round too coarsely for their tolerance)
ALL_FLOATS = ("float32", "float64", "float16", "bfloat16")

RECORDS = [
    # subscripts
    OpInfo(
        "getitem",
        _basic_samples,
        op=_subscript,
        torch=_torch(_subscript),
        variant="basic",
        dtypes=ALL_FLOATS,
    ),
    OpInfo(
        "getitem",
        _basic_samples,
        op=_subscript,
        torch=_torch(_subscript),
        variant="basic_int",
        dtypes=("int64", "bool"),
        grad=False,
    ),
    OpInfo(
        "getitem",
        _advanced_samples,
        op=_subscript,
        torch=_torch(_subscript),
        variant="advanced",
        dtypes=ALL_FLOATS,
    ),
    OpInfo(
        "getitem",
        _advanced_samples,
        op=_subscript,
        torch=_torch(_subscript),
        variant="advanced_int",
        dtypes=("int64", "bool"),
        grad=False,
    ),
    OpInfo(
        "getitem",
        _getitem_int_samples,
        op=lambda x, key: x[key[0]] if len(key) == 1 else x[key[0], key[1]],
        torch=lambda t, x, key: x[key[0]] if len(key) == 1 else x[key[0], key[1]],
        variant="int_key",
    ),
    OpInfo(
        "setitem", _setitem_samples, op=_assign, torch=_torch(_assign), dtypes=(*FLOATS, "float16")
    ),
    OpInfo(
        "setitem",
        _setitem_samples,
        op=_assign,
        torch=_torch(_assign),
        variant="int",
        dtypes=_INT_DTYPES,
        grad=False,
    ),
    OpInfo("index_put", _index_put_samples, op=_index_put, torch=_torch(_index_put)),
    OpInfo(
        "index_put_", _index_put_samples, op=_index_put_inplace, torch=_torch(_index_put_inplace)
    ),
    # gather / scatter
    OpInfo("gather", _gather_samples, dtypes=ALL_FLOATS),
    OpInfo("gather", _gather_samples, variant="int", dtypes=_INT_DTYPES, grad=False),
    OpInfo("scatter", _scatter_samples, dtypes=ALL_FLOATS),
    OpInfo("scatter", _scatter_value_samples, variant="value"),
    OpInfo("scatter", _scatter_reduce_value_samples, variant="reduce", grad=False),
    OpInfo(
        "scatter_",
        _scatter_samples,
        op=lambda x, *a: x.clone().scatter_(*a),
        torch=lambda t, x, *a: x.clone().scatter_(*a),
    ),
    OpInfo("scatter_add", _scatter_add_samples, dtypes=ALL_FLOATS),
    OpInfo(
        "scatter_add_",
        _scatter_add_samples,
        op=lambda x, *a: x.clone().scatter_add_(*a),
        torch=lambda t, x, *a: x.clone().scatter_add_(*a),
    ),
    OpInfo("scatter_reduce", _scatter_reduce_samples("sum"), variant="sum"),
    OpInfo("scatter_reduce", _scatter_reduce_samples("mean"), variant="mean"),
    OpInfo(
        "scatter_reduce",
        _scatter_reduce_samples("mean"),
        variant="mean_int",
        dtypes=_INT_DTYPES,
        grad=False,
    ),
    OpInfo("scatter_reduce", _scatter_reduce_samples("amax"), variant="amax"),
    OpInfo("scatter_reduce", _scatter_reduce_samples("amin"), variant="amin", dtypes=ALL_FLOATS),
    OpInfo("scatter_reduce", _scatter_reduce_samples("prod"), variant="prod", grad=False),
    OpInfo(
        "scatter_reduce_",
        _scatter_reduce_samples("amax"),
        op=lambda x, *a, **k: x.clone().scatter_reduce_(*a, **k),
        torch=lambda t, x, *a, **k: x.clone().scatter_reduce_(*a, **k),
    ),
    # index_*
    OpInfo("index_select", _index_select_samples, dtypes=ALL_FLOATS),
    OpInfo("index_select", _index_select_samples, variant="int", dtypes=_INT_DTYPES, grad=False),
    OpInfo("index_add", _index_add_samples),
    OpInfo(
        "index_add_",
        _index_add_samples,
        op=lambda x, *a, **k: x.clone().index_add_(*a, **k),
        torch=lambda t, x, *a, **k: x.clone().index_add_(*a, **k),
    ),
    OpInfo("index_copy", _index_copy_samples),
    OpInfo(
        "index_copy_",
        _index_copy_samples,
        op=lambda x, *a: x.clone().index_copy_(*a),
        torch=lambda t, x, *a: x.clone().index_copy_(*a),
    ),
    OpInfo("index_fill", _index_fill_samples),
    OpInfo(
        "index_fill_",
        _index_fill_samples,
        op=lambda x, *a: x.clone().index_fill_(*a),
        torch=lambda t, x, *a: x.clone().index_fill_(*a),
    ),
    # masking
    OpInfo("masked_fill", _masked_fill_samples, dtypes=ALL_FLOATS),
    OpInfo("masked_fill", _masked_fill_samples, variant="int", dtypes=_INT_DTYPES, grad=False),
    OpInfo(
        "masked_fill_",
        lambda rng, dt: [s for s in _masked_fill_samples(rng, dt) if s.name != "mask_wider"],
        op=lambda x, *a: x.clone().masked_fill_(*a),
        torch=lambda t, x, *a: x.clone().masked_fill_(*a),
    ),
    OpInfo("masked_select", _masked_select_samples, dtypes=ALL_FLOATS),
    OpInfo("masked_scatter", _masked_scatter_samples),
    OpInfo(
        "masked_scatter_",
        lambda rng, dt: _masked_scatter_samples(rng, dt)[:2],
        op=lambda x, *a: x.clone().masked_scatter_(*a),
        torch=lambda t, x, *a: x.clone().masked_scatter_(*a),
    ),
    # take
    OpInfo("take", _take_samples, dtypes=ALL_FLOATS),
    OpInfo("take_along_dim", _take_along_dim_samples),
    # nonzero
    OpInfo("nonzero", _nonzero_samples, dtypes=("float32", "int64", "bool"), grad=False),
    OpInfo(
        "nonzero",
        _nonzero_samples,
        op=lambda x: flow.nonzero(x, as_tuple=True),
        torch=lambda t, x: t.nonzero(x, as_tuple=True),
        variant="as_tuple",
        dtypes=("float32", "bool"),
        grad=False,
    ),
    OpInfo("argwhere", _nonzero_samples, dtypes=("float32", "int64"), grad=False),
    OpInfo(
        "where",
        _where_single_samples,
        op=_where_single,
        torch=lambda t, c: t.where(c),
        variant="condition_only",
        dtypes=("float32", "bool"),
        grad=False,
    ),
    # sorting
    OpInfo("sort", _sort_samples, dtypes=ALL_FLOATS),
    OpInfo("sort", _sort_samples, variant="int", dtypes=("int64", "bool"), grad=False),
    OpInfo("argsort", _sort_samples, dtypes=("float32", "int64"), grad=False),
    OpInfo("topk", _topk_samples, dtypes=ALL_FLOATS),
    OpInfo("topk", _topk_samples, variant="int", dtypes=_INT_DTYPES, grad=False),
    OpInfo("kthvalue", _kthvalue_samples),
    # unique
    OpInfo("unique", _unique_samples, dtypes=("int64", "float32", "bfloat16"), grad=False),
    OpInfo(
        "unique_consecutive", _unique_consecutive_samples, dtypes=("int64", "float32"), grad=False
    ),
    # searching and counting
    OpInfo(
        "searchsorted",
        _searchsorted_samples,
        op=_searchsorted(flow),
        torch=lambda t, *a, **k: _searchsorted(t)(*a, **k),
        dtypes=("float32", "int64", "float16"),
        grad=False,
    ),
    OpInfo("bucketize", _bucketize_samples, dtypes=("float32", "int64"), grad=False),
    OpInfo("bincount", _bincount_samples, dtypes=("float32", "float64", "float16"), grad=False),
    OpInfo(
        "bincount",
        _bincount_samples,
        ref=_bincount_ref,
        variant="weights_grad",
        dtypes=("float64",),
    ),
    OpInfo("histc", _histc_samples, dtypes=ALL_FLOATS, grad=False),
    OpInfo("put", _put_samples, dtypes=(*ALL_FLOATS, "int64")),
    OpInfo(
        "put",
        _put_samples,
        variant="method",
        op=lambda x, index, source, **kw: x.put(index, source, **kw),
        torch=lambda torch, x, index, source, **kw: x.put(index, source, **kw),
    ),
    OpInfo("isin", _isin_samples, dtypes=(*FLOATS, "int64", "int32", "uint8"), grad=False),
]
