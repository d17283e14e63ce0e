from ..opinfo import ALL_FLOATS, OpInfo, unary_samples

RECORDS = [
    OpInfo("clone", unary_samples()),
    OpInfo(
        "contiguous",
        unary_samples(shapes=((3, 4), (2, 3, 4))),
        op=lambda x: x.expand(2, *x.shape).contiguous(),
        torch=lambda t, x: x.expand(2, *x.shape).contiguous(),
    ),
    OpInfo(
        "cast",
        unary_samples(dtype="float64"),
        torch=lambda t, x, dtype: x.to(getattr(t, dtype)),
        dtypes=ALL_FLOATS,
    ),
]
