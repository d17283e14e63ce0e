from ..opinfo import OpInfo, binary_samples

RECORDS = [
    OpInfo("add", binary_samples()),
    OpInfo("add", binary_samples(alpha=2), variant="alpha"),
    OpInfo("sub", binary_samples()),
    OpInfo("mul", binary_samples()),
    OpInfo("div", binary_samples(low=0.5)),
]
