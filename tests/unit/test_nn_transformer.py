"""MultiheadAttention and the Transformer family against PyTorch as the oracle: with torch's
weights copied in, outputs, attention weights and the gradients of inputs and every parameter
agree (float64, eval mode). Plus state_dict keys, initialization, masks, dropout in training,
and the user-facing errors."""

import warnings

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.functional as F
from tideflow.framework.errors import DTypeError, ShapeError, TideflowError
from tideflow.nn import MultiheadAttention
from tideflow.nn.functional import multi_head_attention_forward
from tideflow.nn.modules import attention, transformer
from tideflow.nn.modules.activation import GELU
from tideflow.nn.modules.transformer import (
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)

from .test_nn_layers import run_doctests
from .test_nn_rnn import expose_public_names

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

L, S, N, E, HEADS = 5, 6, 3, 8, 2
ATOL = 1e-10


def _load_from(ours, theirs):
    """Our module in float64 and eval mode, holding torch's (float64) weights."""
    theirs.double().eval()
    ours.double().eval()
    ours.load_state_dict(
        {k: flow.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    )
    return ours, theirs


def _torch_transformer(**kwargs):
    with warnings.catch_warnings():  # torch explains why its nested-tensor fast path is off
        warnings.filterwarnings("ignore", "enable_nested_tensor is True")
        return torch.nn.Transformer(**kwargs)


def _leaf(rng, *shape):
    values = rng.standard_normal(shape)
    return flow.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)


def _assert_close(ours, theirs, atol=ATOL):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), atol=atol)


def _check_gradients(ours, theirs, our_out, their_out, our_inputs, their_inputs):
    (our_out**2).sum().backward()
    (their_out**2).sum().backward()
    for a, b in zip(our_inputs, their_inputs, strict=True):
        _assert_close(a.grad, b.grad)
    for (name, p), (their_name, q) in zip(
        ours.named_parameters(), theirs.named_parameters(), strict=True
    ):
        assert name == their_name
        _assert_close(p.grad, q.grad)


def _same_state_dict_layout(ours, theirs):
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [
        (k, tuple(v.shape)) for k, v in theirs.state_dict().items()
    ]


def _mask(kind: str, tgt: int = L, src: int = S):
    """A mask for `tgt` queries and `src` keys in both libraries (bool: True = masked; float:
    added to the scores); "padding" masks are key_padding_masks (N, src)."""
    rng = np.random.default_rng(3)
    if kind == "bool2d":
        values = np.triu(np.ones((tgt, src), dtype=bool), 1)
    elif kind == "float2d":
        values = rng.standard_normal((tgt, src))
    elif kind == "bool3d":
        values = rng.random((N * HEADS, tgt, src)) < 0.3
        values[:, :, 0] = False  # every query keeps a key
    elif kind == "float3d":
        values = rng.standard_normal((N * HEADS, tgt, src))
    else:  # sequences of lengths src, src - 1 and 2
        values = np.arange(src)[None, :] >= np.array([src, src - 1, 2])[:, None]
        if kind == "float_padding":
            values = np.where(values, -np.inf, 0.0)
    return flow.tensor(values), torch.tensor(values)


# -- MultiheadAttention ---------------------------------------------------------------------
MHA_CASES = [
    ({}, {}, "self"),
    ({}, {"need_weights": False}, "self"),
    ({}, {"average_attn_weights": False}, "cross"),
    ({}, {"attn_mask": "bool2d"}, "self"),
    ({}, {"attn_mask": "bool2d", "need_weights": False}, "cross"),
    ({}, {"attn_mask": "float2d", "average_attn_weights": False}, "cross"),
    ({}, {"attn_mask": "bool3d"}, "cross"),
    ({}, {"attn_mask": "float3d", "need_weights": False}, "cross"),
    ({}, {"key_padding_mask": "padding"}, "cross"),
    ({}, {"key_padding_mask": "padding", "need_weights": False}, "kv"),
    ({}, {"key_padding_mask": "float_padding", "attn_mask": "float2d"}, "cross"),
    ({}, {"key_padding_mask": "padding", "attn_mask": "bool2d", "need_weights": False}, "cross"),
    ({"batch_first": True}, {"attn_mask": "float2d"}, "self"),
    ({"batch_first": True}, {"key_padding_mask": "padding", "need_weights": False}, "cross"),
    ({"kdim": 5, "vdim": 7}, {"key_padding_mask": "padding"}, "cross"),
    ({"kdim": 5, "vdim": 7, "bias": False}, {"need_weights": False}, "cross"),
    ({"add_bias_kv": True, "add_zero_attn": True}, {"key_padding_mask": "padding"}, "cross"),
    ({"add_bias_kv": True}, {"attn_mask": "float3d", "need_weights": False}, "cross"),
    ({"bias": False}, {"average_attn_weights": False}, "self"),
]


@pytest.mark.parametrize(("init_kw", "call_kw", "inputs"), MHA_CASES)
def test_multihead_attention_matches_torch(init_kw, call_kw, inputs):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    ours, theirs = _load_from(MultiheadAttention(E, HEADS, **init_kw),
                              torch.nn.MultiheadAttention(E, HEADS, **init_kw))  # fmt: skip
    _same_state_dict_layout(ours, theirs)
    batch_first = init_kw.get("batch_first", False)

    def shape(length, dim):
        return (N, length, dim) if batch_first else (length, N, dim)

    src = L if inputs == "self" else S
    q, tq = _leaf(rng, *shape(L, E))
    if inputs == "self":
        leaves, their_leaves = [q], [tq]
        args, their_args = (q, q, q), (tq, tq, tq)
    else:
        k, tk = _leaf(rng, *shape(S, init_kw.get("kdim", E)))
        if inputs == "kv":  # one tensor as key and value
            leaves, their_leaves = [q, k], [tq, tk]
            args, their_args = (q, k, k), (tq, tk, tk)
        else:
            v, tv = _leaf(rng, *shape(S, init_kw.get("vdim", E)))
            leaves, their_leaves = [q, k, v], [tq, tk, tv]
            args, their_args = (q, k, v), (tq, tk, tv)
    kwargs, their_kwargs = {}, {}
    for name, value in call_kw.items():
        if name.endswith("mask"):
            kwargs[name], their_kwargs[name] = _mask(value, L, src)
        else:
            kwargs[name] = their_kwargs[name] = value
    out, weights = ours(*args, **kwargs)
    their_out, their_weights = theirs(*their_args, **their_kwargs)
    _assert_close(out, their_out)
    if call_kw.get("need_weights", True):
        assert weights.shape == their_weights.shape
        _assert_close(weights, their_weights)
    else:
        assert weights is None and their_weights is None
    _check_gradients(ours, theirs, out, their_out, leaves, their_leaves)


@pytest.mark.parametrize("need_weights", [True, False])
def test_unbatched_multihead_attention_matches_torch(need_weights):
    torch.manual_seed(1)
    rng = np.random.default_rng(1)
    ours, theirs = _load_from(MultiheadAttention(E, HEADS), torch.nn.MultiheadAttention(E, HEADS))
    (q, tq), (k, tk) = _leaf(rng, L, E), _leaf(rng, S, E)
    padding = np.where(np.arange(S) >= 4, -np.inf, 0.0)
    mask, their_mask = _mask("float3d")
    kwargs = {"need_weights": need_weights}
    out, weights = ours(q, k, k, flow.tensor(padding), attn_mask=mask[:HEADS], **kwargs)
    their_out, their_weights = theirs(
        tq, tk, tk, torch.tensor(padding), attn_mask=their_mask[:HEADS], **kwargs
    )
    assert out.shape == (L, E)
    _assert_close(out, their_out)
    if need_weights:
        assert weights.shape == (L, S)
        _assert_close(weights, their_weights)
    _check_gradients(ours, theirs, out, their_out, [q, k], [tq, tk])


def test_is_causal_hint_with_its_mask_matches_torch():
    torch.manual_seed(2)
    ours, theirs = _load_from(MultiheadAttention(E, HEADS), torch.nn.MultiheadAttention(E, HEADS))
    x, tx = _leaf(np.random.default_rng(2), L, N, E)
    causal = np.triu(np.ones((L, L), dtype=bool), 1)
    for need_weights in (False, True):
        out, _ = ours(x, x, x, attn_mask=flow.tensor(causal), is_causal=True,
                      need_weights=need_weights)  # fmt: skip
        their_out, _ = theirs(tx, tx, tx, attn_mask=torch.tensor(causal), is_causal=True,
                              need_weights=need_weights)  # fmt: skip
        _assert_close(out, their_out)


def test_multi_head_attention_forward_on_explicit_weights_matches_torch():
    rng = np.random.default_rng(4)
    (q, tq), (w, tw), (b, tb), (wo, two) = (
        _leaf(rng, L, N, E), _leaf(rng, 3 * E, E), _leaf(rng, 3 * E), _leaf(rng, E, E)
    )  # fmt: skip
    out, weights = multi_head_attention_forward(q, q, q, E, HEADS, w, b, None, None, False, 0.0,
                                                wo, None, training=False)  # fmt: skip
    their_out, their_weights = torch.nn.functional.multi_head_attention_forward(
        tq, tq, tq, E, HEADS, tw, tb, None, None, False, 0.0, two, None, training=False
    )
    _assert_close(out, their_out)
    _assert_close(weights, their_weights)
    (out**2).sum().backward()
    (their_out**2).sum().backward()
    for ours, theirs in ((q, tq), (w, tw), (b, tb), (wo, two)):
        _assert_close(ours.grad, theirs.grad)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"bias": False}, {"add_bias_kv": True}, {"kdim": 5, "vdim": 3}, {"batch_first": True}],
)
def test_multihead_attention_state_dict_layout_equals_torch(kwargs):
    _same_state_dict_layout(MultiheadAttention(E, HEADS, **kwargs),
                            torch.nn.MultiheadAttention(E, HEADS, **kwargs))  # fmt: skip


def test_multihead_attention_initialization():
    mha = MultiheadAttention(16, 4, add_bias_kv=True)
    bound = np.sqrt(6.0 / (16 + 48))  # xavier_uniform_ over the packed (3E, E) weight
    w = mha.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not mha.in_proj_bias.detach().numpy().any()
    assert not mha.out_proj.bias.detach().numpy().any()
    assert mha.bias_k.shape == (1, 1, 16) and mha.bias_k.detach().numpy().any()
    separate = MultiheadAttention(16, 4, kdim=6, vdim=6)
    assert separate.in_proj_weight is None and separate.k_proj_weight.shape == (16, 6)


def test_attention_dropout_is_active_in_training_only():
    mha = MultiheadAttention(E, HEADS, dropout=0.5)
    x = flow.randn(L, N, E)
    for need_weights in (True, False):
        mha.train()
        first = mha(x, x, x, need_weights=need_weights)[0]
        second = mha(x, x, x, need_weights=need_weights)[0]
        assert not np.allclose(first.detach().numpy(), second.detach().numpy())
        mha.eval()
        first = mha(x, x, x, need_weights=need_weights)[0]
        second = mha(x, x, x, need_weights=need_weights)[0]
        np.testing.assert_allclose(first.detach().numpy(), second.detach().numpy(), atol=1e-6)


def test_returned_weights_are_the_dropped_out_ones():
    """As in PyTorch: the output is weights @ values with the weights after dropout."""
    mha = MultiheadAttention(E, HEADS, dropout=0.5, bias=False)
    x = flow.randn(L, N, E)
    _, weights = mha(x, x, x, average_attn_weights=False)
    weights = weights.detach().numpy()
    zeros = weights == 0
    assert zeros.any()
    kept = weights[~zeros]
    assert (kept > 0).all() and kept.max() <= 2.0  # kept probabilities are scaled by 1/(1-p)


def test_fully_masked_queries_match_torch():
    """A query that may attend to no key: NaN with the explicit weights, 0 through
    scaled_dot_product_attention, in PyTorch and here."""
    torch.manual_seed(10)
    ours, theirs = _load_from(MultiheadAttention(E, HEADS), torch.nn.MultiheadAttention(E, HEADS))
    x, tx = _leaf(np.random.default_rng(10), L, N, E)
    padding = np.zeros((N, L), dtype=bool)
    padding[0] = True
    for need_weights in (True, False):
        out = ours(x, x, x, flow.tensor(padding), need_weights)[0].detach().numpy()
        their_out = theirs(tx, tx, tx, torch.tensor(padding), need_weights)[0].detach().numpy()
        np.testing.assert_allclose(out, their_out, atol=ATOL)
        assert np.isnan(out[:, 0]).all() == need_weights


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m, x: m(x, x, x, is_causal=True), TideflowError,
         "Need attn_mask if specifying the is_causal hint"),
        (lambda m, x: m(x, x, x, attn_mask=flow.zeros(L, L + 1)), ShapeError,
         r"The shape of the 2D attn_mask is \[5, 6\], but should be \(5, 5\)."),
        (lambda m, x: m(x, x, x, attn_mask=flow.zeros(N, L, L)), ShapeError,
         r"The shape of the 3D attn_mask is \[3, 5, 5\], but should be \(6, 5, 5\)."),
        (lambda m, x: m(x, x, x, attn_mask=flow.zeros(1, 1, L, L)), ShapeError,
         "expected `attn_mask` to be `None`, 2-D or 3-D but found 4-D tensor instead"),
        (lambda m, x: m(x, x, x, key_padding_mask=flow.zeros(N, L + 1, dtype=flow.bool)),
         ShapeError, r"Expected key_padding_mask of shape \(3, 5\) .*got \[3, 6\]"),
        (lambda m, x: m(x, x, x, key_padding_mask=flow.zeros(N, dtype=flow.bool)), ShapeError,
         "expected `key_padding_mask` to be `None` or 2-D but found 1-D tensor instead"),
        (lambda m, x: m(x, x, x, attn_mask=flow.zeros(L, L, dtype=flow.int64)), DTypeError,
         "only bool and floating types of attn_mask are supported, got tideflow.int64"),
        (lambda m, x: m(x, x[0], x[0]), ShapeError,
         "For batched \\(3-D\\) `query`, expected `key` and `value` to be 3-D but found 2-D"),
        (lambda m, x: m(x[None], x[None], x[None]), ShapeError,
         "query should be unbatched 2D or batched 3D tensor but received 4-D query tensor"),
        (lambda m, x: m(x, x, x[:, :, :4]), ShapeError, "key shape .* does not match value"),
        (lambda m, x: m(x[:, :, :4], x, x), ShapeError,
         "was expecting embedding dimension of 8, but got 4"),
    ],
)  # fmt: skip
def test_multihead_attention_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(MultiheadAttention(E, HEADS), flow.randn(L, N, E))


@pytest.mark.parametrize(
    ("build", "shapes", "message"),
    [
        (lambda: MultiheadAttention(E, HEADS, batch_first=True), ((N, L, E), (2, S, E), (2, S, E)),
         r"MultiheadAttention: query and key must have the same batch size \(dim 0\), got "
         r"query of shape \[3, 5, 8\] and key of shape \[2, 6, 8\]"),
        (lambda: MultiheadAttention(E, HEADS), ((L, N, E), (S, 2, E), (S, 2, E)),
         r"query and key must have the same batch size \(dim 1\), got query of shape "
         r"\[5, 3, 8\] and key of shape \[6, 2, 8\]"),
        (lambda: MultiheadAttention(E, HEADS, batch_first=True), ((N, L, E), (N, S, E), (N, 4, E)),
         r"MultiheadAttention: key shape \[3, 6, 8\] does not match value shape \[3, 4, 8\]"),
        (lambda: MultiheadAttention(E, HEADS, kdim=5, vdim=7, batch_first=True),
         ((N, L, E), (N, S, 5), (N, 4, 7)),
         r"MultiheadAttention: key's sequence and batch dims \[3, 6\] do not match value's "
         r"\[3, 4\]"),
    ],
)  # fmt: skip
def test_multihead_attention_errors_show_the_shapes_as_passed(build, shapes, message):
    """With batch_first the inputs are transposed inside; errors still show the user's shapes."""
    with pytest.raises(ShapeError, match=message):
        build()(*(flow.randn(*shape) for shape in shapes))


def test_multi_head_attention_forward_errors_name_the_function():
    q, w = flow.randn(L, N, E), flow.randn(3 * E, E)
    with pytest.raises(ShapeError, match="multi_head_attention_forward: was expecting embedding "
                                         "dimension of 4, but got 8"):  # fmt: skip
        multi_head_attention_forward(q, q, q, 4, HEADS, w, None, None, None, False, 0.0,
                                     flow.randn(E, E), None)  # fmt: skip
    with pytest.raises(DTypeError, match="multi_head_attention_forward: only bool and floating "
                                         "types of attn_mask"):  # fmt: skip
        multi_head_attention_forward(q, q, q, E, HEADS, w, None, None, None, False, 0.0,
                                     flow.randn(E, E), None,
                                     attn_mask=flow.zeros(L, L, dtype=flow.int64))  # fmt: skip


def test_multihead_attention_constructor_errors_and_mask_warning():
    with pytest.raises(ValueError, match="embed_dim must be divisible by num_heads, got "
                                         "embed_dim=10 and num_heads=3"):  # fmt: skip
        MultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="got embed_dim=0 and num_heads=2 instead"):
        MultiheadAttention(0, 2)
    mha = MultiheadAttention(E, HEADS)
    x = flow.randn(L, N, E)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask"):
        mha(x, x, x, key_padding_mask=flow.zeros(N, L, dtype=flow.bool), attn_mask=flow.zeros(L, L))


# -- Transformer layers and stacks ----------------------------------------------------------
LAYER_KW = {"d_model": E, "nhead": HEADS, "dim_feedforward": 16}


def _activation_pair(name):
    return {"relu": ("relu", "relu"), "gelu": ("gelu", "gelu"),
            "F.gelu": (F.gelu, torch.nn.functional.gelu),
            "GELU()": (GELU(), torch.nn.GELU())}[name]  # fmt: skip


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize(
    ("activation", "batch_first"),
    [("relu", False), ("gelu", True), ("F.gelu", False), ("GELU()", True)],
)
def test_encoder_layer_matches_torch(norm_first, activation, batch_first):
    torch.manual_seed(5)
    ours_act, their_act = _activation_pair(activation)
    kw = {**LAYER_KW, "norm_first": norm_first, "batch_first": batch_first}
    ours, theirs = _load_from(
        TransformerEncoderLayer(**kw, activation=ours_act),
        torch.nn.TransformerEncoderLayer(**kw, activation=their_act),
    )
    _same_state_dict_layout(ours, theirs)
    x, tx = _leaf(np.random.default_rng(5), *((N, S, E) if batch_first else (S, N, E)))
    mask, their_mask = _mask("float2d", S, S)
    padding, their_padding = _mask("float_padding", S, S)
    out = ours(x, src_mask=mask, src_key_padding_mask=padding)
    their_out = theirs(tx, src_mask=their_mask, src_key_padding_mask=their_padding)
    _assert_close(out, their_out)
    _check_gradients(ours, theirs, out, their_out, [x], [tx])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize(("activation", "batch_first"), [("relu", True), ("gelu", False)])
def test_decoder_layer_matches_torch(norm_first, activation, batch_first):
    torch.manual_seed(6)
    kw = {**LAYER_KW, "norm_first": norm_first, "batch_first": batch_first,
          "activation": activation}  # fmt: skip
    ours, theirs = _load_from(TransformerDecoderLayer(**kw), torch.nn.TransformerDecoderLayer(**kw))
    _same_state_dict_layout(ours, theirs)
    rng = np.random.default_rng(6)
    tgt, their_tgt = _leaf(rng, *((N, L, E) if batch_first else (L, N, E)))
    memory, their_memory = _leaf(rng, *((N, S, E) if batch_first else (S, N, E)))
    causal = Transformer.generate_square_subsequent_mask(L, dtype=flow.float64)
    their_causal = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64)
    padding, their_padding = _mask("padding")
    memory_mask, their_memory_mask = _mask("bool2d")
    out = ours(tgt, memory, tgt_mask=causal, memory_mask=memory_mask,
               memory_key_padding_mask=padding, tgt_is_causal=True)  # fmt: skip
    their_out = theirs(their_tgt, their_memory, tgt_mask=their_causal,
                       memory_mask=their_memory_mask, memory_key_padding_mask=their_padding,
                       tgt_is_causal=True)  # fmt: skip
    _assert_close(out, their_out)
    _check_gradients(ours, theirs, out, their_out, [tgt, memory], [their_tgt, their_memory])


def test_encoder_and_decoder_stacks_match_torch():
    torch.manual_seed(7)
    rng = np.random.default_rng(7)
    encoder, their_encoder = _load_from(
        TransformerEncoder(TransformerEncoderLayer(**LAYER_KW), 2, norm=flow.nn.LayerNorm(E)),
        torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(**LAYER_KW), 2,
                                    norm=torch.nn.LayerNorm(E), enable_nested_tensor=False),
    )  # fmt: skip
    decoder, their_decoder = _load_from(
        TransformerDecoder(TransformerDecoderLayer(**LAYER_KW), 2),
        torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(**LAYER_KW), 2),
    )
    _same_state_dict_layout(encoder, their_encoder)
    _same_state_dict_layout(decoder, their_decoder)
    (src, their_src), (tgt, their_tgt) = _leaf(rng, S, N, E), _leaf(rng, L, N, E)
    causal = Transformer.generate_square_subsequent_mask(S, dtype=flow.float64)
    their_causal = torch.nn.Transformer.generate_square_subsequent_mask(S, dtype=torch.float64)
    # a causal mask without the hint is detected as causal
    memory = encoder(src, mask=causal)
    their_memory = their_encoder(their_src, mask=their_causal)
    _assert_close(memory, their_memory)
    out = decoder(tgt, memory, tgt_mask=causal[:L, :L])
    their_out = their_decoder(their_tgt, their_memory, tgt_mask=their_causal[:L, :L])
    _assert_close(out, their_out)
    for stack in (encoder, decoder):  # deep copies: each layer has its own parameters
        assert stack.layers[0].linear1.weight is not stack.layers[1].linear1.weight
    _check_gradients(decoder, their_decoder, out, their_out, [tgt, src], [their_tgt, their_src])
    for p, q in zip(encoder.parameters(), their_encoder.parameters(), strict=True):
        _assert_close(p.grad, q.grad)


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_matches_torch(batch_first):
    torch.manual_seed(8)
    rng = np.random.default_rng(8)
    kw = {"d_model": E, "nhead": HEADS, "num_encoder_layers": 2, "num_decoder_layers": 2,
          "dim_feedforward": 16, "batch_first": batch_first}  # fmt: skip
    ours, theirs = _load_from(Transformer(**kw), _torch_transformer(**kw))
    _same_state_dict_layout(ours, theirs)
    src, their_src = _leaf(rng, *((N, S, E) if batch_first else (S, N, E)))
    tgt, their_tgt = _leaf(rng, *((N, L, E) if batch_first else (L, N, E)))
    tgt_mask = Transformer.generate_square_subsequent_mask(L, dtype=flow.float64)
    their_tgt_mask = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64)
    padding, their_padding = _mask("padding")
    out = ours(src, tgt, tgt_mask=tgt_mask, src_key_padding_mask=padding,
               memory_key_padding_mask=padding)  # fmt: skip
    their_out = theirs(their_src, their_tgt, tgt_mask=their_tgt_mask,
                       src_key_padding_mask=their_padding,
                       memory_key_padding_mask=their_padding)  # fmt: skip
    _assert_close(out, their_out)
    _check_gradients(ours, theirs, out, their_out, [src, tgt], [their_src, their_tgt])


def test_unbatched_transformer_matches_torch():
    torch.manual_seed(9)
    kw = {"d_model": E, "nhead": HEADS, "num_encoder_layers": 1, "num_decoder_layers": 1,
          "dim_feedforward": 16, "norm_first": True}  # fmt: skip
    ours, theirs = _load_from(Transformer(**kw), _torch_transformer(**kw))
    rng = np.random.default_rng(9)
    (src, their_src), (tgt, their_tgt) = _leaf(rng, S, E), _leaf(rng, L, E)
    out, their_out = ours(src, tgt), theirs(their_src, their_tgt)
    assert out.shape == (L, E)
    _assert_close(out, their_out)
    _check_gradients(ours, theirs, out, their_out, [src, tgt], [their_src, their_tgt])


def test_generate_square_subsequent_mask_equals_torch():
    ours = Transformer.generate_square_subsequent_mask(4)
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(4)
    assert ours.dtype == flow.float32
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_transformer_initialization_is_xavier_for_matrices():
    model = Transformer(d_model=16, nhead=4, num_encoder_layers=1, num_decoder_layers=1,
                        dim_feedforward=64)  # fmt: skip
    w = model.encoder.layers[0].linear1.weight.detach().numpy()  # (64, 16)
    bound = np.sqrt(6.0 / (16 + 64))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    norm = model.decoder.norm
    assert (norm.weight.detach().numpy() == 1).all() and not norm.bias.detach().numpy().any()


def test_transformer_dropout_is_active_in_training_only():
    model = Transformer(d_model=E, nhead=HEADS, num_encoder_layers=1, num_decoder_layers=1,
                        dim_feedforward=16, dropout=0.5)  # fmt: skip
    src, tgt = flow.randn(S, N, E), flow.randn(L, N, E)
    first, second = model(src, tgt), model(src, tgt)
    assert not np.allclose(first.detach().numpy(), second.detach().numpy())
    model.eval()
    np.testing.assert_array_equal(model(src, tgt).detach().numpy(),
                                  model(src, tgt).detach().numpy())  # fmt: skip


def test_custom_encoder_and_decoder_replace_the_stacks():
    encoder = TransformerEncoder(TransformerEncoderLayer(**LAYER_KW), 1)
    decoder = TransformerDecoder(TransformerDecoderLayer(**LAYER_KW), 1)
    model = Transformer(d_model=E, nhead=HEADS, custom_encoder=encoder, custom_decoder=decoder)
    assert model.encoder is encoder and model.decoder is decoder
    assert model(flow.randn(S, N, E), flow.randn(L, N, E)).shape == (L, N, E)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: TransformerEncoderLayer(E, HEADS, activation="tanh"), TideflowError,
         "activation should be relu/gelu, not tanh"),
        (lambda: Transformer(E, HEADS, 1, 1, 16)(flow.randn(S, N, E), flow.randn(L, 2, E)),
         ShapeError, r"the batch number of src and tgt must be equal, got src of shape "
                     r"\[6, 3, 8\] and tgt of shape \[5, 2, 8\]"),
        (lambda: Transformer(E, HEADS, 1, 1, 16)(flow.randn(S, N, E), flow.randn(L, N, 4)),
         ShapeError, r"the feature number of src and tgt must be equal to d_model \(8\)"),
    ],
)  # fmt: skip
def test_transformer_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


# -- documentation --------------------------------------------------------------------------
@pytest.mark.parametrize("module", [attention, transformer])
def test_docstring_examples_run(monkeypatch, module):
    for public in (attention, transformer):
        expose_public_names(monkeypatch, public, flow.nn)
    monkeypatch.setattr(F, "multi_head_attention_forward", multi_head_attention_forward,
                        raising=False)  # fmt: skip
    run_doctests(module)
