from ..opinfo import ALL_FLOATS, OpInfo, Sample


def _sized(*sizes):
    def build(rng, dtype):
        return [Sample((s,), {"dtype": dtype}) for s in sizes]

    return build


def _dtype_kw(fn):
    """The torch oracle gets a torch dtype where the sample has a dtype name."""

    def call(t, *args, dtype, **kwargs):
        return fn(t, *args, dtype=getattr(t, dtype), **kwargs)

    return call


def _arange_samples(rng, dtype):
    args = [(5,), (1, 7, 2), (3, 0, -1)]
    if dtype.startswith("float"):
        args.append((0.5, 2.0, 0.25))
    return [Sample(a, {"dtype": dtype}) for a in args]


def _linspace_samples(rng, dtype):
    return [Sample((0, 1, 5), {"dtype": dtype}), Sample((-2, 3, 1), {"dtype": dtype})]


def _eye_samples(rng, dtype):
    return [Sample((3,), {"dtype": dtype}), Sample((2, 4), {"dtype": dtype})]


_DTYPES = (*ALL_FLOATS, "int64", "bool")
RECORDS = [
    OpInfo(
        "zeros",
        _sized((2, 3), (0,), ()),
        torch=_dtype_kw(lambda t, s, **k: t.zeros(s, **k)),
        dtypes=_DTYPES,
        grad=False,
    ),
    OpInfo(
        "ones",
        _sized((2, 3), (4,)),
        torch=_dtype_kw(lambda t, s, **k: t.ones(s, **k)),
        dtypes=_DTYPES,
        grad=False,
    ),
    OpInfo(
        "full",
        lambda rng, dt: [Sample(((2, 3), 1), {"dtype": dt})],
        torch=_dtype_kw(lambda t, s, v, **k: t.full(s, v, **k)),
        dtypes=_DTYPES,
        grad=False,
    ),
    OpInfo(
        "arange",
        _arange_samples,
        torch=_dtype_kw(lambda t, *a, **k: t.arange(*a, **k)),
        dtypes=("float32", "float64", "int64"),
        grad=False,
    ),
    OpInfo(
        "linspace",
        _linspace_samples,
        torch=_dtype_kw(lambda t, *a, **k: t.linspace(*a, **k)),
        dtypes=("float32", "float64"),
        grad=False,
    ),
    OpInfo(
        "eye",
        _eye_samples,
        torch=_dtype_kw(lambda t, *a, **k: t.eye(*a, **k)),
        dtypes=_DTYPES,
        grad=False,
    ),
]
