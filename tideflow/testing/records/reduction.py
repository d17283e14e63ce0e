from ..opinfo import OpInfo, Sample, make_array, reduction_samples


def _sum_to_samples(rng, dtype):
    return [
        Sample((make_array(rng, (3, 4), dtype), (1, 4))),
        Sample((make_array(rng, (2, 3, 4), dtype), (3, 1))),
        Sample((make_array(rng, (3, 4), dtype), (3, 4))),
    ]


RECORDS = [
    OpInfo("sum", reduction_samples()),
    OpInfo("sum_to_size", _sum_to_samples, torch=lambda t, x, s: x.sum_to_size(s)),
]
