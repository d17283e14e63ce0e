import math

import numpy as np

from ..accuracy import HALVES
from ..harness import resolve
from ..opinfo import ALL_FLOATS, FLOATS, INTS, OpInfo, Sample, make_array, reduction_samples

DIMS = (None, 0, 1, -1, (0, 2))
SINGLE_DIMS = (None, 0, 1, -1)


def _samples(
    dims=DIMS,
    *,
    low=-3.0,
    high=3.0,
    prepare=None,
    keepdim=True,
    scalar=True,
    scalar_dim=None,
    grad=True,
    **kwargs,
):
    """`x` of shape (2, 3, 4) reduced over each of `dims` (None: the dim kwarg is left out),
    also with keepdim=True; then a 0-d input (`scalar_dim` as its dim) and a 1-d input over
    dim 0. `prepare(x, rng)` plants special values (NaN, zeros, ties) in each input;
    `grad=False` marks the samples as not to be differentiated."""

    def build(rng, dtype):
        def arr(shape):
            x = np.asarray(make_array(rng, shape, dtype, low, high))  # 0-d bool: a NumPy scalar
            return x if prepare is None else prepare(x, rng)

        out = []
        for d in dims:
            kw = dict(kwargs) if d is None else dict(kwargs, dim=d)
            x = arr((2, 3, 4))
            out.append(Sample((x,), kw, grad))
            if keepdim and d is not None:
                out.append(Sample((x,), dict(kw, keepdim=True), grad))
        if scalar:
            kw = dict(kwargs) if scalar_dim is None else dict(kwargs, dim=scalar_dim)
            out.append(Sample((arr(()),), kw, grad))
        out.append(Sample((arr((5,)),), dict(kwargs, dim=0), grad))
        return out

    return build


def _plant(value, count=3):
    """prepare= hook: `count` random positions set to `value`."""

    def prepare(x, rng):
        if x.size == 0 or (math.isnan(value) and x.dtype.kind != "f"):
            return x
        flat = x.reshape(-1).copy()
        flat[rng.choice(flat.size, min(count, flat.size), replace=False)] = value
        return flat.reshape(x.shape)

    return prepare


def _ties(x, rng):
    """Small integer values (as x's dtype): many equal elements in every slice."""
    return rng.integers(-1, 2, size=x.shape).astype(x.dtype)


def _empty(dims, **kwargs):
    """Inputs with a zero-size dim, reduced over (shape, dim) pairs."""

    def build(rng, dtype):
        return [Sample((make_array(rng, shape, dtype),), dict(kwargs, dim=d)) for shape, d in dims]

    return build


def _with_dtype(samples, dtype):
    """The samples of `samples` with dtype=`dtype` (a name; see `_torch_dtype_kw`)."""

    def build(rng, dt):
        return [Sample(s.args, dict(s.kwargs, dtype=dtype), s.grad) for s in samples(rng, dt)]

    return build


def _torch_dtype_kw(name):
    """torch.<name> as the oracle, with the sample's dtype name as a torch dtype."""

    def call(t, *args, dtype, **kwargs):
        return resolve(t, name)(*args, dtype=getattr(t, dtype), **kwargs)

    return call


def _sum_to_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), (1, 4))),
        Sample((make_array(rng, (2, 3, 4), dtype), (3, 1))),
        Sample((make_array(rng, (3, 4), dtype), (3, 4))),
    ]


def _var_samples(rng, dtype):
    x = make_array(rng, (2, 3, 4), dtype)
    return [
        Sample((x,)),
        Sample((x,), {"dim": 1}),
        Sample((x,), {"dim": (0, 2), "keepdim": True}),
        Sample((x,), {"dim": -1, "correction": 0}),
        Sample((x,), {"dim": (1, 2), "correction": 2}),
        Sample((x,), {"dim": 0, "unbiased": False}),
        Sample((x,), {"correction": 0.5}),
        Sample((make_array(rng, (), dtype),), {"correction": 0}),
        Sample((make_array(rng, (5,), dtype),), {"dim": 0}),
    ]


def _select_samples(prepare=None, dims=(0, 1, -1)):
    """max/min/median/mode along one dim (an int), keepdim both ways, plus 0-d and 1-d."""
    return _samples(dims, prepare=prepare, scalar_dim=0)


def _norm_samples(ords, dims=(None, 1, (0, 2)), key="ord", low=-3.0, high=3.0):
    def build(rng, dtype):
        out = []
        for o in ords:
            for d in dims:
                x = make_array(rng, (2, 3, 4), dtype, low, high)
                kw = {key: o} if d is None else {key: o, "dim": d}
                out.append(Sample((x,), kw))
            out.append(
                Sample(
                    (make_array(rng, (2, 3, 4), dtype, low, high),),
                    {key: o, "dim": -1, "keepdim": True},
                )
            )
        return out

    return build


def _matrix_norm_samples(ords):
    def build(rng, dtype):
        out = []
        for o in ords:
            out.append(Sample((make_array(rng, (3, 4), dtype),), {"ord": o}))
            out.append(Sample((make_array(rng, (2, 3, 2), dtype),), {"ord": o, "dim": (0, 2)}))
            out.append(Sample((make_array(rng, (2, 2, 3), dtype),), {"ord": o, "keepdim": True}))
        return out

    return build


def _linalg_norm_samples(rng, dtype):
    return [
        Sample((make_array(rng, (2, 3, 4), dtype),)),
        Sample((make_array(rng, (2, 3, 4), dtype),), {"keepdim": True}),
        Sample((make_array(rng, (5,), dtype),), {"ord": 1}),
        Sample((make_array(rng, (3, 4), dtype),), {"ord": math.inf}),
        Sample((make_array(rng, (3, 4), dtype),), {"ord": "fro"}),
        Sample((make_array(rng, (2, 3, 4), dtype),), {"ord": 3, "dim": 1}),
        Sample((make_array(rng, (2, 3, 4), dtype),), {"ord": -1, "dim": (0, 2)}),
        *(  # NOTE: PyTorch has no half-precision singular values (nor has tideflow)
            [] if dtype in HALVES else [Sample((make_array(rng, (3, 4), dtype),), {"ord": "nuc"})]
        ),
    ]


def _beyond_half_sums(rng, dtype):
    """Means of values near 1000 (and NaNs) whose sum passes float16's largest value, 65504:
    a mean that sums in the input's dtype overflows."""
    x = _plant(np.nan)(make_array(rng, (2, 100), dtype, 900.0, 1100.0), rng)
    return [Sample((x,), {"dim": 1}), Sample((x,))]


def _near_zero_logsumexp(rng, dtype):
    """Rows of n values near log(1/n), whose logsumexp is near 0: rounding log(sum(exp)) to
    the input's dtype before adding the max back would leave no correct digit."""
    return [
        Sample(
            (make_array(rng, (3, n), dtype, math.log(1 / n) - 0.05, math.log(1 / n) + 0.05),),
            {"dim": 1},
        )
        for n in (4, 16)
    ]


def _logical_samples(rng, dtype):
    def arr(shape):
        # mostly non-zero, so all() is not trivially False
        return (
            make_array(rng, shape, dtype, 0, 4)
            if dtype != "bool"
            else np.asarray(rng.random(shape) < 0.8)
        )

    out = [
        Sample((arr((2, 3, 4)),), kw) for kw in ({}, {"dim": 1}, {"dim": (0, 2), "keepdim": True})
    ]
    out += [Sample((arr(()),)), Sample((arr((0, 3)),), {"dim": 0}), Sample((arr((0, 3)),))]
    return out


def _renorm_samples(rng, dtype):
    """Slices on both sides of maxnorm, every norm order PyTorch's tests use."""

    def x(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((x(3, 4), 2, 0, 2.0)),
        Sample((x(3, 4), 1, 1, 3.0)),
        Sample((x(2, 3, 4), 3, -1, 2.5)),
        Sample((x(2, 3, 4), 2.5, 1, 1e3)),  # nothing to scale
        Sample((x(2, 3, 4), float("inf"), 0, 1.0)),
        Sample((x(3, 4), 2, 0, 0.0)),
        Sample((x(0, 4), 2, 1, 1.0)),
    ]


def _scan_samples(prepare=None, **kwargs):
    def build(rng, dtype):
        def arr(shape):
            x = np.asarray(make_array(rng, shape, dtype))  # 0-d bool: a NumPy scalar
            return x if prepare is None else prepare(x, rng)

        out = [Sample((arr((2, 3, 4)),), dict(kwargs, dim=d)) for d in (0, 1, -1)]
        out += [
            Sample((arr(()),), dict(kwargs, dim=0)),
            Sample((arr((6,)),), dict(kwargs, dim=0)),
            Sample((arr((0, 3)),), dict(kwargs, dim=1)),
        ]
        return out

    return build


def _one_zero_per_row(x, rng):
    """A zero in each row of the last dim (cumprod/prod's special case), two in row 0."""
    x = x.copy()
    if x.ndim == 0 or x.size == 0:
        return x
    flat = x.reshape(-1, x.shape[-1])
    flat[np.arange(flat.shape[0]), rng.integers(0, x.shape[-1], flat.shape[0])] = 0
    flat[0, -1] = 0
    return flat.reshape(x.shape)


def _distinct_ints(x, rng):
    """A permutation of distinct values: the median's index is unambiguous."""
    return rng.permutation(x.size).reshape(x.shape).astype(x.dtype)


def _mode_ints(x, rng):
    return rng.integers(0, 3, size=x.shape).astype(x.dtype)


def _max_other(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), make_array(rng, (3, 4), dtype))),
        Sample((make_array(rng, (3, 4), dtype), make_array(rng, (4,), dtype))),
    ]


INT_AND_BOOL = (*INTS, "bool")

RECORDS = [
    # -- sums ----------------------------------------------------------------------------
    OpInfo("sum", reduction_samples(), dtypes=ALL_FLOATS),
    OpInfo("sum", _samples(), variant="int", dtypes=INT_AND_BOOL, grad=False),
    OpInfo(
        "sum",
        _with_dtype(_samples((None, 1)), "float64"),
        variant="dtype",
        torch=_torch_dtype_kw("sum"),
    ),
    OpInfo("sum", _empty([((0, 3), 0), ((0, 3), 1), ((2, 0), None)]), variant="empty"),
    OpInfo("sum_to_size", _sum_to_samples, torch=lambda t, x, s: x.sum_to_size(s)),
    OpInfo("nansum", _samples(prepare=_plant(np.nan)), dtypes=ALL_FLOATS),
    OpInfo("nansum", _samples(), variant="int", dtypes=INTS, grad=False),
    # -- means ---------------------------------------------------------------------------
    OpInfo("mean", _samples(), dtypes=ALL_FLOATS),
    OpInfo(
        "mean",
        _with_dtype(_samples((None, (0, 1))), "float64"),
        variant="dtype",
        torch=_torch_dtype_kw("mean"),
        dtypes=(*FLOATS, *INTS),
    ),
    OpInfo("mean", _empty([((0, 3), 1), ((2, 0), 1)]), variant="empty"),
    OpInfo("nanmean", _samples(prepare=_plant(np.nan)), dtypes=ALL_FLOATS),
    OpInfo("nanmean", _beyond_half_sums, variant="beyond_half_sums", dtypes=ALL_FLOATS),
    # -- products ------------------------------------------------------------------------
    OpInfo("prod", _samples(SINGLE_DIMS, low=0.5, high=2.0), dtypes=ALL_FLOATS),
    OpInfo("prod", _samples(SINGLE_DIMS, prepare=_plant(0.0, 1)), variant="one_zero"),
    OpInfo("prod", _samples(SINGLE_DIMS, prepare=_plant(0.0, 2)), variant="two_zeros"),
    OpInfo("prod", _samples(SINGLE_DIMS), variant="int", dtypes=INT_AND_BOOL, grad=False),
    OpInfo(
        "prod",
        _with_dtype(_samples((None, 1), low=0.5, high=2.0), "float64"),
        variant="dtype",
        torch=_torch_dtype_kw("prod"),
        dtypes=(*FLOATS, *INTS),
    ),
    # -- spread --------------------------------------------------------------------------
    OpInfo("var", _var_samples, dtypes=ALL_FLOATS),
    OpInfo("std", _var_samples, dtypes=ALL_FLOATS),
    OpInfo("var_mean", _var_samples),
    OpInfo("std_mean", _var_samples),
    OpInfo(
        "std",
        lambda rng, dt: [Sample((np.ones((2, 3), dt),), {"dim": 1})],
        variant="constant",
        gradcheck=False,  # std is not differentiable where it is 0; PyTorch's gradient is 0
    ),
    # -- extremes ------------------------------------------------------------------------
    OpInfo("amax", _samples((None, 0, 1, -1, (0, 2), ())), dtypes=ALL_FLOATS),
    OpInfo("amin", _samples((None, 0, 1, -1, (0, 2), ()))),
    OpInfo("amax", _samples(prepare=_ties), variant="ties", gradcheck=False),
    OpInfo("amin", _samples(prepare=_ties), variant="ties", gradcheck=False),
    OpInfo("amax", _samples((None, 1, (0, 2))), variant="int", dtypes=INT_AND_BOOL, grad=False),
    # NOTE: amax's gradient at a NaN maximum follows torch.max(input), not torch.amax (NaN)
    OpInfo("amax", _samples(prepare=_plant(np.nan, 2), grad=False), variant="nan"),
    OpInfo(
        "max",
        _samples((None,), prepare=_plant(np.nan, 2), scalar=False),
        variant="nan_full",
        gradcheck=False,
    ),
    OpInfo("aminmax", _samples((None, 1), scalar=False, dim=None)),
    OpInfo("max", _samples((None,), scalar=False)),
    OpInfo("min", _samples((None,), scalar=False)),
    OpInfo("max", _samples((None,), prepare=_ties, scalar=False), variant="ties", gradcheck=False),
    OpInfo("max", _max_other, variant="other"),
    OpInfo("min", _max_other, variant="other"),
    OpInfo("max", _select_samples(), variant="dim", dtypes=ALL_FLOATS),
    OpInfo("min", _select_samples(), variant="dim"),
    OpInfo("max", _select_samples(_ties), variant="dim_ties", gradcheck=False),
    OpInfo("max", _select_samples(), variant="int", dtypes=INT_AND_BOOL, grad=False),
    OpInfo("max", _select_samples(_plant(np.nan, 2)), variant="nan", gradcheck=False),
    OpInfo("argmax", _samples((None, 0, 1, -1), scalar_dim=0), grad=False),
    OpInfo("argmin", _samples((None, 0, 1, -1), scalar_dim=0), grad=False),
    OpInfo(
        "argmax",
        _samples((None, 1), prepare=_ties),
        variant="ties",
        dtypes=(*FLOATS, *INTS),
        grad=False,
    ),
    OpInfo(
        "logsumexp",
        _samples((0, 1, -1, (0, 2)), scalar_dim=0),
        dtypes=ALL_FLOATS,
    ),
    OpInfo(
        "logsumexp",
        _samples((1, (0, 2)), scalar=False, prepare=_plant(-math.inf, 3)),
        variant="neg_inf",
    ),
    OpInfo("logsumexp", _near_zero_logsumexp, variant="near_zero", dtypes=ALL_FLOATS),
    OpInfo(
        "logsumexp",
        _samples((0, 1), scalar=False),
        variant="int",
        dtypes=INTS,
        grad=False,
        rtol=1.3e-6,
        atol=1e-5,
    ),
    # -- norms ---------------------------------------------------------------------------
    OpInfo(
        "norm",
        _norm_samples(("fro", 2, 1, 3, 0.5, 0, math.inf, -math.inf), key="p"),
        dtypes=ALL_FLOATS,
    ),
    OpInfo(
        "norm",
        lambda rng, dt: [
            Sample((make_array(rng, (3, 4), dt),), {"p": "nuc"}),
            Sample((make_array(rng, (2, 3, 2), dt),), {"p": "nuc", "dim": (0, 2)}),
        ],
        variant="nuc",
        rtol=1e-4,
        atol=1e-5,
    ),
    OpInfo(
        "linalg.vector_norm",
        _norm_samples((2, 1, 3, -1.5, 0, math.inf, -math.inf)),
        dtypes=ALL_FLOATS,
    ),
    OpInfo(
        "linalg.vector_norm",
        lambda rng, dt: [
            Sample((np.zeros((2, 3), dt),), {"ord": o, "dim": 1}) for o in (2, 1, 3, math.inf)
        ],
        variant="at_zero",
        gradcheck=False,  # the norm is not differentiable at 0; PyTorch's choices are checked
    ),
    OpInfo(
        "linalg.vector_norm",
        _with_dtype(_norm_samples((2,), dims=(None, 1)), "float64"),
        variant="dtype",
        torch=_torch_dtype_kw("linalg.vector_norm"),
        dtypes=("float32",),
    ),
    OpInfo(
        "linalg.matrix_norm",
        _matrix_norm_samples(("fro", 1, -1, math.inf, -math.inf)),
        dtypes=ALL_FLOATS,
    ),
    OpInfo(
        "linalg.matrix_norm",
        _matrix_norm_samples(("nuc", 2, -2)),
        variant="singular",
        rtol=1e-4,  # float32 singular values from the Gram matrix's eigenvalues
        atol=1e-5,
    ),
    OpInfo(  # 'nuc': as above
        "linalg.norm", _linalg_norm_samples, dtypes=ALL_FLOATS, rtol=1e-4, atol=1e-5
    ),
    # -- logical -------------------------------------------------------------------------
    OpInfo("all", _logical_samples, dtypes=("bool", "float32", "int64", "uint8"), grad=False),
    OpInfo("any", _logical_samples, dtypes=("bool", "float32", "int64", "uint8"), grad=False),
    OpInfo(
        "count_nonzero",
        _samples((None, 0, (0, 2)), keepdim=False, prepare=_plant(0.0, 6)),
        dtypes=("float32", "int64", "bool"),
        grad=False,
    ),
    # -- scans ---------------------------------------------------------------------------
    OpInfo("cumsum", _scan_samples(), dtypes=ALL_FLOATS),
    OpInfo("cumsum", _scan_samples(), variant="int", dtypes=INT_AND_BOOL, grad=False),
    OpInfo(
        "cumsum",
        _with_dtype(_scan_samples(), "float64"),
        variant="dtype",
        torch=_torch_dtype_kw("cumsum"),
        dtypes=("float32", "int32"),
    ),
    OpInfo("cumprod", _scan_samples(), dtypes=ALL_FLOATS),
    OpInfo("cumprod", _scan_samples(prepare=_one_zero_per_row), variant="zeros"),
    OpInfo("cumprod", _scan_samples(), variant="int", dtypes=INT_AND_BOOL, grad=False),
    OpInfo("cummax", _scan_samples(), dtypes=ALL_FLOATS),
    OpInfo("cummin", _scan_samples()),
    OpInfo("logcumsumexp", _scan_samples(), dtypes=ALL_FLOATS),
    # exp would overflow float32 past 88: the scan must not take it
    OpInfo(
        "logcumsumexp",
        _scan_samples(prepare=lambda x, rng: np.asarray(x * 40)),
        variant="wide",
    ),
    OpInfo(
        "logcumsumexp",
        _scan_samples(prepare=_plant(-np.inf, 2)),
        variant="neg_inf",
        gradcheck=False,
    ),
    OpInfo("renorm", _renorm_samples, dtypes=ALL_FLOATS),
    OpInfo(
        "renorm",
        _renorm_samples,
        variant="method",
        op=lambda x, *args: x.renorm(*args),
        torch=lambda torch, x, *args: x.renorm(*args),
    ),
    OpInfo(
        "cummax",
        _scan_samples(prepare=_ties),
        variant="ties",
        dtypes=(*FLOATS, *INTS),
        gradcheck=False,
    ),
    OpInfo("cummin", _scan_samples(prepare=_plant(np.nan, 2)), variant="nan", gradcheck=False),
    # -- order statistics ----------------------------------------------------------------
    OpInfo("median", _samples((None,), scalar=True)),
    OpInfo("median", _select_samples(), variant="dim", dtypes=ALL_FLOATS),
    OpInfo("median", _select_samples(_distinct_ints), variant="int", dtypes=INTS, grad=False),
    OpInfo("median", _select_samples(_plant(np.nan, 2)), variant="nan", gradcheck=False),
    OpInfo("median", _samples((None,), prepare=_ties), variant="ties", gradcheck=False),
    OpInfo("nanmedian", _samples((None,))),
    OpInfo(
        "nanmedian", _samples((None,), prepare=_plant(np.nan, 2)), variant="nan", gradcheck=False
    ),
    OpInfo(
        "nanmedian",
        _select_samples(_plant(np.nan, 2), dims=(1, -1)),
        variant="dim",
        gradcheck=False,  # a NaN 0-d input: finite differences of NaN
    ),
    OpInfo("mode", _select_samples(_mode_ints), dtypes=(*ALL_FLOATS, *INTS), gradcheck=False),
]
