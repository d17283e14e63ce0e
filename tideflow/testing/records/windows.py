"""Window functions against PyTorch's: periodic and symmetric, lengths 0, 1, 2 and more,
their extra parameters."""

from ..opinfo import FLOATS, OpInfo, Sample


def _samples(*extra):
    def build(rng, dtype):
        return [
            Sample((n, periodic, *params), {"dtype": dtype})
            for n in (0, 1, 2, 7)
            for periodic in (True, False)
            for params in ((), *extra)
        ]

    return build


def _record(name, *extra):
    return OpInfo(
        name,
        _samples(*extra),
        torch=lambda t, *args, dtype, **kw: getattr(t, name)(*args, dtype=getattr(t, dtype), **kw),
        dtypes=FLOATS,
        grad=False,
    )


RECORDS = [
    _record("hann_window"),
    _record("hamming_window", (0.5, 0.5), (0.6, 0.3)),
    _record("blackman_window"),
    _record("bartlett_window"),
    _record("kaiser_window", (5.0,), (0.0,)),
]
