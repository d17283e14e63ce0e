from ..opinfo import OpInfo, Sample, make_array


def _reshape_samples(rng, dtype):
    return [
        Sample((make_array(rng, (2, 3, 4), dtype), (6, 4))),
        Sample((make_array(rng, (2, 3, 4), dtype), (2, -1))),
        Sample((make_array(rng, (4,), dtype), (2, 2))),
        Sample((make_array(rng, (), dtype), (1,))),
        Sample((make_array(rng, (0, 3), dtype), (3, 0))),
    ]


def _expand_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 1), dtype), (3, 4))),
        Sample((make_array(rng, (1,), dtype), (2, 3, 5))),
        Sample((make_array(rng, (2, 1, 4), dtype), (-1, 3, -1))),
    ]


RECORDS = [
    OpInfo("reshape", _reshape_samples),
    OpInfo("view", _reshape_samples, torch=lambda t, x, s: x.view(s)),
    OpInfo("expand", _expand_samples, torch=lambda t, x, s: x.expand(s)),
]
