"""Records of nn.functional, part A: linear, softmax, losses, normalization, dropout,
embedding, attention and distances.

Arguments PyTorch does not differentiate (class weights of the cross entropies, running
statistics, soft_margin_loss's target) are given as NumPy arrays in the sample's kwargs and
become constant tensors on both sides (`_with_constants`): PyTorch refuses them when they
require grad, and the gradient checks would differentiate them.
"""

from functools import partial

import numpy as np

import tideflow as flow
from tideflow.ops.nn.attention import attention_backward
from tideflow.ops.nn.normalization import layer_norm_backward
from tideflow.ops.nn.softmax import log_softmax_backward, softmax_backward

from ..opinfo import ALL_FLOATS, FLOATS, OpInfo, Sample, make_array


def _fn(name: str) -> str:
    return f"nn.functional.{name}"


def _F(t):
    return t.nn.functional


def _targets(rng, shape, n_classes, ignore=None):
    """Class indices in [0, n_classes); with `ignore`, one of them replaced by it."""
    t = rng.integers(0, n_classes, size=shape).astype(np.int64)
    if ignore is not None and t.size:
        t.reshape(-1)[0] = ignore
    return t


def _probs(rng, shape, dtype, axis):
    p = rng.uniform(0.1, 1.0, size=shape)
    return (p / p.sum(axis=axis, keepdims=True)).astype(dtype)


# -- softmax --------------------------------------------------------------------------------
def _softmax_samples(rng, dtype):
    cases = [((), 0), ((5,), 0), ((3, 4), 1), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1)]
    cases += [((0, 3), 1), ((2, 0), 1)]
    out = [Sample((make_array(rng, s, dtype),), {"dim": d}) for s, d in cases]
    # large logits: exp overflows without the max shift
    out.append(Sample((make_array(rng, (2, 3), dtype) * 30,), {"dim": 1}))
    return out


def _softmax_dtype_samples(rng, dtype):
    return [Sample((make_array(rng, (3, 4), dtype),), {"dim": 1, "dtype": "float64"})]


def _with_torch_dtype(name):
    def call(t, x, dim, dtype):
        return getattr(_F(t), name)(x, dim, dtype=getattr(t, dtype))

    return call


def _softmax_records():
    records = []
    for name in ("softmax", "log_softmax", "softmin"):
        records.append(OpInfo(_fn(name), _softmax_samples, dtypes=ALL_FLOATS))
        records.append(
            OpInfo(
                _fn(name),
                _softmax_dtype_samples,
                torch=_with_torch_dtype(name),
                variant="dtype",
                dtypes=("float32",),
            )
        )
    return records


def _softmax_backward_samples(log):
    """(grad_out, output, dim): any output is a valid point (outputs of softmax in (0, 1),
    of log_softmax negative)."""

    def build(rng, dtype):
        cases = [((), 0), ((5,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), -1)]
        cases += [((0, 3), 1)]
        low, high = (-4.0, -0.1) if log else (0.05, 1.0)
        return [
            Sample((make_array(rng, s, dtype), make_array(rng, s, dtype, low, high), d))
            for s, d in cases
        ]

    return build


def _softmax_backward_records():
    return [
        OpInfo(
            "softmax_backward",
            _softmax_backward_samples(log=False),
            op=softmax_backward,
            torch=lambda t, gy, y, d: t.ops.aten._softmax_backward_data(gy, y, d, y.dtype),
            dtypes=ALL_FLOATS,
        ),
        OpInfo(
            "log_softmax_backward",
            _softmax_backward_samples(log=True),
            op=log_softmax_backward,
            torch=lambda t, gy, y, d: t.ops.aten._log_softmax_backward_data(gy, y, d, y.dtype),
            dtypes=ALL_FLOATS,
        ),
    ]


# -- linear ---------------------------------------------------------------------------------
def _linear_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((a(3, 4), a(5, 4), a(5))),
        Sample((a(3, 4), a(5, 4))),
        Sample((a(2, 3, 4), a(2, 4), a(2))),
        Sample((a(4), a(3, 4), a(3))),
        Sample((a(3, 4), a(4))),
        Sample((a(3, 4), a(5, 4), a(1))),
        Sample((a(0, 4), a(3, 4), a(3))),
    ]


def _bilinear_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((a(3, 2), a(3, 4), a(5, 2, 4), a(5))),
        Sample((a(2, 2), a(2, 3), a(4, 2, 3))),
    ]


# -- losses ---------------------------------------------------------------------------------
def _flow_constant(a):
    return flow.tensor(a)


def _torch_constant(torch, a):
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _constants(kwargs: dict, convert) -> dict:
    return {k: convert(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}


def _with_constants(name):
    """(flow op, torch oracle) of nn.functional.<name> with NumPy kwargs made constants."""

    def op(*args, **kw):
        return getattr(flow.nn.functional, name)(*args, **_constants(kw, _flow_constant))

    def oracle(torch, *args, **kw):
        return getattr(_F(torch), name)(*args, **_constants(kw, partial(_torch_constant, torch)))

    return op, oracle


def _constant_record(name, samples, **kw):
    op, oracle = _with_constants(name)
    return OpInfo(_fn(name), samples, op=op, torch=oracle, **kw)


def _class_samples(rng, dtype):
    def logits(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((logits(4, 5), _targets(rng, (4,), 5))),
        Sample((logits(4, 5), _targets(rng, (4,), 5)), {"reduction": "sum"}),
        Sample((logits(4, 5), _targets(rng, (4,), 5, ignore=-100)), {"reduction": "none"}),
        Sample((logits(4, 5), _targets(rng, (4,), 5, ignore=2)), {"ignore_index": 2}),
        Sample((logits(5), _targets(rng, (), 5))),
        Sample((logits(2, 3, 4), _targets(rng, (2, 4), 3))),
        Sample((logits(2, 3, 2, 2), _targets(rng, (2, 2, 2), 3)), {"reduction": "none"}),
        Sample((logits(0, 3), _targets(rng, (0,), 3)), {"reduction": "sum"}),
    ]


def _weighted_class_samples(rng, dtype):
    def w(n):
        return make_array(rng, (n,), dtype, 0.2, 2.0)

    x = make_array(rng, (4, 5), dtype)
    return [
        Sample((x, _targets(rng, (4,), 5)), {"weight": w(5)}),
        Sample((x, _targets(rng, (4,), 5, ignore=1)), {"weight": w(5), "ignore_index": 1}),
        Sample((x, _targets(rng, (4,), 5)), {"weight": w(5), "reduction": "sum"}),
        Sample((make_array(rng, (2, 3, 4), dtype), _targets(rng, (2, 4), 3)), {"weight": w(3)}),
    ]


def _smoothing_samples(rng, dtype):
    cases = [
        ((4, 5), None, {}),
        ((4, 5), 3, {"ignore_index": 3}),
        ((4, 5), -100, {"reduction": "none"}),
        ((4, 5), None, {"reduction": "sum"}),
        ((2, 3, 4), None, {}),
    ]
    out = []
    for (n, c, *rest), ignore, kw in cases:
        x = make_array(rng, (n, c, *rest), dtype)
        t = _targets(rng, (n, *rest), c, ignore=ignore)
        out.append(Sample((x, t), {"label_smoothing": 0.2, **kw}))
    return out


def _weighted_smoothing_samples(rng, dtype):
    x = make_array(rng, (4, 5), dtype)
    t = _targets(rng, (4,), 5, ignore=0)
    kw = {"weight": make_array(rng, (5,), dtype, 0.2, 2.0), "label_smoothing": 0.2}
    return [
        Sample((x, t), {**kw, "ignore_index": 0}),
        Sample((x, t), {**kw, "ignore_index": 0, "reduction": "none"}),
        Sample((x, t), {**kw, "ignore_index": 0, "reduction": "sum"}),
    ]


def _prob_samples(rng, dtype):
    cases = [
        ((3, 4), {}),
        ((3, 4), {"reduction": "none"}),
        ((3, 4), {"label_smoothing": 0.2}),
        ((4,), {"reduction": "sum"}),
        ((2, 3, 2), {}),
    ]
    out = []
    for shape, kw in cases:
        p = _probs(rng, shape, dtype, 0 if len(shape) == 1 else 1)
        out.append(Sample((make_array(rng, shape, dtype), p), kw))
    return out


def _weighted_prob_samples(rng, dtype):
    w = make_array(rng, (4,), dtype, 0.2, 2.0)
    x = make_array(rng, (3, 4), dtype)
    p = _probs(rng, (3, 4), dtype, 1)
    return [
        Sample((x, p), {"weight": w}),
        Sample((x, p), {"weight": w, "reduction": "none", "label_smoothing": 0.1}),
    ]


def _log_prob_samples(rng, dtype):
    """nll_loss inputs: log-probabilities."""
    out = []
    for s in _class_samples(rng, dtype):
        x = s.args[0].astype(np.float64)
        axis = 0 if x.ndim == 1 else 1
        logp = x - np.log(np.exp(x).sum(axis=axis, keepdims=True))
        out.append(Sample((logp.astype(s.args[0].dtype), *s.args[1:]), s.kwargs))
    return out


def _cross_entropy_records():
    return [
        OpInfo(_fn("cross_entropy"), _class_samples, dtypes=ALL_FLOATS),
        _constant_record("cross_entropy", _weighted_class_samples, variant="weight"),
        OpInfo(_fn("cross_entropy"), _smoothing_samples, variant="label_smoothing"),
        _constant_record(
            "cross_entropy", _weighted_smoothing_samples, variant="weight_label_smoothing"
        ),
        OpInfo(_fn("cross_entropy"), _prob_samples, variant="probs", dtypes=ALL_FLOATS),
        _constant_record("cross_entropy", _weighted_prob_samples, variant="probs_weight"),
        OpInfo(_fn("nll_loss"), _log_prob_samples, dtypes=ALL_FLOATS),
        _constant_record("nll_loss", _weighted_class_samples, variant="weight"),
    ]


_REDUCTIONS = ({}, {"reduction": "sum"}, {"reduction": "none"})


def _pair_samples(**kw):
    """(input, target) pairs of equal shapes, in every reduction; and an empty pair."""

    def build(rng, dtype):
        out = []
        for s in ((3, 4), (5,), ()):
            for r in _REDUCTIONS:
                x, t = make_array(rng, s, dtype), make_array(rng, s, dtype)
                out.append(Sample((x, t), {**kw, **r}))
        out.append(Sample((make_array(rng, (0, 2), dtype), make_array(rng, (0, 2), dtype)), kw))
        return out

    return build


def _weight_samples(rng, dtype):
    """(input, target, elementwise weight)."""
    out = []
    for r in _REDUCTIONS:
        x, t = make_array(rng, (3, 4), dtype), make_array(rng, (3, 4), dtype)
        out.append(Sample((x, t, make_array(rng, (3, 4), dtype, 0.2, 2.0)), r))
    return out


def _weight_kw(name):
    """(flow op, torch oracle) passing the third argument as `weight=`."""

    def op(x, t, w, **kw):
        return getattr(flow.nn.functional, name)(x, t, weight=w, **kw)

    def oracle(torch, x, t, w, **kw):
        return getattr(_F(torch), name)(x, t, weight=w, **kw)

    return op, oracle


def _regression_records():
    names = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")
    records = [OpInfo(_fn(name), _pair_samples(), dtypes=ALL_FLOATS) for name in names]
    for beta in (0.5, 0.0):  # beta=0 is l1_loss
        samples = _pair_samples(beta=beta)
        records.append(OpInfo(_fn("smooth_l1_loss"), samples, variant=f"beta{beta}"))
    records.append(OpInfo(_fn("huber_loss"), _pair_samples(delta=0.4), variant="delta"))
    for name in ("mse_loss", "l1_loss", "huber_loss"):
        op, oracle = _weight_kw(name)
        records.append(OpInfo(_fn(name), _weight_samples, op=op, torch=oracle, variant="weight"))
    return records


def _bce_samples(rng, dtype):
    out = []
    for s in ((3, 4), (5,), ()):
        for r in _REDUCTIONS:
            x = make_array(rng, s, dtype, 0.05, 0.95)
            out.append(Sample((x, make_array(rng, s, dtype, 0.0, 1.0)), r))
    return out


def _bce_weight_samples(rng, dtype):
    x = make_array(rng, (3, 4), dtype, 0.05, 0.95)
    t = make_array(rng, (3, 4), dtype, 0.0, 1.0)
    return [
        Sample((x, t), {"weight": make_array(rng, (3, 4), dtype, 0.2, 2.0)}),
        Sample((x, t), {"weight": make_array(rng, (4,), dtype, 0.2, 2.0), "reduction": "none"}),
    ]


def _bce_logits_samples(rng, dtype):
    out = []
    for s in ((3, 4), (5,), ()):
        for r in _REDUCTIONS:
            out.append(Sample((make_array(rng, s, dtype), make_array(rng, s, dtype, 0, 1)), r))
    big = make_array(rng, (2, 3), dtype, -60, 60)  # exp(-x) overflows without care
    out.append(Sample((big, make_array(rng, (2, 3), dtype, 0, 1)), {"reduction": "none"}))
    return out


def _bce_logits_weight_samples(rng, dtype):
    x, t = make_array(rng, (3, 4), dtype), make_array(rng, (3, 4), dtype, 0, 1)
    kw = {
        "weight": make_array(rng, (3, 4), dtype, 0.2, 2.0),
        "pos_weight": make_array(rng, (4,), dtype, 0.2, 3.0),
    }
    return [
        Sample((x, t), kw),
        Sample((x, t), {**kw, "reduction": "none"}),
        Sample((x, t), {**kw, "weight": kw["weight"][0], "reduction": "sum"}),
    ]


def _bce_records():
    return [
        OpInfo(_fn("binary_cross_entropy"), _bce_samples, dtypes=ALL_FLOATS),
        _constant_record("binary_cross_entropy", _bce_weight_samples, variant="weight"),
        OpInfo(_fn("binary_cross_entropy_with_logits"), _bce_logits_samples, dtypes=ALL_FLOATS),
        _constant_record(
            "binary_cross_entropy_with_logits", _bce_logits_weight_samples, variant="weight"
        ),
    ]


def _kl_samples(rng, dtype):
    out = []
    for r in ({"reduction": "batchmean"}, {"reduction": "sum"}, {"reduction": "none"}):
        logp = np.log(_probs(rng, (3, 4), "float64", 1)).astype(dtype)
        log_target = np.log(_probs(rng, (3, 4), "float64", 1)).astype(dtype)
        out.append(Sample((logp, _probs(rng, (3, 4), dtype, 1)), r))
        out.append(Sample((logp, log_target), {**r, "log_target": True}))
    return out


def _poisson_samples(rng, dtype):
    def pos(*shape):
        return make_array(rng, shape, dtype, 0.5, 3.0)

    return [
        Sample((make_array(rng, (3, 4), dtype), pos(3, 4))),
        Sample((make_array(rng, (3, 4), dtype), pos(3, 4)), {"full": True, "reduction": "sum"}),
        Sample((pos(3, 4), pos(3, 4)), {"log_input": False, "reduction": "none"}),
        Sample((pos(5), pos(5)), {"log_input": False, "full": True, "eps": 1e-4}),
    ]


def _sign_samples(rng, dtype):
    """soft_margin_loss: targets of -1 / 1 (constants)."""
    out = []
    for s in ((3, 4), (5,)):
        for r in _REDUCTIONS:
            sign = np.where(rng.random(s) < 0.5, -1.0, 1.0).astype(dtype)
            out.append(Sample((make_array(rng, s, dtype),), {"target": sign, **r}))
    return out


def _ranking_samples(rng, dtype):
    out = []
    for s, margin in (((4,), 0.0), ((4,), 0.5), ((), 0.2)):
        for r in _REDUCTIONS:
            sign = np.where(rng.random(s) < 0.5, -1.0, 1.0).astype(dtype)
            a, b = make_array(rng, s, dtype), make_array(rng, s, dtype)
            out.append(Sample((a, b, sign), {"margin": margin, **r}))
    return out


def _cosine_embedding_samples(rng, dtype):
    out = []
    for s, margin in (((3, 4), 0.0), ((3, 4), 0.3), ((4,), -0.2)):
        for r in _REDUCTIONS:
            t = np.where(rng.random(s[:-1]) < 0.5, -1, 1).astype(np.int64)
            a, b = make_array(rng, s, dtype), make_array(rng, s, dtype)
            out.append(Sample((a, b, t), {"margin": margin, **r}))
    return out


def _triplet_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((a(3, 4), a(3, 4), a(3, 4))),
        Sample((a(3, 4), a(3, 4), a(3, 4)), {"swap": True, "reduction": "none"}),
        Sample((a(3, 4), a(3, 4), a(3, 4)), {"p": 1, "margin": 2.0, "reduction": "sum"}),
        Sample((a(4), a(4), a(4)), {"p": 3}),
    ]


def _misc_loss_records():
    return [
        OpInfo(_fn("kl_div"), _kl_samples),
        OpInfo(_fn("poisson_nll_loss"), _poisson_samples),
        _constant_record("soft_margin_loss", _sign_samples),
        OpInfo(_fn("margin_ranking_loss"), _ranking_samples),
        OpInfo(_fn("cosine_embedding_loss"), _cosine_embedding_samples),
        OpInfo(_fn("triplet_margin_loss"), _triplet_samples),
    ]


# -- distances ------------------------------------------------------------------------------
def _cosine_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((a(3, 4), a(3, 4))),
        Sample((a(3, 4), a(1, 4))),
        Sample((a(3, 4), a(3, 4)), {"dim": 0}),
        Sample((a(2, 3, 2), a(2, 3, 2)), {"dim": -1, "eps": 1e-6}),
        Sample((a(4), a(4)), {"dim": 0}),
    ]


def _pairwise_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((a(3, 4), a(3, 4))),
        Sample((a(3, 4), a(4)), {"p": 1.0}),
        Sample((a(3, 4), a(3, 4)), {"p": 3.0, "keepdim": True}),
        Sample((a(2, 3, 2), a(2, 3, 2)), {"eps": 1e-3}),
    ]


def _normalize_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((a(3, 4),)),
        Sample((a(3, 4),), {"p": 1.0, "dim": 0}),
        Sample((a(2, 3, 2),), {"dim": -1}),
        Sample((a(5),), {"dim": 0, "p": 3.0}),
    ]


def _one_hot_samples(rng, dtype):
    return [
        Sample((_targets(rng, (4,), 5),)),
        Sample((_targets(rng, (2, 3), 4), 6)),
        Sample((_targets(rng, (), 3), 3)),
        Sample((_targets(rng, (0,), 3), 3)),
    ]


def _distance_records():
    return [
        OpInfo(_fn("cosine_similarity"), _cosine_samples, dtypes=ALL_FLOATS),
        OpInfo(_fn("pairwise_distance"), _pairwise_samples, dtypes=ALL_FLOATS),
        OpInfo(_fn("normalize"), _normalize_samples, dtypes=ALL_FLOATS),
        OpInfo(_fn("one_hot"), _one_hot_samples, dtypes=("int64",), grad=False),
    ]


# -- embedding ------------------------------------------------------------------------------
def _embedding_samples(rng, dtype):
    def w():
        return make_array(rng, (6, 3), dtype)

    idx = np.array([[0, 2, 2], [5, 0, 1]], dtype=np.int64)
    return [
        Sample((idx, w())),
        Sample((idx[0], w())),
        Sample((np.array(4, dtype=np.int64), w())),
        Sample((idx.astype(np.int32), w())),
        Sample((np.zeros((0, 2), np.int64), w())),
    ]


def _embedding_scaled_samples(rng, dtype):
    """padding_idx / scale_grad_by_freq: gradients that are not the true derivative;
    max_norm: the weight changes in place at each call."""

    def w():
        return make_array(rng, (6, 3), dtype)

    idx = np.array([[0, 2, 2], [5, 0, 1]], dtype=np.int64)
    return [
        Sample((idx[0], w()), {"padding_idx": 2}),
        Sample((idx, w()), {"padding_idx": -1}),
        Sample((idx, w()), {"scale_grad_by_freq": True}),
        Sample((idx, w()), {"scale_grad_by_freq": True, "padding_idx": 0}),
        Sample((idx, w()), {"max_norm": 1.0}),
        Sample((idx, w()), {"max_norm": 2.0, "norm_type": 1.0, "padding_idx": 1}),
    ]


def _embedding_records():
    return [
        OpInfo(_fn("embedding"), _embedding_samples, dtypes=ALL_FLOATS),
        # NOTE: by design these gradients differ from finite differences (PyTorch's too).
        OpInfo(
            _fn("embedding"), _embedding_scaled_samples, variant="grad_scaling", gradcheck=False
        ),
    ]


# -- normalization --------------------------------------------------------------------------
def _layer_norm_samples(rng, dtype):
    def a(*shape, low=-3.0, high=3.0):
        return make_array(rng, shape, dtype, low, high)

    return [
        Sample((a(2, 3, 4), (4,))),
        Sample((a(2, 3, 4), (3, 4), a(3, 4), a(3, 4))),
        Sample((a(3, 4), [4], a(4)), {"eps": 1e-3}),
        Sample((a(5), (5,), None, a(5))),
        Sample((a(0, 4), (4,), a(4), a(4))),
    ]


def _rms_norm_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((a(2, 3, 4), (4,))),
        Sample((a(2, 3, 4), (3, 4), a(3, 4))),
        Sample((a(3, 4), [4], a(4)), {"eps": 1e-3}),
        Sample((a(5), (5,))),
    ]


def _group_norm_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [
        Sample((a(2, 4, 3), 2, a(4), a(4))),
        Sample((a(2, 6), 2)),
        Sample((a(1, 4, 2, 2), 4, a(4)), {"eps": 1e-3}),
        # NOTE: PyTorch's backward fails for a bias without a weight ("tensor does not have a
        # device"); the unit tests check that gradient.
        Sample((a(2, 4, 3), 1, None, a(4)), grad=False),
    ]


def _stats(rng, c, dtype):
    """Running statistics: NumPy arrays in the kwargs (constants; see the module doc)."""
    return {
        "running_mean": make_array(rng, (c,), dtype, -1, 1),
        "running_var": make_array(rng, (c,), dtype, 0.5, 2.0),
    }


def _batch_norm_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    out = []
    for x in (a(4, 3), a(2, 3, 4), a(2, 2, 2, 3)):
        c = x.shape[1]
        for training in (True, False):
            kw = {**_stats(rng, c, dtype), "training": training}
            out.append(Sample((x,), {**kw, "weight": a(c), "bias": a(c)}))
    out.append(Sample((a(4, 3),), {**_stats(rng, 3, dtype), "training": True, "momentum": 0.3}))
    out.append(Sample((a(4, 3), None, None, None, a(3)), {"training": True, "eps": 1e-3}))
    out.append(Sample((a(2, 3, 2),), {**_stats(rng, 3, dtype), "bias": a(3), "eps": 1e-3}))
    return out


def _instance_norm_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    stats = {**_stats(rng, 3, dtype), "use_input_stats": False}
    return [
        Sample((a(2, 3, 4),)),
        Sample((a(2, 3, 2, 2),), {"weight": a(3), "bias": a(3), "eps": 1e-3}),
        Sample((a(2, 3, 4),), stats),
        Sample((a(2, 3, 4),), {**stats, "weight": a(3), "bias": a(3)}),
    ]


def _running_stats_samples(**kw):
    """Training calls whose outputs include the running statistics they update."""

    def build(rng, dtype):
        out = []
        for shape, momentum in (((2, 3, 4), 0.1), ((2, 3, 2, 2), 0.5)):
            x = make_array(rng, shape, dtype)
            stats = {**_stats(rng, 3, dtype), "momentum": momentum, **kw}
            out.append(Sample((x,), stats, grad=False))
        return out

    return build


def _updating(name):
    """(flow op, torch oracle) returning (output, running_mean, running_var) after the call."""

    def run(fn, convert, x, kw):
        kw = _constants(kw, convert)
        return fn(x, **kw), kw["running_mean"], kw["running_var"]

    def op(x, **kw):
        return run(getattr(flow.nn.functional, name), _flow_constant, x, kw)

    def oracle(torch, x, **kw):
        return run(getattr(_F(torch), name), partial(_torch_constant, torch), x, kw)

    return op, oracle


def _layer_norm_backward_samples(rng, dtype):
    """(grad_out, input, weight, mean, rstd, normalized_shape[, grad_mean, grad_rstd]): the
    statistics are independent operands, so any values (rstd > 0) are valid points."""

    def a(*shape, low=-3.0, high=3.0):
        return make_array(rng, shape, dtype, low, high)

    def case(shape, k, weight=True, stat_grads=(False, False)):
        lead = shape[: len(shape) - k] + (1,) * k
        norm = shape[len(shape) - k :]
        args = (a(*shape), a(*shape), a(*norm) if weight else None, a(*lead))
        args += (a(*lead, low=0.5, high=2.0), norm)
        gm, gr = stat_grads
        if gm or gr:
            args += (a(*lead) if gm else None, a(*lead) if gr else None)
        return Sample(args)

    return [
        case((2, 3, 4), 1),
        case((2, 3, 4), 2, stat_grads=(True, True)),
        case((3, 4), 1, stat_grads=(False, True)),
        case((5,), 1, weight=False),
        case((0, 4), 1),
    ]


def _torch_layer_norm_backward(torch, gy, x, w, mean, rstd, shape, gm=None, gr=None):
    """The closed form in torch ops (torch's autograd then checks our hand-derived double
    backward); without statistics' cotangents it is aten's native_layer_norm_backward."""
    axes = tuple(range(-len(shape), 0))
    n = int(np.prod(shape))
    xhat = (x - mean) * rstd
    g = gy if w is None else gy * w
    c1 = g.sum(axes, keepdim=True) * rstd / n
    c2 = (g * xhat).sum(axes, keepdim=True) * rstd / n
    if gm is not None:
        c1 = c1 - gm / n
    if gr is not None:
        c2 = c2 + gr * rstd * rstd / n
    lead = tuple(range(x.dim() - len(shape)))
    gw = (gy * xhat).sum(lead) if lead else gy * xhat
    gb = gy.sum(lead) if lead else gy
    return g * rstd - c1 - xhat * c2, gw, gb


def _norm_records():
    records = [
        OpInfo(_fn("layer_norm"), _layer_norm_samples, dtypes=ALL_FLOATS),
        OpInfo(
            "layer_norm_backward",
            _layer_norm_backward_samples,
            op=layer_norm_backward,
            torch=_torch_layer_norm_backward,
        ),
        OpInfo(_fn("rms_norm"), _rms_norm_samples, dtypes=ALL_FLOATS),
        OpInfo(_fn("group_norm"), _group_norm_samples, dtypes=ALL_FLOATS),
        _constant_record("batch_norm", _batch_norm_samples, dtypes=ALL_FLOATS),
        _constant_record("instance_norm", _instance_norm_samples),
    ]
    for name, kw in (("batch_norm", {"training": True}), ("instance_norm", {})):
        op, oracle = _updating(name)
        samples = _running_stats_samples(**kw)
        records.append(
            OpInfo(_fn(name), samples, op=op, torch=oracle, variant="running_stats", grad=False)
        )
    return records


# -- dropout --------------------------------------------------------------------------------
def _dropout_samples(shape):
    def build(rng, dtype):
        x = make_array(rng, shape, dtype)
        return [Sample((x,)), Sample((x,), {"p": 0.2}), Sample((x,), {"p": 1.0})]

    return build


def _dropout_records():
    return [
        OpInfo(_fn(name), _dropout_samples(shape), random=True, dtypes=ALL_FLOATS)
        for name, shape in (
            ("dropout", (3, 4)),
            ("dropout1d", (2, 3, 4)),
            ("dropout2d", (2, 3, 2, 2)),
            ("dropout3d", (2, 3, 2, 1, 2)),
        )
    ]


# -- attention ------------------------------------------------------------------------------
def _attention_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    mask = rng.random((3, 4)) < 0.7
    mask[1] = False  # a fully masked row gives zeros
    return [
        Sample((a(2, 3, 2), a(2, 4, 2), a(2, 4, 3))),
        Sample((a(2, 3, 2), a(2, 4, 2), a(2, 4, 3), a(3, 4))),
        Sample((a(2, 3, 2), a(2, 4, 2), a(2, 4, 3), mask)),
        Sample((a(2, 3, 2), a(2, 4, 2), a(2, 4, 3)), {"is_causal": True, "scale": 0.3}),
        Sample((a(1, 2, 3, 2), a(1, 1, 4, 2), a(1, 1, 4, 2)), {"enable_gqa": True}),
        Sample((a(3, 2), a(4, 2), a(4, 3))),
        # the fused op's tiles of query rows meet; more rows than keys; batch dims broadcast
        Sample((a(2, 37, 3), a(2, 35, 3), a(2, 35, 2)), {"is_causal": True}),
        Sample((a(2, 40, 3), a(2, 6, 3), a(2, 6, 2)), {"is_causal": True}),
        Sample((a(2, 3, 2), a(1, 4, 2), a(1, 4, 3))),
    ]


def _attention_backward_samples(rng, dtype):
    """(grad_out, q, k, v, probs) with probs the softmax of the (masked) scores of q and k,
    as the forward op leaves them; longer than a tile of rows, so tiles meet."""
    from tideflow.ops.nn.attention import TILE

    def sample(n_rows, n_keys, is_causal, scale, batch=(2,)):
        q, k = (
            make_array(rng, (*batch, n_rows, 3), dtype),
            make_array(rng, (*batch, n_keys, 3), dtype),
        )
        v, g = (
            make_array(rng, (*batch, n_keys, 2), dtype),
            make_array(rng, (*batch, n_rows, 2), dtype),
        )
        scores = (q.astype(np.float64) * scale) @ np.swapaxes(k, -1, -2).astype(np.float64)
        if is_causal:
            scores[..., np.triu(np.ones((n_rows, n_keys), bool), 1)] = -np.inf
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        return Sample((g, q, k, v, probs.astype(dtype)), {"scale": scale, "is_causal": is_causal})

    return [
        sample(3, 4, False, 0.5),
        sample(3, 4, True, 0.3),
        sample(TILE + 5, TILE + 3, True, 0.4, batch=(1, 2)),
        sample(TILE + 3, 5, True, 0.4),
        sample(4, 3, True, 0.6, batch=()),
    ]


def _torch_attention_backward(torch, g, q, k, v, probs, *, scale, is_causal):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=is_causal, scale=scale
    )
    return torch.autograd.grad(out, (q, k, v), g)


def _attention_dropout_samples(rng, dtype):
    def a(*shape):
        return make_array(rng, shape, dtype)

    return [Sample((a(2, 3, 2), a(2, 4, 2), a(2, 4, 3)), {"dropout_p": 0.5})]


# -- backward ops: the tests run records forward, so gradients' own ops get records ----------
def _vjp(lib, fn, position: int, convert):
    """The gradient of the linear map `fn` with respect to its argument `position` (a zero
    tensor of `shape`) for the cotangent `g`, itself differentiable in `g`: a call runs the
    map's backward op forward."""

    def call(g, *args, shape, **kwargs):
        with lib.enable_grad():  # gradgradcheck first calls it under no_grad for the shapes
            x = g.new_zeros(shape, requires_grad=True)  # global like a global g
            full = [*args[:position], x, *args[position:]]
            out = fn(*full, **_constants(kwargs, convert))
            return lib.autograd.grad(out, x, g, create_graph=True)[0]

    return call


def _vjp_record(name, samples, position):
    def oracle(torch, g, *args, **kw):
        fn = getattr(_F(torch), name)
        return _vjp(torch, fn, position, partial(_torch_constant, torch))(g, *args, **kw)

    op = _vjp(flow, getattr(flow.nn.functional, name), position, _flow_constant)
    return OpInfo(_fn(name), samples, op=op, torch=oracle, variant="backward")


def _nll_vjp_samples(rng, dtype):
    w = make_array(rng, (5,), dtype, 0.2, 2.0)
    cases = [  # input shape, target, keywords
        ((4, 5), _targets(rng, (4,), 5, ignore=-100), {}),
        ((4, 5), _targets(rng, (4,), 5, ignore=2), {"weight": w, "ignore_index": 2}),
        ((2, 5, 3), _targets(rng, (2, 3), 5), {"reduction": "none", "weight": w}),
        ((5,), _targets(rng, (), 5), {"reduction": "sum"}),
    ]
    out = []
    for shape, t, kw in cases:
        g = make_array(rng, t.shape if kw.get("reduction") == "none" else (), dtype)
        out.append(Sample((g, t), {"shape": shape, **kw}))
    return out


def _embedding_vjp_samples(rng, dtype):
    idx = np.array([[0, 2, 2], [5, 0, 1]], dtype=np.int64)
    return [
        Sample((make_array(rng, (2, 3, 3), dtype), idx), {"shape": (6, 3)}),
        Sample((make_array(rng, (3, 2), dtype), idx[0]), {"shape": (6, 2), "padding_idx": 0}),
    ]


RECORDS = [
    *_softmax_records(),
    *_softmax_backward_records(),
    OpInfo(_fn("linear"), _linear_samples, dtypes=(*ALL_FLOATS, "int64")),
    OpInfo(_fn("bilinear"), _bilinear_samples),
    *_cross_entropy_records(),
    *_regression_records(),
    *_bce_records(),
    *_misc_loss_records(),
    *_distance_records(),
    *_embedding_records(),
    *_norm_records(),
    *_dropout_records(),
    OpInfo(_fn("scaled_dot_product_attention"), _attention_samples, dtypes=ALL_FLOATS),
    OpInfo(
        "attention_backward",
        _attention_backward_samples,
        op=attention_backward,
        torch=_torch_attention_backward,
        dtypes=FLOATS,
        grad=False,  # second derivatives of attention take the composite backward
    ),
    OpInfo(
        _fn("scaled_dot_product_attention"),
        _attention_dropout_samples,
        variant="dropout",
        random=True,
    ),
    _vjp_record("nll_loss", _nll_vjp_samples, 0),
    _vjp_record("embedding", _embedding_vjp_samples, 1),
]
