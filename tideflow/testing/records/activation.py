"""Records of the `nn.functional` activations (`tideflow.ops.activation`). Their `inplace=True`
forms are tested in tests/unit/test_unary_ops.py: an in-place call overwrites the output of
the op that made its input, which the SBP check would then compare."""

from ...ops.activation import gelu_backward
from ..opinfo import OpInfo, Sample, make_array
from .unary import ALL_FLOATS, NUMERIC, samples


def _f(name: str, samples, **kwargs) -> OpInfo:
    return OpInfo(f"nn.functional.{name}", samples, **kwargs)


def _gelu_backward_samples(low=-3.0, high=3.0, **kw):
    def build(rng, dtype):
        shapes = [(), (5,), (3, 4), (2, 3, 4), (0, 3)]
        return [
            Sample((make_array(rng, s, dtype), make_array(rng, s, dtype, low, high)), kw)
            for s in shapes
        ]

    return build


def _gelu_backward_record(variant, **kw) -> OpInfo:
    return OpInfo(
        "gelu_backward",
        _gelu_backward_samples(**kw),
        op=gelu_backward,
        torch=lambda t, gy, x, approximate="none": t.ops.aten.gelu_backward(
            gy, x, approximate=approximate
        ),
        variant=variant,
        dtypes=ALL_FLOATS,
    )


RECORDS = [
    _f("relu", samples(), dtypes=NUMERIC),
    _f("relu6", samples(low=-2.0, high=8.0), dtypes=NUMERIC),
    _f("leaky_relu", samples(), dtypes=ALL_FLOATS),
    _f("leaky_relu", samples(negative_slope=0.2), variant="slope"),
    _f("elu", samples(), dtypes=ALL_FLOATS),
    _f("elu", samples(low=-30.0, high=30.0, alpha=0.5), variant="alpha"),
    _f("selu", samples(), dtypes=ALL_FLOATS),
    _f("celu", samples(), dtypes=ALL_FLOATS),
    _f("celu", samples(alpha=-0.7), variant="alpha"),
    _f("gelu", samples(), dtypes=ALL_FLOATS),
    _f("gelu", samples(low=-12.0, high=12.0), variant="wide"),
    _f("gelu", samples(approximate="tanh"), variant="tanh", dtypes=ALL_FLOATS),
    _gelu_backward_record(""),
    _gelu_backward_record("wide", low=-12.0, high=12.0),
    _gelu_backward_record("tanh", approximate="tanh"),
    _f("silu", samples(), dtypes=ALL_FLOATS),
    _f("silu", samples(low=-100.0, high=100.0), variant="large"),
    _f("mish", samples(), dtypes=ALL_FLOATS),
    _f("mish", samples(low=-100.0, high=100.0), variant="large"),
    _f("softplus", samples(), dtypes=ALL_FLOATS),
    _f("softplus", samples(low=-100.0, high=100.0), variant="large"),
    _f("softplus", samples(beta=2.0, threshold=3.0), variant="beta_threshold"),
    _f("softsign", samples(), dtypes=NUMERIC),
    _f("hardtanh", samples(), dtypes=NUMERIC),
    _f("hardtanh", samples(min_val=-0.5, max_val=2.0), variant="bounds"),
    _f("hardsigmoid", samples(low=-5.0, high=5.0), dtypes=ALL_FLOATS),
    _f("hardswish", samples(low=-5.0, high=5.0), dtypes=ALL_FLOATS),
    _f("logsigmoid", samples(), dtypes=ALL_FLOATS),
    _f("logsigmoid", samples(low=-120.0, high=120.0), variant="large"),
    _f("tanhshrink", samples(), dtypes=NUMERIC),
    # NOTE: x - tanh(x) cancels near 0: rounding tanh(x) to a half dtype first leaves no digit
    _f("tanhshrink", samples(-0.05, 0.05), variant="near_zero", dtypes=ALL_FLOATS),
    _f("softshrink", samples(), dtypes=ALL_FLOATS),
    _f("softshrink", samples(lambd=1.2), variant="lambd"),
    _f("threshold", samples(threshold=-0.5, value=3.0), dtypes=NUMERIC),
]
