"""Records of nn.functional ops added for PyTorch conformance: power-average (LP) pooling,
max unpooling, alpha dropout and the CTC loss."""

import itertools

import numpy as np

import tideflow as flow

from ..opinfo import FLOATS, OpInfo, Sample, make_array

ALL_FLOATS = (*FLOATS, "float16", "bfloat16")


# -- LP pooling -----------------------------------------------------------------------------
def _lp_samples(cases):
    """cases: (input shape, norm_type, kernel_size, kwargs); positive inputs, so fractional
    powers stay real."""

    def build(rng, dtype):
        return [
            Sample((make_array(rng, shape, dtype, 0.1, 2.0), p, k), dict(kw))
            for shape, p, k, kw in cases
        ]

    return build


_LP1D = [((1, 2, 6), 2, 2, {}), ((2, 3, 9), 1, 3, {"stride": 2}), ((3, 8), 3.5, 3, {})]
_LP2D = [
    ((1, 2, 4, 4), 2, 2, {}),
    ((2, 3, 7, 8), 3, (3, 2), {"stride": (2, 1)}),
    ((2, 2, 7, 7), 1.5, 3, {"stride": 2, "ceil_mode": True}),
    ((3, 5, 6), 2, 2, {}),  # unbatched
]
_LP3D = [((1, 1, 2, 4, 4), 2, 2, {}), ((2, 2, 4, 5, 4), 3, (2, 3, 2), {"stride": 1})]


# -- max unpooling --------------------------------------------------------------------------
def _argmax_positions(rng, pooled, unpooled, kernel, stride, padding):
    """A plausible argmax for every pooling window: a random position inside it, as a flat
    index into the unpooled plane. Windows do not overlap (stride >= kernel), so positions
    are distinct, as a max pooling's are for distinct values."""
    flat = np.zeros(pooled, np.int64)
    for d in range(len(pooled)):
        o = np.arange(pooled[d]).reshape([-1 if i == d else 1 for i in range(len(pooled))])
        offset = rng.integers(0, kernel[d], size=pooled)
        pos = np.clip(o * stride[d] - padding[d] + offset, 0, unpooled[d] - 1)
        flat = flat * unpooled[d] + pos
    return flat


def _unpool_samples(cases):
    """cases: (pooled shape, kernel, stride, padding, output size or None)."""

    def build(rng, dtype):
        out = []
        for shape, k, s, p, size in cases:
            nd = len(k)
            default = tuple(
                (n - 1) * si + ki - 2 * pi
                for n, ki, si, pi in zip(shape[-nd:], k, s, p, strict=True)
            )
            target = default if size is None else size[-nd:]
            lead = shape[:-nd]
            idx = np.stack(
                [
                    _argmax_positions(rng, shape[-nd:], target, k, s, p)
                    for _ in range(int(np.prod(lead, dtype=np.int64)))
                ]
            ).reshape(shape)
            kwargs = {"stride": s, "padding": p}
            if size is not None:
                kwargs["output_size"] = size
            out.append(Sample((make_array(rng, shape, dtype), idx, k), kwargs))
        return out

    return build


_UNPOOL1D = [((1, 2, 3), (2,), (2,), (0,), None), ((2, 3, 4), (2,), (3,), (1,), (9,))]
_UNPOOL2D = [
    ((1, 2, 2, 2), (2, 2), (2, 2), (0, 0), None),
    ((2, 3, 3, 4), (2, 3), (2, 3), (1, 0), (5, 13)),
    ((3, 2, 2), (3, 3), (3, 3), (0, 0), (2, 3, 7, 6)),  # unbatched; output_size with N, C
]
_UNPOOL3D = [((1, 1, 2, 2, 2), (2, 2, 2), (2, 2, 2), (0, 0, 0), None)]


# -- alpha dropout --------------------------------------------------------------------------
def _alpha_dropout_samples(shape):
    def build(rng, dtype):
        return [
            Sample((make_array(rng, shape, dtype),), {"p": p, "training": True})
            for p in (0.0, 0.3, 1.0)
        ]

    return build


def _fn(name):
    return f"nn.functional.{name}"


RECORDS = [
    OpInfo(_fn("lp_pool1d"), _lp_samples(_LP1D), dtypes=ALL_FLOATS),
    OpInfo(_fn("lp_pool2d"), _lp_samples(_LP2D), dtypes=ALL_FLOATS),
    OpInfo(_fn("lp_pool3d"), _lp_samples(_LP3D)),  # PyTorch's CPU avg_pool3d lacks halves
    *(
        OpInfo(_fn(f"max_unpool{nd}d"), _unpool_samples(cases), dtypes=ALL_FLOATS)
        for nd, cases in ((1, _UNPOOL1D), (2, _UNPOOL2D), (3, _UNPOOL3D))
    ),
    *(
        OpInfo(_fn(name), _alpha_dropout_samples(shape), random=True, dtypes=ALL_FLOATS)
        for name, shape in itertools.product(
            ("alpha_dropout", "feature_alpha_dropout"), ((2, 3, 4),)
        )
    ),
]


# -- CTC loss -------------------------------------------------------------------------------
# (T, N, C), input lengths, target lengths, padded target width (None: concatenated), kwargs
_CTC = [
    ((4, 2, 3), (4, 3), (2, 1), 2, {}),
    ((6, 3, 5), (6, 5, 4), (3, 2, 0), 3, {"reduction": "none"}),
    ((6, 3, 5), (6, 5, 4), (3, 2, 1), None, {"reduction": "sum"}),
    ((7, 2, 4), (7, 6), (3, 2), 4, {"blank": 3}),
    ((8, 2, 4), (8, 3), (2, 4), 4, {"zero_infinity": True}),  # the second cannot align
    ((5, 3), (5,), (2,), 2, {"reduction": "none"}),  # unbatched
]


def _ctc_samples(rng, dtype):
    out = []
    for shape, inputs, targets, width, kw in _CTC:
        classes, blank = shape[-1], kw.get("blank", 0)
        labels = [c for c in range(classes) if c != blank]
        n = len(targets)
        padded = rng.choice(labels, size=(n, max(width or 0, max(targets))))
        if width is None:
            label_array = np.concatenate([padded[i, : targets[i]] for i in range(n)])
        else:
            label_array = padded if len(shape) == 3 else padded[0]
        x = make_array(rng, shape, dtype)
        out.append(Sample((x, label_array.astype(np.int64), inputs, targets), dict(kw)))
    return out


def _ctc_of_logits(lib):
    """CTC of log_softmax(logits): PyTorch's gradient rule is exact for the logits."""

    def loss(x, targets, inputs, target_lengths, **kw):
        return lib.nn.functional.ctc_loss(x.log_softmax(-1), targets, inputs, target_lengths, **kw)

    return loss


RECORDS += [
    OpInfo(
        _fn("ctc_loss"),
        _ctc_samples,
        op=_ctc_of_logits(flow),
        torch=lambda torch, *args, **kw: _ctc_of_logits(torch)(*args, **kw),
        skips={"gradgrad": "CTC has no double backward (nor has PyTorch's)"},
    ),
]


def _ctc_gradient(lib):
    """The gradient of the CTC loss for a cotangent, as one op (the forward records call only
    the loss)."""

    def grad(x, targets, inputs, target_lengths, cotangent, **kw):
        x = x.detach().requires_grad_(True)
        loss = _ctc_of_logits(lib)(x, targets, inputs, target_lengths, reduction="none", **kw)
        # NOTE: backward, not autograd.grad, which does not take global tensors yet
        loss.backward(cotangent)
        return x.grad

    return grad


def _ctc_gradient_samples(rng, dtype):
    samples = _ctc_samples(rng, dtype)[:5]  # batched: one cotangent entry per sequence
    for s in samples:
        s.args += (make_array(rng, (len(s.args[3]),), dtype),)
        s.kwargs.pop("reduction", None)
    return samples


RECORDS += [
    OpInfo(
        "ctc_loss_backward",
        _ctc_gradient_samples,
        op=_ctc_gradient(flow),
        torch=lambda torch, *args, **kw: _ctc_gradient(torch)(*args, **kw),
        grad=False,
    ),
]


# -- deformable convolution -----------------------------------------------------------------
def _bilinear_or_zero(plane, y, x):
    """torchvision's `bilinear_interpolate`: 0 outside (-1, H) x (-1, W), corners outside
    the plane read 0."""
    h, w = plane.shape[-2:]
    if y <= -1 or y >= h or x <= -1 or x >= w:
        return np.zeros(plane.shape[:-2])
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    ly, lx = y - y0, x - x0
    total = np.zeros(plane.shape[:-2])
    for cy, wy in ((y0, 1 - ly), (y0 + 1, ly)):
        for cx, wx in ((x0, 1 - lx), (x0 + 1, lx)):
            if 0 <= cy < h and 0 <= cx < w:
                total = total + wy * wx * plane[..., cy, cx]
    return total


def _deform_conv2d_ref(x, offset, weight, bias, stride, padding, dilation, mask):
    """Deformable convolution tap by tap (small samples only)."""
    (n, c, _, _), (o, per_group, kh, kw) = x.shape, weight.shape
    out_h, out_w = offset.shape[2:]
    taps, offset_groups = kh * kw, offset.shape[1] // (2 * kh * kw)
    channels = c // offset_groups
    columns = np.zeros((n, c, taps, out_h, out_w))
    for b, g, k, i, j in itertools.product(
        range(n), range(offset_groups), range(taps), range(out_h), range(out_w)
    ):
        dy, dx = offset[b, 2 * (g * taps + k) : 2 * (g * taps + k) + 2, i, j]
        y = i * stride[0] - padding[0] + (k // kw) * dilation[0] + dy
        x_ = j * stride[1] - padding[1] + (k % kw) * dilation[1] + dx
        value = _bilinear_or_zero(x[b, g * channels : (g + 1) * channels].astype(np.float64), y, x_)
        if mask is not None:
            value = value * mask[b, g * taps + k, i, j]
        columns[b, g * channels : (g + 1) * channels, k, i, j] = value
    groups = c // per_group
    columns = columns.reshape(n, groups, per_group * taps, out_h * out_w)
    kernel = weight.reshape(groups, o // groups, per_group * taps).astype(np.float64)
    out = np.einsum("gok,ngkp->ngop", kernel, columns).reshape(n, o, out_h, out_w)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.astype(x.dtype)


# input, weight, bias?, offset groups, mask?, stride, padding, dilation
_DEFORM = [
    ((1, 1, 3, 3), (1, 1, 2, 2), False, 1, False, (1, 1), (0, 0), (1, 1)),
    ((2, 4, 5, 6), (6, 2, 3, 3), True, 2, True, (1, 1), (1, 1), (1, 1)),
    ((1, 2, 6, 5), (2, 2, 2, 3), True, 1, True, (2, 1), (1, 0), (1, 2)),
]


def _deform_samples(rng, dtype):
    out = []
    for xs, ws, bias, groups, mask, stride, padding, dilation in _DEFORM:
        n, (o, _, kh, kw) = xs[0], ws
        size = [
            (xs[2 + d] + 2 * padding[d] - dilation[d] * ((kh, kw)[d] - 1) - 1) // stride[d] + 1
            for d in (0, 1)
        ]
        offset = make_array(rng, (n, 2 * groups * kh * kw, *size), dtype, -1.5, 1.5)
        m = make_array(rng, (n, groups * kh * kw, *size), dtype, 0, 1) if mask else None
        b = make_array(rng, (o,), dtype) if bias else None
        args = (make_array(rng, xs, dtype), offset, make_array(rng, ws, dtype), b)
        out.append(Sample((*args, stride, padding, dilation, m)))
    return out


RECORDS += [
    OpInfo(_fn("deform_conv2d"), _deform_samples, ref=_deform_conv2d_ref),
]
