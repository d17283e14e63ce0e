"""`tideflow._C`, OneFlow's functional namespace: its names are tideflow's ops themselves, its
adapters take OneFlow's argument orders, and its fused ops equal their unfused compositions
and PyTorch's equivalents, forward and backward (float64, PyTorch's assert_close tolerances)."""

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.functional as F
from tideflow.testing.opinfo import TOLERANCES

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

RTOL, ATOL = TOLERANCES["float64"]

# OneFlow functional name -> the tideflow op it must be (a view, not a second implementation).
SAME_OPS = {
    "gelu": F.gelu,
    "relu": F.relu,
    "softmax": F.softmax,
    "log_softmax": F.log_softmax,
    "sigmoid": flow.sigmoid,
    "add": flow.add,
    "where": flow.where,
    "reshape": flow.reshape,
    "tril": flow.tril,
    "linear": F.linear,
    "conv2d": F.conv2d,
    "equal": flow.eq,
    "greater": flow.gt,
    "negative": flow.neg,
    "concat": flow.cat,
    "reduce_sum": flow.sum,
    "reduce_max": flow.amax,
    "dim_gather": flow.gather,
}


def _pair(*shape, rng, low=-2.0, high=2.0):
    """The same float64 values as a tideflow and a PyTorch leaf that require grad."""
    a = rng.uniform(low, high, size=shape)
    return (
        flow.tensor(a, requires_grad=True),
        torch.tensor(a, requires_grad=True),
    )


def _close(got, want, what=""):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=RTOL, atol=ATOL, err_msg=what)


def _check_grads(fout, tout, finputs, tinputs, rng):
    cot = rng.standard_normal(tuple(tout.shape))
    fg = flow.autograd.grad([fout], finputs, [flow.tensor(cot)])
    tg = torch.autograd.grad([tout], tinputs, [torch.tensor(cot)])
    for i, (a, b) in enumerate(zip(fg, tg, strict=True)):
        _close(a, b, f"gradient of input {i}")


@pytest.mark.parametrize(("name", "op"), SAME_OPS.items())
def test_names_are_the_ops_themselves(name, op):
    assert getattr(flow._C, name) is op


def test_unknown_names_raise_attribute_error_naming_them():
    with pytest.raises(AttributeError, match=r"tideflow\._C has no function 'fused_mlp'"):
        flow._C.fused_mlp  # noqa: B018
    assert not hasattr(flow._C, "no_such_function")


# -- adapters -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("transpose_a", "transpose_b", "alpha"),
    [(False, True, 0.5), (True, False, 2.0), (True, True, 1.0)],
)
def test_matmul_transposes_and_scales(transpose_a, transpose_b, alpha):
    rng = np.random.default_rng(0)
    fa, ta = _pair(*((2, 4, 3) if transpose_a else (2, 3, 4)), rng=rng)
    fb, tb = _pair(*((5, 4) if transpose_b else (4, 5)), rng=rng)
    fout = flow._C.matmul(fa, fb, transpose_a, transpose_b, alpha)
    ta_, tb_ = (ta.transpose(-2, -1) if transpose_a else ta), (tb.T if transpose_b else tb)
    tout = alpha * (ta_ @ tb_)
    _close(fout, tout)
    _check_grads(fout, tout, [fa, fb], [ta, tb], rng)


def test_bias_add_adds_along_the_axis():
    rng = np.random.default_rng(1)
    fx, tx = _pair(2, 3, 4, rng=rng)
    fb, tb = _pair(3, rng=rng)
    fout = flow._C.bias_add(fx, fb, axis=1)
    tout = tx + tb[:, None]
    _close(fout, tout)
    _check_grads(fout, tout, [fx, fb], [tx, tb], rng)
    with pytest.raises(flow.ShapeError, match=r"bias_add: expected a bias of shape \[4\]"):
        flow._C.bias_add(fx, fb, axis=2)


def test_transpose_takes_a_permutation_or_two_dims():
    x = flow.randn(2, 3, 4)
    assert flow._C.transpose(x, [2, 0, 1]).shape == (4, 2, 3)
    assert flow._C.transpose(x, 0, 2).shape == (4, 3, 2)


def test_losses_take_oneflows_positional_order():
    rng = np.random.default_rng(2)
    flogits, tlogits = _pair(4, 5, rng=rng)
    target = np.array([0, 1, 4, 1])
    # OneFlow: (input, target, weight, ignore_index, reduction); PyTorch puts size_average 4th
    fout = flow._C.cross_entropy(flogits, flow.tensor(target), None, 1, "sum")
    tout = torch.nn.functional.cross_entropy(
        tlogits, torch.tensor(target), ignore_index=1, reduction="sum"
    )
    _close(fout, tout)
    _check_grads(fout, tout, [flogits], [tlogits], rng)
    per_example = flow._C.sparse_softmax_cross_entropy(flogits, flow.tensor(target))
    tF = torch.nn.functional
    _close(per_example, tF.cross_entropy(tlogits, torch.tensor(target), reduction="none"))
    fy, ty = _pair(4, 5, rng=rng)
    _close(flow._C.mse_loss(flogits, fy, "sum"), tF.mse_loss(tlogits, ty, reduction="sum"))
    _close(
        flow._C.smooth_l1_loss(flogits, fy, 0.5, "none"),
        tF.smooth_l1_loss(tlogits, ty, reduction="none", beta=0.5),
    )


def test_layer_norm_affine_normalizes_from_begin_norm_axis():
    rng = np.random.default_rng(3)
    fx, tx = _pair(2, 3, 4, rng=rng)
    fg, tg = _pair(3, 4, rng=rng)
    fb, tb = _pair(3, 4, rng=rng)
    fout = flow._C.layer_norm_affine(fx, fg, fb, 1, 1, 1e-5)
    tout = torch.nn.functional.layer_norm(tx, (3, 4), tg, tb, 1e-5)
    _close(fout, tout)
    _check_grads(fout, tout, [fx, fg, fb], [tx, tg, tb], rng)


def test_one_hot_on_and_off_values():
    got = flow._C.one_hot(flow.tensor([2, 0]), 3, 5, -1)
    assert got.tolist() == [[-1, -1, 5], [5, -1, -1]]
    assert got.dtype is flow.int64


def test_dropout_adds_the_addend_after_dropping():
    x, addend = flow.randn(3, 4), flow.randn(3, 4)
    assert flow.equal(flow._C.dropout(x, 0.0, addend=addend), x + addend)
    flow.manual_seed(7)
    fused = flow._C.dropout(x, 0.5, addend=addend)
    flow.manual_seed(7)
    assert flow.equal(fused, F.dropout(x, 0.5) + addend)


def test_a_generator_is_refused_not_ignored():
    with pytest.raises(flow.ArgumentError, match=r"dropout: generator= is not supported"):
        flow._C.dropout(flow.ones(3), 0.5, True, False, flow.default_generator)


# -- fused ops ------------------------------------------------------------------------------
def test_fused_bias_add_gelu_is_gelu_of_the_sum():
    rng = np.random.default_rng(4)
    fa, ta = _pair(2, 3, 4, rng=rng)
    fb, tb = _pair(4, rng=rng)
    fout = flow._C.fused_bias_add_gelu(fa, fb, axis=2)
    tout = torch.nn.functional.gelu(ta + tb)
    _close(fout, tout)
    _check_grads(fout, tout, [fa, fb], [ta, tb], rng)
    with pytest.raises(flow.ShapeError, match=r"fused_bias_add_gelu: expected a bias"):
        flow._C.fused_bias_add_gelu(fa, fb, axis=1)


def test_fused_bias_add_dropout_is_dropout_of_the_sum():
    a, b = flow.randn(3, 4), flow.randn(3)
    flow.manual_seed(3)
    fused = flow._C.fused_bias_add_dropout(a, b, p=0.3, axis=0)
    flow.manual_seed(3)
    assert flow.equal(fused, F.dropout(a + b[:, None], 0.3))
    assert flow.equal(flow._C.fused_bias_add_dropout(a, b, p=0.0, axis=0), a + b[:, None])


def _causal_softmax_torch(x, scale, fill, diagonal):
    keep = torch.ones(x.shape[-2:], dtype=torch.bool).tril(diagonal)
    return torch.softmax(torch.where(keep, x * scale, torch.tensor(fill, dtype=x.dtype)), -1)


@pytest.mark.parametrize(("diagonal", "fill"), [(0, 0.0), (-1, -2.0), (1, -10000.0)])
def test_fused_scale_tril_softmax_mask_scale_without_dropout(diagonal, fill):
    rng = np.random.default_rng(5)
    fx, tx = _pair(2, 5, 5, rng=rng)
    y, softmax_y = flow._C.fused_scale_tril_softmax_mask_scale(
        fx, p=0.0, diagonal=diagonal, tril_scale_value=0.7, tril_fill_value=fill
    )
    tout = _causal_softmax_torch(tx, 0.7, fill, diagonal)
    _close(y, tout)
    _close(softmax_y, tout)
    _check_grads(y, tout, [fx], [tx], rng)


def test_fused_scale_tril_softmax_mask_scale_drops_like_the_composition():
    x = flow.randn(2, 4, 4)
    flow.manual_seed(11)
    y, softmax_y = flow._C.fused_scale_tril_softmax_mask_scale(x, p=0.4, tril_scale_value=2.0)
    flow.manual_seed(11)
    keep = flow.ones(4, 4, dtype=flow.bool).tril()
    unfused = F.softmax(flow.where(keep, x * 2.0, 0.0), dim=-1)
    assert flow.equal(softmax_y, unfused)
    assert flow.equal(y, F.dropout(unfused, 0.4))


def test_fused_scale_mask_softmax_and_its_dropout_form():
    rng = np.random.default_rng(6)
    fx, tx = _pair(2, 3, 4, rng=rng)
    mask = rng.random((3, 4)) < 0.7
    fout = flow._C.fused_scale_mask_softmax(fx, flow.tensor(mask), fill_value=-1e4, scale=0.5)
    tout = torch.softmax((tx * 0.5).masked_fill(~torch.tensor(mask), -1e4), -1)
    _close(fout, tout)
    _check_grads(fout, tout, [fx], [tx], rng)
    y, softmax_y = flow._C.fused_scale_mask_softmax_dropout(
        fx, flow.tensor(mask.astype(np.int8)), fill_value=-1e4, scale=0.5, training=False
    )
    _close(y, tout)
    _close(softmax_y, tout)


@pytest.mark.parametrize("residual", [False, True])
def test_fused_matmul_bias_is_a_linear_layer(residual):
    rng = np.random.default_rng(7)
    fx, tx = _pair(2, 3, 4, rng=rng)
    fw, tw = _pair(5, 4, rng=rng)
    fb, tb = _pair(5, rng=rng)
    fr, tr = _pair(2, 3, 5, rng=rng)
    fout = flow._C.fused_matmul_bias(fx, fw, fb, fr if residual else None)
    tout = torch.nn.functional.linear(tx, tw, tb) + (tr if residual else 0)
    _close(fout, tout)
    _check_grads(fout, tout, [fx, fw, fb], [tx, tw, tb], rng)


def test_fused_self_attention_splits_heads_and_multiplies():
    rng = np.random.default_rng(8)
    seq, batch, heads, head_size = 5, 2, 3, 4
    fh, th = _pair(seq, batch, heads * 3 * head_size, rng=rng)
    qmk, v = flow._C.fused_self_attention(fh, head_size=head_size, alpha=0.25)
    assert flow._C.fused_self_attention_query_mul_key_and_value is flow._C.fused_self_attention
    packed = th.reshape(seq, batch, heads, 3 * head_size).permute(1, 2, 0, 3)
    tq, tk, tv = packed.split(head_size, dim=-1)
    tqmk = 0.25 * tq @ tk.transpose(-2, -1)
    _close(qmk, tqmk)
    _close(v, tv)
    # OneFlow's own check: attention through the fused outputs, gradients included
    _check_grads(qmk @ v, tqmk @ tv, [fh], [th], rng)
    with pytest.raises(flow.ShapeError, match=r"fused_self_attention: expected hidden_states"):
        flow._C.fused_self_attention(flow.randn(5, 2, 10), head_size=4)


def test_docstring_examples_run():
    import tideflow.ops.nn.fused

    from .test_nn_layers import run_doctests

    run_doctests(tideflow.ops.nn.fused)
    run_doctests(flow._C)
