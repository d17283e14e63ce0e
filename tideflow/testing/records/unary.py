from ..opinfo import OpInfo, unary_samples

RECORDS = [
    OpInfo("neg", unary_samples()),
    OpInfo("exp", unary_samples()),
]
