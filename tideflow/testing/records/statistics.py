"""Records of the statistics of samples (tideflow/ops/statistics.py): quantiles with every
interpolation, along a dim or over everything, with q a number or a tensor (whose gradient
PyTorch takes through the linear weights), NaNs kept or ignored; covariance with frequency and
importance weights; correlation; histograms with counted, weighted and density bins."""

import numpy as np

from ..opinfo import OpInfo, Sample, make_array

INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_samples(rng, dtype):
    def x(*shape):
        return make_array(rng, shape, dtype)

    # NOTE: no rank q * (n - 1) of a differentiated q is a whole number (the gradient in q
    # jumps there); the ends 0 and 1 are taken without gradients (gradcheck steps past them)
    qs = np.array([0.1, 0.3, 0.65, 0.9], dtype)
    ends = np.array([0.0, 1.0], dtype)
    return [
        Sample((x(2, 3, 4), ends), {"dim": 2}, grad=False),
        Sample((x(2, 3, 4), 0.3)),
        Sample((x(2, 3, 4), 0.5), {"dim": 1}),
        Sample((x(2, 3, 4), 0.75), {"dim": -1, "keepdim": True}),
        Sample((x(2, 3, 4), qs), {"dim": 0}),
        Sample((x(3, 4), qs), {"keepdim": True}),
        Sample((x(5), np.array(0.4, dtype)), {"dim": 0}),
        Sample((np.asarray(x()), 0.5)),
        Sample((np.asarray(x()), qs), {"dim": 0, "keepdim": True}),
        Sample((x(1, 4), 0.5), {"dim": 0}),
        *(Sample((x(3, 5), qs), {"dim": 1, "interpolation": i}) for i in INTERPOLATIONS),
    ]


def _with_nans(rng, dtype):
    """Rows without NaN, with some and of NaN only; NaN outputs have no gradient to check."""
    a = make_array(rng, (4, 6), dtype)
    a[1, [0, 3]] = np.nan
    a[2, :] = np.nan
    return a


def _nanquantile_samples(rng, dtype):
    qs = np.array([0.1, 0.45, 0.9], dtype)  # ranks 0.4, 1.8, 3.6: no kink in q
    finite = [
        Sample((make_array(rng, (3, 5), dtype), qs), {"dim": 1, "interpolation": i})
        for i in INTERPOLATIONS
    ]
    return [
        *finite,
        Sample((_with_nans(rng, dtype), qs), {"dim": 1}, grad=False),
        Sample((_with_nans(rng, dtype), 0.5), {"dim": 0, "interpolation": "nearest"}, grad=False),
        Sample((_with_nans(rng, dtype), 0.3), grad=False),
    ]


def _quantile_nan_samples(rng, dtype):
    return [
        Sample((_with_nans(rng, dtype), 0.5), {"dim": 1}, grad=False),
        Sample((_with_nans(rng, dtype), 0.5), grad=False),
    ]


def _cov_samples(rng, dtype):
    def x(*shape):
        return make_array(rng, shape, dtype)

    frequencies = rng.integers(0, 4, size=6)
    frequencies[0] = 2  # at least one observation counts
    importances = rng.uniform(0.5, 2.0, size=6).astype(dtype)
    return [
        Sample((x(3, 6),)),
        Sample((x(6),)),
        Sample((x(1, 6),)),
        Sample((x(3, 6),), {"correction": 0}),
        Sample((x(2, 6),), {"correction": 2}),
        Sample((x(3, 6),), {"fweights": frequencies}),
        Sample((x(3, 6),), {"aweights": importances}),
        Sample((x(3, 6),), {"fweights": frequencies, "aweights": importances, "correction": 0}),
    ]


def _cov_with_weights(name):
    """Weights are keyword arguments, which the harness passes as they are: make them tensors
    on each side."""

    def tensorize(module, kwargs):
        return {
            k: (module.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v)
            for k, v in kwargs.items()
        }

    def op(x, **kwargs):
        import tideflow

        return getattr(tideflow, name)(x, **tensorize(tideflow, kwargs))

    def oracle(torch, x, **kwargs):
        return getattr(torch, name)(x, **tensorize(torch, kwargs))

    return {"op": op, "torch": oracle}


def _corrcoef_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 6), dtype),)),
        Sample((make_array(rng, (6,), dtype),)),
        Sample((make_array(rng, (2, 10), dtype),)),
    ]


def _integer_observations(rng, dtype):
    return [Sample((make_array(rng, (3, 6), dtype, -5, 5),))]


def _histogram_samples(rng, dtype):
    data = make_array(rng, (4, 5), dtype)
    edges = np.sort(make_array(rng, (6,), dtype, -2.5, 2.5))
    weight = make_array(rng, (4, 5), dtype, 0.0, 2.0)
    return [
        Sample((data,), {"bins": 7}),
        Sample((data, 4), {"range": (-1.0, 1.0)}),
        Sample((data, edges)),
        Sample((data, edges), {"weight": weight}),
        Sample((data, 5), {"weight": weight, "density": True}),
        Sample((data, edges), {"density": True}),
        Sample((np.full((3,), 1.5, dtype), 4)),  # one point: widened by 0.5 each side
        Sample((np.zeros((0,), dtype), 3)),
        Sample((np.asarray(make_array(rng, (), dtype)), 2)),
        Sample((data.reshape(-1)[[0, 0, 3, 7]], 3)),  # values on the edges
    ]


def _histogram_call(module, x, bins=100, **kwargs):
    """`weight` is a keyword tensor: made one on each side."""
    if isinstance(kwargs.get("weight"), np.ndarray):
        kwargs["weight"] = module.from_numpy(kwargs["weight"].copy())
    return module.histogram(x, bins, **kwargs)


def _histogram_op(x, bins=100, **kwargs):
    import tideflow

    return _histogram_call(tideflow, x, bins, **kwargs)


def _histogramdd_samples(rng, dtype):
    points = make_array(rng, (12, 2), dtype)
    weight = make_array(rng, (12,), dtype, 0.0, 2.0)
    return [
        Sample((points,), {"bins": 3}),
        Sample((points,), {"bins": [2, 4], "range": [-1.0, 1.0, -2.0, 2.0]}),
        Sample((points,), {"bins": (3, 2), "weight": weight, "density": True}),
        Sample((make_array(rng, (2, 5, 3), dtype),), {"bins": 2}),
        Sample((make_array(rng, (6, 1), dtype),), {"bins": [4], "weight": weight[:6]}),
        Sample((np.zeros((0, 2), dtype),), {"bins": 2}),
    ]


def _histogramdd_edge_samples(rng, dtype):
    def edges(n):
        return np.sort(make_array(rng, (n,), dtype, -2.5, 2.5))

    points = make_array(rng, (10, 2), dtype)
    return [
        Sample((points, edges(4), edges(3))),
        Sample((points, edges(2), edges(5)), {"density": True}),
    ]


def _histogramdd_call(module, x, *edges, **kwargs):
    """Edges given positionally (so the harness makes them tensors) and a keyword `weight`
    made a tensor on each side."""
    if isinstance(kwargs.get("weight"), np.ndarray):
        kwargs["weight"] = module.from_numpy(kwargs["weight"].copy())
    if edges:
        kwargs["bins"] = list(edges)
    return module.histogramdd(x, **kwargs)


def _histogramdd_op(x, *edges, **kwargs):
    import tideflow

    return _histogramdd_call(tideflow, x, *edges, **kwargs)


RECORDS = [
    OpInfo("quantile", _quantile_samples),
    OpInfo("quantile", _quantile_nan_samples, variant="nan", grad=False),
    OpInfo("nanquantile", _nanquantile_samples),
    OpInfo("cov", _cov_samples, **_cov_with_weights("cov")),
    OpInfo("cov", _integer_observations, variant="integer", dtypes=("int64",), grad=False),
    OpInfo("corrcoef", _corrcoef_samples),
    OpInfo("corrcoef", _integer_observations, variant="integer", dtypes=("int64",), grad=False),
    OpInfo(
        "histogram",
        _histogram_samples,
        op=_histogram_op,
        torch=_histogram_call,
        grad=False,
    ),
    OpInfo(
        "histogramdd",
        _histogramdd_samples,
        op=_histogramdd_op,
        torch=_histogramdd_call,
        grad=False,
    ),
    OpInfo(
        "histogramdd",
        _histogramdd_edge_samples,
        variant="edges",
        op=_histogramdd_op,
        torch=_histogramdd_call,
        grad=False,
    ),
]
