"""`tideflow._C`: OneFlow's functional namespace (`oneflow._C`, generated there from
`functional_api.yaml`), as a view of tideflow's ops. OneFlow code calls `flow._C.gelu(x)`,
`flow._C.matmul(a, b, transpose_b=True)`, `flow._C.fused_bias_add_gelu(x, b, axis=2)`.

Each name is an existing op where OneFlow's arguments agree with it, an argument adapter
where OneFlow's order, names or options differ (below), or one of OneFlow's fused ops, built
from tideflow ops in `ops/nn/fused.py`. No op is implemented here. A name OneFlow has and this
view lacks raises AttributeError naming it.

>>> import tideflow as flow
>>> flow._C.matmul(flow.ones(2, 3), flow.ones(4, 3), transpose_b=True, alpha=0.5).shape
tideflow.Size([2, 4])
"""

from __future__ import annotations

from .ops import activation as _activation
from .ops import binary as _binary
from .ops import indexing as _indexing
from .ops import reduction as _reduction
from .ops import shape as _shape
from .ops import special as _special
from .ops import unary as _unary
from .ops._rules import normalize_dim as _normalize_dim
from .ops.linalg import matmul as _matmul
from .ops.nn import conv as _conv
from .ops.nn import distance as _distance
from .ops.nn import linear as _linear
from .ops.nn import loss as _loss
from .ops.nn import normalization as _normalization
from .ops.nn import padding as _padding
from .ops.nn import softmax as _softmax
from .ops.nn.dropout import dropout as _dropout
from .ops.nn.fused import *  # noqa: F403  (OneFlow's fused ops, under their own names)
from .ops.nn.fused import bias_along as _bias_along
from .ops.nn.fused import default_generator_only as _default_generator_only
from .ops.nn.fused import fused_self_attention as _fused_self_attention

# Names whose OneFlow signature (positional order, defaults) is the op's own.
_SAME = {
    _binary: "add sub mul div pow fmod atan2 minimum maximum logical_and logical_or logical_xor "
    "where addcmul",
    _unary: "abs acos acosh asin asinh atan atanh ceil cos cosh erf erfc erfinv exp expm1 floor "
    "log log1p log2 reciprocal round rsqrt sign sin sinh sqrt square tan clamp clip isnan isinf "
    "logical_not",
    _special: "lgamma digamma",
    _activation: "sigmoid tanh relu gelu silu mish selu softsign softplus hardtanh hardsigmoid "
    "hardswish hardshrink elu celu logsigmoid threshold prelu",
    _softmax: "softmax log_softmax",
    _shape: "reshape flatten unsqueeze squeeze permute tile roll flip stack split chunk narrow "
    "tril triu t swapaxes swapdims diag diagonal movedim tensor_split hsplit vsplit unbind select",
    _indexing: "masked_fill index_select searchsorted",
    _reduction: "cumsum cumprod argmax argmin amax amin max min median std var logsumexp",
    _padding: "pad",
    _distance: "normalize cosine_similarity",
    _linear: "linear",
    _conv: "conv1d conv2d conv3d",
}
globals().update({name: getattr(m, name) for m, names in _SAME.items() for name in names.split()})

# OneFlow's names for ops tideflow (after PyTorch) names otherwise.
equal = _binary.eq  # elementwise, unlike torch.equal
not_equal = _binary.ne
greater = _binary.gt
greater_equal = _binary.ge
less = _binary.lt
less_equal = _binary.le
negative = _unary.neg
concat = _shape.cat
expand_dims = _shape.unsqueeze
dim_gather = _indexing.gather
reduce_sum = _reduction.sum
reduce_mean = _reduction.mean
reduce_max = _reduction.amax
reduce_min = _reduction.amin


# -- argument adapters: OneFlow's order, names or options ------------------------------------
def matmul(a, b, transpose_a=False, transpose_b=False, alpha=1.0):
    """`alpha * op(a) @ op(b)`, `op` transposing the last two dims where asked."""
    if transpose_a:
        a = a.transpose(-2, -1)
    if transpose_b:
        b = b.transpose(-2, -1)
    out = _matmul(a, b)
    return out if alpha == 1.0 else out * alpha


batch_matmul = matmul


def bias_add(x, bias, axis=1):
    """`x + bias`, the 1-d `bias` added along dim `axis` of `x`."""
    return x + _bias_along("bias_add", x, bias, axis)


def transpose(input, perm_or_dim0, dim1=None):
    """OneFlow's two forms: `transpose(x, perm)` permutes; `transpose(x, dim0, dim1)` swaps."""
    if dim1 is None:
        return _shape.permute(input, perm_or_dim0)
    return _shape.transpose(input, perm_or_dim0, dim1)


def view(x, shape):
    return x.view(*shape)


def expand(x, shape):
    return x.expand(*shape)


def repeat(input, repeat_shape):
    return input.repeat(*repeat_shape)


def leaky_relu(x, alpha=0.01, inplace=False):
    return _activation.leaky_relu(x, alpha, inplace)


def dropout(input, p=0.5, training=True, inplace=False, generator=None, *, addend=None):
    """`dropout(input)`, plus `addend` when given (OneFlow fuses the residual add)."""
    _default_generator_only("dropout", generator)
    out = _dropout(input, p, training, inplace)
    return out if addend is None else out + addend


def one_hot(input, num_classes=-1, on_value=1, off_value=0):
    hot = _distance.one_hot(input, num_classes)
    if (on_value, off_value) == (1, 0):
        return hot
    return hot * (on_value - off_value) + off_value


def layer_norm(x, begin_norm_axis, begin_params_axis, epsilon):
    """Normalize over the dims from `begin_norm_axis` on (`begin_params_axis` only places the
    parameters of `layer_norm_affine`)."""
    dims = x.shape[_normalize_dim("layer_norm", begin_norm_axis, x.ndim) :]
    return _normalization.layer_norm(x, dims, eps=epsilon)


def layer_norm_affine(x, gamma, beta, begin_norm_axis, begin_params_axis, epsilon):
    """`layer_norm`, then `* gamma + beta` over the dims from `begin_params_axis` on."""
    return layer_norm(x, begin_norm_axis, begin_params_axis, epsilon) * gamma + beta


# OneFlow's losses take `reduction` (and their options) positionally, where PyTorch puts the
# deprecated size_average/reduce first.
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):  # fmt: skip
    return _loss.cross_entropy(
        input,
        target,
        weight,
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    return _loss.nll_loss(input, target, weight, ignore_index=ignore_index, reduction=reduction)


def sparse_softmax_cross_entropy(logits, label):
    """Per-example cross entropy of integer labels."""
    return _loss.cross_entropy(logits, label, reduction="none")


def l1_loss(input, target, reduction="mean"):
    return _loss.l1_loss(input, target, reduction=reduction)


def mse_loss(input, target, reduction="mean"):
    return _loss.mse_loss(input, target, reduction=reduction)


def smooth_l1_loss(logits, label, beta=1.0, reduction="mean"):
    return _loss.smooth_l1_loss(logits, label, reduction=reduction, beta=beta)


def kl_div_loss(input, target, log_target=False, reduction="mean"):
    return _loss.kl_div(input, target, reduction=reduction, log_target=log_target)


def binary_cross_entropy_loss(input, target, weight=None, reduction="mean"):
    return _loss.binary_cross_entropy(input, target, weight, reduction=reduction)


def binary_cross_entropy_with_logits_loss(input, target, weight=None, pos_weight=None,
                                          reduction="mean"):  # fmt: skip
    return _loss.binary_cross_entropy_with_logits(
        input, target, weight, reduction=reduction, pos_weight=pos_weight
    )


# NOTE: OneFlow's op is registered as fused_self_attention_query_mul_key_and_value; its
# functional name is fused_self_attention.
fused_self_attention_query_mul_key_and_value = _fused_self_attention


def __getattr__(name: str):
    raise AttributeError(
        f"tideflow._C has no function '{name}': OneFlow's functional API is mapped here only "
        f"where tideflow has the op (see tideflow/_C.py)"
    )
