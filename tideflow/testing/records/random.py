"""Random samplers: values are not compared (`random=True`); tests/unit/test_random.py checks
reproducibility and statistics. The records keep meta and registry coverage honest."""

from ..opinfo import OpInfo, Sample, make_array


def _sized(*sizes):
    return lambda rng, dtype: [Sample((s,), {"dtype": dtype}) for s in sizes]


RECORDS = [
    OpInfo("rand", _sized((2, 3), (0,)), random=True, grad=False),
    OpInfo("randn", _sized((2, 3), ()), random=True, grad=False),
    OpInfo(
        "randint",
        lambda rng, dt: [Sample((0, 5, (3, 2))), Sample((7, (4,)))],
        random=True,
        grad=False,
        dtypes=("int64",),
    ),
    OpInfo("randperm", lambda rng, dt: [Sample((6,))], random=True, grad=False, dtypes=("int64",)),
    OpInfo("normal", lambda rng, dt: [Sample((1.0, 2.0, (3,)))], random=True, grad=False),
    OpInfo(
        "bernoulli",
        lambda rng, dt: [Sample((make_array(rng, (3, 4), dt, 0, 1),))],
        random=True,
        grad=False,
    ),
    OpInfo(
        "multinomial",
        lambda rng, dt: [
            Sample((make_array(rng, (5,), dt, 0.1, 1), 3)),
            Sample((make_array(rng, (2, 4), dt, 0.1, 1), 6, True)),
        ],
        random=True,
        grad=False,
    ),
    OpInfo(
        "uniform_",
        lambda rng, dt: [Sample((make_array(rng, (3, 4), dt),))],
        op=lambda x: x.uniform_(-1, 1),
        random=True,
        grad=False,
    ),
]
