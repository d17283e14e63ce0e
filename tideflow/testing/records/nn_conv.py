"""Records of nn.functional part B: convolution, pooling, resampling, fold/unfold, padding.

The first sample of each record is small (<= 64 elements over all operands) so it is
gradchecked (first and second order); later samples cover strides, dilation, groups, padding
modes, unbatched and zero-size inputs, and sizes the SBP tests can split."""

import math
import warnings

import tideflow as flow

from ...ops.nn.conv import conv_weight_grad, ntuple
from ...ops.nn.pooling import pool_gather, pool_scatter
from ..opinfo import FLOATS, INTS, OpInfo, Sample, make_array

# float32 first: the meta/SBP tests run the first dtype, and partial sums of halves carry
# rounding errors of the parts beyond half precision's tolerance
HALVES = ("float16", "bfloat16")
ALL_FLOATS = FLOATS + HALVES


def _a(rng, shape, dtype):
    return make_array(rng, shape, dtype)


# -- convolutions ---------------------------------------------------------------------------
def _conv_samples(cases):
    """cases: (input shape, weight shape, bias shape or None, kwargs)."""

    def build(rng, dtype):
        out = []
        for xs, ws, bs, kw in cases:
            args = (_a(rng, xs, dtype), _a(rng, ws, dtype))
            if bs is not None:
                args += (_a(rng, bs, dtype),)
            out.append(Sample(args, dict(kw)))
        return out

    return build


_CONV1D = [
    ((2, 2, 5), (3, 2, 2), (3,), {}),
    ((2, 4, 7), (4, 2, 3), (4,), {"stride": 2, "padding": 1, "groups": 2}),
    ((1, 2, 6), (2, 2, 3), None, {"padding": "same", "dilation": 2}),
    ((2, 3, 8), (2, 3, 2), (2,), {"padding": "same"}),  # even kernel: one more pad after
    ((2, 5), (3, 2, 2), None, {"padding": "valid"}),  # unbatched
    ((0, 2, 5), (3, 2, 2), (3,), {"stride": 2}),
]
_CONV2D = [
    ((2, 2, 3, 3), (2, 2, 2, 2), (2,), {}),
    ((2, 1, 4, 4), (2, 1, 3, 3), None, {"stride": 2, "padding": 1}),
    ((2, 4, 5, 6), (6, 2, 3, 2), (6,), {"stride": (2, 1), "padding": (1, 0), "groups": 2}),
    ((1, 2, 6, 7), (3, 2, 3, 2), (3,), {"dilation": (2, 1), "padding": (2, 1), "stride": 3}),
    ((1, 2, 4, 5), (2, 2, 2, 3), None, {"padding": "same", "dilation": (1, 2)}),
    ((2, 3, 8, 8), (4, 3, 3, 3), (4,), {"padding": 1}),
    ((4, 4, 4), (4, 1, 3, 3), None, {"padding": 1, "groups": 4}),  # unbatched depthwise
    ((2, 2, 1, 1), (3, 2, 1, 1), (3,), {}),  # 1x1: the windows are a view
    ((0, 2, 3, 3), (2, 2, 2, 2), (2,), {}),
]
_CONV3D = [
    ((1, 1, 3, 3, 3), (2, 1, 2, 2, 2), (2,), {}),
    ((2, 2, 4, 3, 5), (4, 1, 2, 2, 3), (4,), {"stride": (1, 2, 2), "padding": 1, "groups": 2}),
    ((2, 3, 3, 4), (2, 2, 1, 2, 2), None, {"dilation": (1, 2, 1)}),
]
_CONV_T1D = [
    ((2, 2, 4), (2, 3, 2), (3,), {}),
    ((2, 4, 5), (4, 2, 3), (4,), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}),
    ((2, 2, 5), (2, 3, 3), None, {"padding": 2, "output_padding": 1, "dilation": 2}),
    ((2, 4), (2, 3, 3), None, {"stride": 3}),  # unbatched
]
_CONV_T2D = [
    ((2, 2, 3, 3), (2, 1, 2, 2), (1,), {"stride": 2}),
    ((2, 3, 4, 3), (3, 2, 3, 3), (2,), {"stride": 2, "padding": 1, "output_padding": 1}),
    (
        (2, 4, 3, 4),
        (4, 3, 3, 2),
        (6,),
        {"stride": (2, 3), "padding": (1, 0), "output_padding": (0, 2), "groups": 2},
    ),
    ((1, 2, 3, 3), (2, 2, 2, 2), None, {"dilation": 2, "padding": 1}),
    ((2, 3, 3), (2, 2, 2, 2), (2,), {}),  # unbatched
    ((0, 2, 3, 3), (2, 1, 2, 2), None, {}),
]
_CONV_T3D = [
    ((1, 2, 2, 2, 2), (2, 1, 2, 2, 2), (1,), {"stride": 2}),
    ((2, 2, 2, 3, 2), (2, 2, 3, 2, 2), None, {"stride": (2, 1, 2), "padding": 1}),
]


def _quiet(name: str):
    """PyTorch's F.<name>, without its warning that padding='same' with an even kernel copies
    the input (a performance note; warnings are errors in the tests)."""

    def call(torch, *args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return getattr(torch.nn.functional, name)(*args, **kwargs)

    return call


def _conv_record(name, cases, dtypes=ALL_FLOATS, **kw):
    return OpInfo(
        f"nn.functional.{name}", _conv_samples(cases), dtypes=dtypes, torch=_quiet(name), **kw
    )


def _int_conv(rng, dtype):
    x = make_array(rng, (2, 2, 4, 4), dtype, -4, 4)
    w = make_array(rng, (3, 2, 2, 2), dtype, -4, 4)
    return [Sample((x, w, make_array(rng, (3,), dtype, -4, 4)), {"padding": 1})]


def _int_conv_t(rng, dtype):
    x = make_array(rng, (2, 2, 3, 3), dtype, -4, 4)
    return [Sample((x, make_array(rng, (2, 3, 2, 2), dtype, -4, 4)), {"stride": 2})]


CONV_RECORDS = [
    _conv_record("conv1d", _CONV1D),
    _conv_record("conv2d", _CONV2D),
    _conv_record("conv3d", _CONV3D, dtypes=FLOATS),  # PyTorch's CPU conv3d lacks halves
    _conv_record("conv_transpose1d", _CONV_T1D),
    _conv_record("conv_transpose2d", _CONV_T2D),
    _conv_record("conv_transpose3d", _CONV_T3D, dtypes=FLOATS),
    OpInfo("nn.functional.conv2d", _int_conv, variant="int", dtypes=INTS, grad=False),
    OpInfo(
        "nn.functional.conv_transpose2d",
        _int_conv_t,
        variant="int",
        dtypes=("int64",),
        grad=False,
    ),
]


# -- padding --------------------------------------------------------------------------------
def _pad_samples(mode, cases):
    def build(rng, dtype):
        return [
            Sample((_a(rng, shape, dtype), pad), {"mode": mode, **kw}) for shape, pad, kw in cases
        ]

    return build


_PAD_CONSTANT = [
    ((2, 3, 4), (1, 2), {}),
    ((2, 3, 4), (1, 0, 2, 1), {"value": 1.5}),
    ((2, 3, 4), (-1, 2, 0, 0, 1, -1), {}),  # negative amounts crop
    ((3,), (2, 2), {"value": -1}),
    ((), (), {}),
    ((0, 3), (1, 1), {}),
]
_PAD_CASES = [
    ((2, 5), (2, 3), {}),
    ((2, 3, 5), (1, 2), {}),
    ((1, 2, 4, 5), (1, 2, 3, 0), {}),
    ((2, 3, 4), (2, 1, -1, 2), {}),
    ((1, 1, 3, 3, 4), (1, 1, 2, 0, 1, 2), {}),
    ((2, 2, 3), (0, 0), {}),
]
_CIRCULAR = [*_PAD_CASES, ((2, 3, 5), (-1, 2), {}), ((2, 3, 5), (5, 0), {})]
_REPLICATE = [*_PAD_CASES, ((2, 3, 3), (5, -1), {})]

PAD_RECORDS = [
    OpInfo(
        "nn.functional.pad",
        _pad_samples(mode, cases),
        variant=mode,
        dtypes=ALL_FLOATS + INTS,
    )
    for mode, cases in (
        ("constant", _PAD_CONSTANT),
        ("reflect", _PAD_CASES),
        ("replicate", _REPLICATE),
        ("circular", _CIRCULAR),
    )
]


# -- pooling --------------------------------------------------------------------------------
def _args_samples(cases):
    """cases: (input shape, args, kwargs)."""

    def build(rng, dtype):
        return [Sample((_a(rng, shape, dtype), *args), dict(kw)) for shape, args, kw in cases]

    return build


_MAX_POOL1D = [
    ((2, 2, 7), (2,), {}),
    ((2, 3, 9), (3, 2, 1), {"return_indices": True}),
    ((2, 3, 10), (3,), {"stride": 2, "dilation": 2, "padding": 1, "ceil_mode": True}),
    ((3, 8), (4, 3, 2), {"ceil_mode": True, "return_indices": True}),
]
_MAX_POOL2D = [
    ((2, 2, 4, 4), (2,), {}),
    ((2, 3, 7, 8), (3, 2, 1), {"return_indices": True}),
    ((2, 2, 7, 8), ((3, 2), (2, 1), (1, 1)), {"dilation": (2, 1), "ceil_mode": True}),
    ((2, 5, 6), (2,), {"return_indices": True}),  # unbatched
    ((0, 2, 4, 4), (2,), {}),
    ((2, 2, 5, 5), ((2, 3),), {"stride": 1, "padding": (1, 1), "return_indices": True}),
]
_MAX_POOL3D = [
    ((1, 2, 3, 3, 3), (2,), {"stride": 1}),
    ((2, 2, 4, 5, 4), (3, 2, 1), {"return_indices": True, "ceil_mode": True}),
]
_AVG_POOL1D = [
    ((2, 2, 7), (2,), {}),
    ((2, 3, 9), (4, 3, 2), {"ceil_mode": True}),
    ((2, 3, 9), (3, 2, 1), {"count_include_pad": False, "ceil_mode": True}),
    ((3, 8), (3,), {"stride": 1, "padding": 1}),
]
_AVG_POOL2D = [
    ((2, 2, 4, 4), (2,), {}),
    ((2, 3, 7, 8), (3, 2, 1), {}),
    ((2, 3, 7, 8), (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}),
    ((2, 3, 7, 8), ((3, 2), (2, 3), (1, 1)), {"ceil_mode": True, "divisor_override": 5}),
    ((3, 5, 6), (2,), {}),  # unbatched
    ((0, 2, 4, 4), (2,), {}),
]
_AVG_POOL3D = [
    ((1, 2, 3, 3, 3), (2,), {"stride": 1}),
    ((2, 2, 5, 4, 6), (2, 1, 1), {}),
    ((2, 2, 5, 4, 6), (3, 2, 1), {"ceil_mode": True, "count_include_pad": False}),
    ((2, 2, 4, 4, 4), (2,), {"divisor_override": 3}),
]
_ADAPTIVE1D = [((2, 2, 7), (3,), {}), ((2, 3, 5), (8,), {}), ((3, 9), (1,), {})]
_ADAPTIVE2D = [
    ((2, 2, 4, 5), ((3, 2),), {}),
    ((2, 3, 7, 8), ((3, 5),), {}),
    ((2, 3, 7, 8), ((None, 11),), {}),
    ((3, 5, 6), (1,), {}),  # unbatched, global pooling
    ((0, 2, 4, 4), (2,), {}),
]
_ADAPTIVE3D = [((1, 2, 3, 3, 3), (2,), {}), ((2, 2, 5, 4, 6), ((3, 2, 4),), {})]


def _indices(cases):
    return [(s, a, {**kw, "return_indices": True}) for s, a, kw in cases]


def _args_record(name, cases, dtypes=ALL_FLOATS, **kw):
    return OpInfo(f"nn.functional.{name}", _args_samples(cases), dtypes=dtypes, **kw)


POOL_RECORDS = [
    _args_record("max_pool1d", _MAX_POOL1D),
    _args_record("max_pool2d", _MAX_POOL2D),
    _args_record("max_pool3d", _MAX_POOL3D),
    _args_record("max_pool2d", _MAX_POOL2D[1:4], dtypes=INTS, variant="int", grad=False),
    _args_record("avg_pool1d", _AVG_POOL1D),
    _args_record("avg_pool2d", _AVG_POOL2D),
    _args_record("avg_pool3d", _AVG_POOL3D, dtypes=FLOATS),  # no halves in PyTorch's CPU kernel
    _args_record("adaptive_avg_pool1d", _ADAPTIVE1D),
    _args_record("adaptive_avg_pool2d", _ADAPTIVE2D),
    _args_record("adaptive_avg_pool3d", _ADAPTIVE3D),
    _args_record("adaptive_max_pool1d", _indices(_ADAPTIVE1D)),
    _args_record("adaptive_max_pool2d", _ADAPTIVE2D),
    _args_record("adaptive_max_pool2d", _indices(_ADAPTIVE2D), variant="indices"),
    _args_record("adaptive_max_pool3d", _indices(_ADAPTIVE3D)),
]


# -- interpolation --------------------------------------------------------------------------
def _interp_samples(cases):
    def build(rng, dtype):
        return [Sample((_a(rng, shape, dtype),), dict(kw)) for shape, kw in cases]

    return build


_NEAREST = [
    ((1, 2, 3, 4), {"scale_factor": 2}),
    ((2, 2, 5, 6), {"size": (7, 4)}),
    ((2, 2, 5, 6), {"size": (5, 6)}),
    ((2, 2, 5, 6), {"scale_factor": (1.7, 0.6)}),
    ((2, 2, 5, 6), {"scale_factor": 1.5, "recompute_scale_factor": True}),
    ((2, 3, 5), {"size": 9}),
    ((1, 2, 2, 3, 4), {"scale_factor": (2, 1.5, 0.5)}),
]


def _modes(mode, extra=()):
    return [(shape, {**kw, "mode": mode}) for shape, kw in _NEAREST[:5] + list(extra)]


def _aligned(cases):
    return [(s, {**kw, "align_corners": True}) for s, kw in cases]


def _antialiased(mode):
    """Shrinking (where the filter widens) and the plain cases. Not a 1-pixel-wide output of
    a taller one: PyTorch's antialiased kernel repeats the first row there (a bug)."""
    shrink = [((2, 2, 9, 7), {"size": (4, 3)}), ((1, 2, 8, 9), {"scale_factor": (0.3, 0.7)})]
    cases = _modes(mode, shrink)
    return [(s, {**kw, "antialias": True}) for s, kw in [*cases, *_aligned(cases)]]


_LINEAR = [
    ((2, 2, 5), {"scale_factor": 2}),
    ((2, 3, 6), {"size": 4}),
    ((2, 3, 6), {"scale_factor": 1.7}),
    ((2, 3, 6), {"size": 6}),
]
_TRILINEAR = [((1, 2, 2, 3, 2), {"scale_factor": 2}), ((1, 2, 3, 4, 5), {"size": (4, 2, 7)})]


def _interpolate(torch, *args, **kwargs):
    return torch.nn.functional.interpolate(*args, **kwargs)


def _interp_record(cases, variant, dtypes=ALL_FLOATS, name="interpolate", **kw):
    return OpInfo(
        f"nn.functional.{name}", _interp_samples(cases), variant=variant, dtypes=dtypes, **kw
    )


_BILINEAR = _modes("bilinear", [((1, 1, 2, 2), {"size": (5, 1)})])
_BICUBIC = _modes("bicubic", [((1, 1, 4, 4), {"scale_factor": 0.5})])
_LIN = [(s, {**kw, "mode": "linear"}) for s, kw in _LINEAR]
_TRI = [(s, {**kw, "mode": "trilinear"}) for s, kw in _TRILINEAR]

INTERP_RECORDS = [
    _interp_record(_NEAREST, "nearest"),
    _interp_record(_NEAREST[1:3], "nearest_uint8", dtypes=("uint8",), grad=False),
    _interp_record(_modes("nearest-exact"), "nearest_exact"),
    _interp_record(_modes("area"), "area"),
    _interp_record(_BILINEAR, "bilinear"),
    _interp_record(_aligned(_BILINEAR), "bilinear_aligned"),
    _interp_record(_BICUBIC, "bicubic"),
    _interp_record(_aligned(_BICUBIC), "bicubic_aligned"),
    _interp_record(_antialiased("bilinear"), "bilinear_antialias", dtypes=FLOATS),
    _interp_record(_antialiased("bicubic"), "bicubic_antialias", dtypes=FLOATS),
    _interp_record(_LIN + _aligned(_LIN), "linear"),
    _interp_record(_TRI + _aligned(_TRI), "trilinear"),
    # PyTorch's upsample aliases warn (deprecated): compare with what they call
    _interp_record(_NEAREST[:2] + _BILINEAR[:2], "", name="upsample", torch=_interpolate),
    _interp_record(_NEAREST[:2], "", name="upsample_nearest", torch=_interpolate),
    _interp_record(
        [(s, {k: v for k, v in kw.items() if k != "mode"}) for s, kw in _BILINEAR[:3]],
        "",
        name="upsample_bilinear",
        torch=lambda t, x, **kw: _interpolate(t, x, mode="bilinear", align_corners=True, **kw),
    ),
]


_SHUFFLE = [((2, 8, 2, 3), (2,)), ((2, 9, 2, 2), (3,)), ((3, 2, 4, 2, 3), (1,)), ((4, 2, 2), (2,))]
_UNSHUFFLE = [
    ((2, 2, 4, 6), (2,)),
    ((2, 1, 6, 3), (3,)),
    ((3, 2, 2, 4, 2), (2,)),
    ((2, 2, 2), (1,)),
]

SHUFFLE_RECORDS = [
    _args_record("pixel_shuffle", [(s, a, {}) for s, a in _SHUFFLE], dtypes=ALL_FLOATS + INTS),
    _args_record("pixel_unshuffle", [(s, a, {}) for s, a in _UNSHUFFLE], dtypes=ALL_FLOATS + INTS),
]


# -- fold / unfold --------------------------------------------------------------------------
_UNFOLD = [
    ((1, 2, 3, 3), {"kernel_size": 2}),
    ((2, 3, 5, 6), {"kernel_size": (2, 3), "stride": (1, 2), "padding": 1}),
    ((2, 2, 6, 6), {"kernel_size": 3, "dilation": 2, "padding": (1, 0), "stride": 2}),
    ((3, 4, 4), {"kernel_size": 1}),  # unbatched; 1x1 blocks
    ((0, 2, 4, 4), {"kernel_size": 2}),
]
_FOLD = [
    ((1, 8, 4), {"output_size": 3, "kernel_size": 2}),
    ((2, 12, 18), {"output_size": (5, 6), "kernel_size": (2, 3), "stride": (1, 2), "padding": 1}),
    ((2, 18, 4), {"output_size": 6, "kernel_size": 3, "dilation": 2, "padding": 1, "stride": 2}),
    ((8, 4), {"output_size": 3, "kernel_size": 2}),  # unbatched
    ((0, 8, 9), {"output_size": 4, "kernel_size": 2}),
]

FOLD_RECORDS = [
    OpInfo("nn.functional.unfold", _interp_samples(_UNFOLD), dtypes=ALL_FLOATS),
    OpInfo("nn.functional.fold", _interp_samples(_FOLD), dtypes=ALL_FLOATS),
]

RECORDS = (
    CONV_RECORDS + PAD_RECORDS + POOL_RECORDS + INTERP_RECORDS + SHUFFLE_RECORDS + FOLD_RECORDS
)


# -- backward ops: the tests run records forward, so gradients' own ops get records ----------
def _weight_grad_samples(rng, dtype):
    cases = [  # input, grad_output, torch.nn.grad.conv*_weight's keywords
        ((1, 2, 3, 3), (1, 2, 2, 2), {"weight_size": (2, 2, 2, 2)}),
        (
            (2, 4, 7, 6),
            (2, 4, 4, 4),
            {"weight_size": (4, 2, 3, 2), "stride": 2, "padding": 1, "groups": 2},
        ),
        (
            (2, 3, 6, 6),
            (2, 2, 2, 5),
            {"weight_size": (2, 3, 2, 2), "dilation": (2, 1), "stride": (2, 1)},
        ),
        ((2, 3, 9), (2, 2, 4), {"weight_size": (2, 3, 3), "stride": 2}),
    ]
    return [Sample((_a(rng, x, dtype), _a(rng, g, dtype)), kw) for x, g, kw in cases]


def _flow_weight_grad(x, gy, weight_size, stride=1, padding=0, dilation=1, groups=1):
    nd = x.ndim - 2
    pairs = tuple((p, p) for p in ntuple(padding, nd, "test", "padding"))
    geometry = {"stride": ntuple(stride, nd, "test", "stride"), "padding": pairs}
    geometry.update(dilation=ntuple(dilation, nd, "test", "dilation"), groups=groups)
    return conv_weight_grad(x, gy, weight_size[2:], **geometry)


def _torch_weight_grad(torch, x, gy, weight_size, **kwargs):
    return getattr(torch.nn.grad, f"conv{x.ndim - 2}d_weight")(x, weight_size, gy, **kwargs)


def _indices(rng, shape, plane):
    return make_array(rng, shape, "int64", 0, plane)


def _pool_scatter_samples(rng, dtype):
    cases = [((2, 2, 2, 2), (3, 3)), ((2, 3, 3, 4), (4, 5)), ((2, 3, 5), (7,))]
    return [
        Sample((_a(rng, g, dtype), _indices(rng, g, math.prod(size))), {"size": size})
        for g, size in cases
    ]


def _torch_pool_scatter(torch, g, indices, size):
    nd = len(size)
    out = torch.zeros(*g.shape[: g.ndim - nd], math.prod(size), dtype=g.dtype)
    src = g.flatten(-nd) if nd > 1 else g
    flat = indices.flatten(-nd) if nd > 1 else indices
    return out.scatter_add(-1, flat, src).reshape(*g.shape[: g.ndim - nd], *size)


def _pool_gather_samples(rng, dtype):
    cases = [((2, 2, 3, 3), (2, 2, 2, 2)), ((2, 3, 4, 5), (2, 3, 3, 2)), ((2, 3, 7), (2, 3, 4))]
    return [
        Sample(
            (_a(rng, x, dtype), _indices(rng, i, math.prod(x[len(i) - len(x) + 2 :]))),
            {"nd": len(x) - 2},
        )
        for x, i in cases
    ]


def _torch_pool_gather(torch, x, indices, nd):
    flat_x = x.flatten(-nd) if nd > 1 else x
    flat_i = indices.flatten(-nd) if nd > 1 else indices
    return flat_x.gather(-1, flat_i).reshape(indices.shape)


def _interp_vjp_samples(rng, dtype):
    cases = [  # input shape, interpolate keywords (the cotangent has the output's shape)
        ((1, 2, 3, 3), (1, 2, 5, 4), {"size": (5, 4), "mode": "bilinear"}),
        ((2, 2, 5, 6), (2, 2, 10, 12), {"scale_factor": 2, "mode": "nearest"}),
        ((2, 2, 5, 6), (2, 2, 3, 4), {"size": (3, 4), "mode": "area"}),
        ((2, 2, 4, 5), (2, 2, 7, 3), {"size": (7, 3), "mode": "bicubic", "align_corners": True}),
    ]
    return [Sample((_a(rng, g, dtype),), {"in_shape": x, **kw}) for x, g, kw in cases]


def _vjp_of_interpolate(lib, interpolate):
    """The gradient of interpolate at any input (it is linear) for the cotangent g, itself
    differentiable in g: a call runs resample_backward forward."""

    def call(g, in_shape, **kwargs):
        with lib.enable_grad():  # gradgradcheck first calls it under no_grad for the shapes
            x = lib.zeros(in_shape, dtype=g.dtype, requires_grad=True)
            return lib.autograd.grad(interpolate(x, **kwargs), x, g, create_graph=True)[0]

    return call


BACKWARD_RECORDS = [
    OpInfo(
        "conv_weight_grad",
        _weight_grad_samples,
        op=_flow_weight_grad,
        torch=_torch_weight_grad,
        dtypes=FLOATS,
    ),
    OpInfo(
        "pool_scatter",
        _pool_scatter_samples,
        op=pool_scatter,
        torch=_torch_pool_scatter,
        dtypes=FLOATS,
    ),
    OpInfo(
        "pool_gather", _pool_gather_samples, op=pool_gather, torch=_torch_pool_gather, dtypes=FLOATS
    ),
    OpInfo(
        "resample_backward",
        _interp_vjp_samples,
        op=_vjp_of_interpolate(flow, flow.nn.functional.interpolate),
        torch=lambda torch, g, **kw: _vjp_of_interpolate(torch, torch.nn.functional.interpolate)(
            g, **kw
        ),
        dtypes=FLOATS,
    ),
]

RECORDS += BACKWARD_RECORDS
