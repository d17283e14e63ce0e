"""Records of the shape ops: views, permutations, slices, joins, tiling, flips, triangles and
diagonals. Shape ops move values without arithmetic, so most records run every dtype."""

import numpy as np

import tideflow as flow

from ..opinfo import OpInfo, Sample
from ..opinfo import make_array as _make_array

# Data movement is dtype-agnostic: check the low-precision floats, integers and bool too.
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "bool")


def make_array(rng, shape, dtype, low=-3.0, high=3.0) -> np.ndarray:
    # NOTE: opinfo.make_array gives a NumPy scalar, not a 0-d array, for shape () and bool
    return np.asarray(_make_array(rng, shape, dtype, low, high))


def _on(shape, *args, **kwargs):
    """Samples f(x, *args, **kwargs) for one random x of `shape`."""
    return lambda rng, dtype: Sample((make_array(rng, shape, dtype), *args), kwargs)


def _samples(*builders):
    return lambda rng, dtype: [b(rng, dtype) for b in builders]


def _many(*shapes, **kwargs):
    """One sample with a tensor of each shape as positional arguments (cat, stack, ...)."""
    return lambda rng, dtype: Sample(tuple(make_array(rng, s, dtype) for s in shapes), kwargs)


# -- reshape, view and the ops built on them ------------------------------------------------
_reshape_samples = _samples(
    _on((2, 3, 4), (6, 4)),
    _on((2, 3, 4), (2, -1)),
    _on((2, 3, 4), (4, 3, 2)),
    _on((4,), (2, 2)),
    _on((), (1,)),
    _on((1,), ()),
    _on((0, 3), (3, 0)),
)

_flatten_samples = _samples(
    _on((2, 3, 4)),
    _on((2, 3, 4), 1),
    _on((2, 3, 4), start_dim=0, end_dim=-2),
    _on((2, 3, 4), 1, 1),
    _on((2, 0, 3), 0, 1),
    _on(()),
)

_unflatten_samples = _samples(
    _on((2, 6), 1, (2, 3)),
    _on((2, 6), -1, (-1, 2)),
    _on((6,), 0, (3, 1, 2)),
    _on((0, 4), 0, (0, 5)),
)

_squeeze_samples = _samples(
    _on((1, 3, 1, 4)),
    _on((1, 3, 1, 4), 0),
    _on((1, 3, 1, 4), 1),
    _on((1, 3, 1, 4), (0, 2)),
    _on((1, 3, 1, 4), dim=-2),
    _on((1, 1)),
    _on(()),
    _on((), 0),
)

_unsqueeze_samples = _samples(
    _on((2, 3), 0),
    _on((2, 3), 1),
    _on((2, 3), 2),
    _on((2, 3), -1),
    _on((2, 3), dim=-3),
    _on((), 0),
    _on((0, 2), 1),
)

_atleast_samples = _samples(
    _on(()),
    _on((3,)),
    _on((2, 3)),
    _on((2, 3, 2)),
    _many((), (3,), (2, 3)),
)

# -- expand and broadcasting ----------------------------------------------------------------
_expand_samples = _samples(
    _on((3, 1), (3, 4)),
    _on((1,), (2, 3, 5)),
    _on((2, 1, 4), (-1, 3, -1)),
    _on((), (2, 2)),
)
_expand_as_samples = _samples(_many((3, 1), (2, 3, 4)), _many((), (2,)))
_broadcast_to_samples = _samples(
    _on((3, 1), (3, 4)),
    _on((1,), (2, 3, 5)),
    _on((2, 1, 4), (-1, 3, 4)),
)
_broadcast_tensors_samples = _samples(
    _many((3, 1), (1, 4)),
    _many((2, 1, 4), (3, 1), ()),
    _many((0, 3), (3,)),
    _many((2, 3)),
)
_meshgrid_samples = _samples(
    _many((2,), (3,), indexing="ij"),
    _many((2,), (3,), indexing="xy"),
    _many((2,), (), (3,), indexing="xy"),
    _many((4,), indexing="xy"),
)

# -- permutations ---------------------------------------------------------------------------
_permute_samples = _samples(
    _on((2, 3, 4), (2, 0, 1)),
    _on((2, 3, 4), (-1, 0, 1)),
    _on((2, 3), (1, 0)),
    _on((0, 3), (1, 0)),
    _on((), ()),
)
_transpose_samples = _samples(
    _on((2, 3, 4), 0, 2),
    _on((2, 3, 4), -1, 1),
    _on((2, 3), 1, 1),
    _on((), 0, -1),
)
_t_samples = _samples(_on((2, 3)), _on((3,)), _on(()), _on((0, 2)))
_movedim_samples = _samples(
    _on((2, 3, 4), 0, 2),
    _on((2, 3, 4), -1, 0),
    _on((2, 3, 4), (0, 1), (2, 0)),
    _on((2, 3, 4, 5), (3, 1), (0, 1)),
    _on((), 0, 0),
)

# -- slices ---------------------------------------------------------------------------------
_narrow_samples = _samples(
    _on((3, 4), 1, 0, 2),
    _on((3, 4), -1, -2, 2),
    _on((3, 4), 0, 1, 2),
    _on((3, 4), 0, 3, 0),
    _on((5,), 0, 1, 3),
)
_select_samples = _samples(
    _on((3, 4), 0, 1),
    _on((3, 4), 1, -1),
    _on((2, 3, 4), -2, 2),
    _on((4,), 0, 3),
)
_split_samples = _samples(
    _on((5, 3), 2),
    _on((5, 3), 1, 1),
    _on((5, 3), [1, 4]),
    _on((4, 6), (2, 0, 4), dim=1),
    _on((5,), 5),
    _on((0, 3), 2),
)
_chunk_samples = _samples(
    _on((5, 3), 2),
    _on((6, 4), 4),
    _on((5, 3), 3, dim=1),
    _on((2, 4), 1, -1),
    _on((0, 3), 3),
)
_unbind_samples = _samples(
    _on((3, 4)),
    _on((3, 4), 1),
    _on((2, 3, 2), dim=-1),
    _on((3,)),
    _on((0, 2), 1),
)


def _tensor_split_samples(rng, dtype):
    x = make_array(rng, (7, 4), dtype)
    return [
        Sample((x, 3)),
        Sample((x, 2), {"dim": 1}),
        Sample((x, 10)),
        Sample((x, [1, 5])),
        Sample((x, (-2,), -2)),
        Sample((x, [-9, 20])),
        Sample((x, [5, 1])),  # decreasing indices: overlapping pieces
        Sample((x, [])),
        Sample((x, np.array([1, 3])), {"dim": 1}),
        Sample((x, np.array(2))),
        Sample((make_array(rng, (0, 2), dtype), 2)),
    ]


_hsplit_samples = _samples(
    _on((2, 6), 3),
    _on((2, 6, 2), [1, 4]),
    _on((6,), 2),
    _on((6,), [2]),
)
_vsplit_samples = _samples(_on((6, 2), 3), _on((4, 3, 2), [1, 3]))
_dsplit_samples = _samples(_on((1, 2, 6), 2), _on((2, 1, 4, 3), [3]))


def _slice_scatter_samples(rng, dtype):
    def pair(big, small, *args, **kwargs):
        return Sample((make_array(rng, big, dtype), make_array(rng, small, dtype), *args), kwargs)

    return [
        pair((3, 4), (3, 2), 1, 0, 2),
        pair((3, 4), (3, 2), 1, None, None, 2),
        pair((3, 4), (1, 4), start=2),
        pair((3, 4), (2, 4), 0, -2),
        pair((4, 3), (2, 3), 0, 1, 10, 2),
        pair((3, 4), (3, 0), 1, 3, 1),
    ]


def _select_scatter_samples(rng, dtype):
    def pair(big, small, *args):
        return Sample((make_array(rng, big, dtype), make_array(rng, small, dtype), *args))

    return [pair((3, 4), (4,), 0, 1), pair((3, 4), (3,), 1, -1), pair((2, 3, 2), (2, 2), 1, 2)]


# -- joins ----------------------------------------------------------------------------------
_cat_samples = _samples(
    _many((2, 3), (4, 3)),
    _many((2, 3), (2, 1), (2, 2), dim=1),
    _many((2, 3, 2), (2, 3, 1), dim=-1),
    _many((3,), (0,), (2,)),
    _many((0,), (2, 3), (0,), dim=1),
    _many((0,), (0,)),
    _many((2, 0), (2, 3), dim=1),
    _many((3, 2)),
)
_stack_samples = _samples(
    _many((2, 3), (2, 3)),
    _many((2, 3), (2, 3), (2, 3), dim=1),
    _many((2, 3), (2, 3), dim=-1),
    _many((), ()),
    _many((0, 2), (0, 2), dim=2),
)


def _mixed_samples(rng, dtype):
    """Operands of different dtypes: the result type follows PyTorch's promotion. (float16 with
    bfloat16 is in the unit tests: P shards of them cannot sum back within float32 tolerance.)"""
    pairs = (("int32", "float32"), ("bool", "int64"), ("uint8", "int8"), ("int64", "float64"))
    return [
        Sample((make_array(rng, (2, 3), a), make_array(rng, (2, 3), b)), {"dim": 1})
        for a, b in pairs
    ]


_hstack_samples = _samples(
    _many((2,), (3,)),
    _many((), (2,)),
    _many((2, 1), (2, 3)),
    _many((2, 1, 2), (2, 2, 2)),
)
_vstack_samples = _samples(
    _many((3,), (3,)),
    _many((), ()),
    _many((1, 3), (2, 3)),
    _many((2, 2, 2), (1, 2, 2)),
)
_dstack_samples = _samples(
    _many((3,), (3,)),
    _many((), ()),
    _many((2, 3), (2, 3)),
    _many((2, 2, 1), (2, 2, 2)),
)
_column_stack_samples = _samples(
    _many((3,), (3,)),
    _many((), ()),
    _many((3,), (3, 2)),
)


# -- repeat, tile, repeat_interleave --------------------------------------------------------
_repeat_samples = _samples(
    _on((2, 3), 2, 1),
    _on((2, 3), 1, 3),
    _on((2, 3), 2, 1, 2),
    _on((3,), (2, 2)),
    _on((), 3),
    _on((2, 3), 0, 2),
    _on((0, 2), 2, 2),
)
_tile_samples = _samples(
    _on((2, 3), (2, 1)),
    _on((2, 3), (3,)),
    _on((3,), (2, 2)),
    _on((2, 2), ()),
)
_repeat_interleave_samples = _samples(
    _on((2, 3), 2),
    _on((2, 3), 2, dim=0),
    _on((2, 3), 3, 1),
    _on((2, 3), 0, dim=-1),
    _on((), 2),
)


def _repeat_interleave_tensor_samples(rng, dtype):
    x = make_array(rng, (3, 2), dtype)
    return [
        Sample((x, make_array(rng, (3,), "int64", 0, 3)), {"dim": 0}),
        Sample((x, make_array(rng, (2,), "int64", 0, 3)), {"dim": 1}),
        Sample((x, make_array(rng, (1,), "int64", 1, 3)), {"dim": 0}),
        Sample((x, make_array(rng, (6,), "int64", 0, 3))),
    ]


def _repeat_interleave_index_samples(rng, dtype):
    return [
        Sample((make_array(rng, (4,), dtype, 0, 3),)),
        Sample((make_array(rng, (0,), dtype),)),
        Sample((make_array(rng, (3,), dtype, 1, 3),)),
    ]


# -- flips and rolls ------------------------------------------------------------------------
_flip_samples = _samples(
    _on((2, 3, 4), (0,)),
    _on((2, 3, 4), (0, 2)),
    _on((2, 3, 4), [-1]),
    _on((2, 3), ()),
    _on((), (0,)),
    _on((0, 3), (0, 1)),
)
_roll_samples = _samples(
    _on((3, 4), 1),
    _on((3, 4), -2, 1),
    _on((3, 4), (1, 2), (0, 1)),
    _on((3, 4), (5, -1), dims=(1, 0)),
    _on((2, 3, 2), 1, -1),
    _on((3,), 4, 0),
    _on((0, 3), 1, 1),
)

# -- triangles and diagonals ----------------------------------------------------------------
_triangle_samples = _samples(
    _on((3, 4)),
    _on((4, 3), 1),
    _on((3, 4), -1),
    _on((2, 3, 3), diagonal=2),
    _on((3, 4), -5),
    _on((0, 3)),
)
_diagonal_samples = _samples(
    _on((3, 4)),
    _on((3, 4), 1),
    _on((3, 4), -2),
    _on((3, 4), 5),
    _on((2, 3, 4), 1, 0, 2),
    _on((2, 3, 4), offset=-1, dim1=-1, dim2=1),
)


def _diagonal_scatter_samples(rng, dtype):
    def pair(big, small, *args, **kwargs):
        return Sample((make_array(rng, big, dtype), make_array(rng, small, dtype), *args), kwargs)

    return [
        pair((3, 4), (3,)),
        pair((3, 4), (3,), 1),
        pair((3, 4), (2,), -1),
        pair((2, 3, 4), (3, 2), 1, 0, 2),
        pair((3, 4), (0,), 4),
    ]


_diag_embed_samples = _samples(
    _on((3,)),
    _on((2, 3)),
    _on((2, 3), 1),
    _on((2, 3), -1, 0, 2),
    _on((2, 3), offset=2, dim1=-1, dim2=0),
    _on((0,)),
)
_diag_samples = _samples(
    _on((3,)),
    _on((3,), 1),
    _on((3,), -2),
    _on((3, 4)),
    _on((3, 4), 2),
    _on((3, 4), -1),
    _on((3, 4), 4),
)


def _method(name, samples, **kwargs):
    """The record of an op PyTorch has only as a Tensor method (or property): `x.name(...)`."""

    def call(x, *args, **kw):
        f = getattr(x, name)
        return f(*args, **kw) if callable(f) else f

    return OpInfo(
        name,
        samples,
        op=call,
        torch=lambda torch, x, *args, **kw: call(x, *args, **kw),
        **kwargs,
    )


def _join(name, samples, **kwargs):
    """The record of a join: samples pass the tensors positionally, both libraries get a
    tuple of them (the harness converts top-level arrays only)."""
    return OpInfo(
        name,
        samples,
        op=lambda *xs, **kw: getattr(flow, name)(xs, **kw),
        torch=lambda torch, *xs, **kw: getattr(torch, name)(xs, **kw),
        **kwargs,
    )


RECORDS = [
    OpInfo("reshape", _reshape_samples, dtypes=DTYPES),
    _method("view", _reshape_samples, dtypes=DTYPES),
    _method("view_as", _samples(_many((2, 6), (3, 4)), _many((), (1,)))),
    OpInfo("flatten", _flatten_samples, dtypes=DTYPES),
    OpInfo("unflatten", _unflatten_samples, dtypes=DTYPES),
    OpInfo("squeeze", _squeeze_samples, dtypes=DTYPES),
    OpInfo("unsqueeze", _unsqueeze_samples, dtypes=DTYPES),
    OpInfo("atleast_1d", _atleast_samples),
    OpInfo("atleast_2d", _atleast_samples),
    OpInfo("atleast_3d", _atleast_samples),
    _method("expand", _expand_samples, dtypes=DTYPES),
    _method("expand_as", _expand_as_samples),
    OpInfo("broadcast_to", _broadcast_to_samples, dtypes=DTYPES),
    OpInfo("broadcast_tensors", _broadcast_tensors_samples),
    OpInfo("meshgrid", _meshgrid_samples, dtypes=("float32", "float64", "int64")),
    OpInfo("permute", _permute_samples, dtypes=DTYPES),
    OpInfo("transpose", _transpose_samples, dtypes=DTYPES),
    OpInfo("swapaxes", _transpose_samples),
    OpInfo("swapdims", _transpose_samples),
    OpInfo("t", _t_samples, dtypes=DTYPES),
    # NOTE: 2-d only: PyTorch warns on .T of other ranks (warnings are errors in the tests)
    _method("T", _samples(_on((2, 3)), _on((0, 4))), dtypes=DTYPES),
    _method("mT", _samples(_on((2, 3)), _on((2, 3, 4)), _on((2, 0, 1))), dtypes=DTYPES),
    OpInfo("movedim", _movedim_samples, dtypes=DTYPES),
    OpInfo("moveaxis", _movedim_samples),
    OpInfo("narrow", _narrow_samples, dtypes=DTYPES),
    OpInfo("select", _select_samples, dtypes=DTYPES),
    OpInfo("split", _split_samples, dtypes=DTYPES),
    OpInfo("chunk", _chunk_samples, dtypes=DTYPES),
    OpInfo("unbind", _unbind_samples, dtypes=DTYPES),
    OpInfo("tensor_split", _tensor_split_samples, dtypes=DTYPES),
    OpInfo("hsplit", _hsplit_samples),
    OpInfo("vsplit", _vsplit_samples),
    OpInfo("dsplit", _dsplit_samples),
    OpInfo("slice_scatter", _slice_scatter_samples, dtypes=DTYPES),
    OpInfo("select_scatter", _select_scatter_samples, dtypes=DTYPES),
    _join("cat", _cat_samples, dtypes=DTYPES),
    _join("cat", _mixed_samples, variant="promote", dtypes=("float32",)),
    _join("concat", _samples(_many((2, 3), (1, 3)))),
    _join("concatenate", _samples(_many((2, 3), (2, 1), dim=1))),
    _join("stack", _stack_samples, dtypes=DTYPES),
    _join("stack", _mixed_samples, variant="promote", dtypes=("float32",)),
    _join("hstack", _hstack_samples),
    _join("vstack", _vstack_samples),
    _join("row_stack", _vstack_samples),
    _join("dstack", _dstack_samples),
    _join("column_stack", _column_stack_samples),
    _method("repeat", _repeat_samples, dtypes=DTYPES),
    OpInfo("tile", _tile_samples, dtypes=DTYPES),
    OpInfo("repeat_interleave", _repeat_interleave_samples, dtypes=DTYPES),
    OpInfo(
        "repeat_interleave",
        _repeat_interleave_tensor_samples,
        variant="tensor_repeats",
        dtypes=DTYPES,
    ),
    OpInfo(
        "repeat_interleave",
        _repeat_interleave_index_samples,
        variant="index",
        dtypes=("int64", "int32"),
        grad=False,
    ),
    OpInfo("flip", _flip_samples, dtypes=DTYPES),
    OpInfo("fliplr", _samples(_on((2, 3)), _on((2, 3, 2)))),
    OpInfo("flipud", _samples(_on((3,)), _on((2, 3)))),
    OpInfo(
        "rot90",
        _samples(
            _on((2, 3)),
            _on((2, 3), 2),
            _on((2, 3), -1),
            _on((2, 3), 4),
            _on((2, 3, 4), 3, (2, 0)),
            _on((2, 3, 4), 1, [-1, -2]),
            _on((0, 3), 1),
        ),
        dtypes=DTYPES,
    ),
    OpInfo("roll", _roll_samples, dtypes=DTYPES),
    OpInfo("tril", _triangle_samples, dtypes=DTYPES),
    OpInfo("triu", _triangle_samples, dtypes=DTYPES),
    OpInfo("diagonal", _diagonal_samples, dtypes=DTYPES),
    OpInfo("diagonal_scatter", _diagonal_scatter_samples, dtypes=DTYPES),
    OpInfo("diag_embed", _diag_embed_samples, dtypes=DTYPES),
    OpInfo("diag", _diag_samples, dtypes=DTYPES),
]
