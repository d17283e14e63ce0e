"""nn.functional part A beyond the op database: user-facing errors, warnings, in-place and
running-statistics behaviour, dropout statistics, and gradients PyTorch cannot serve as the
oracle for."""

from functools import partial

import numpy as np
import pytest

import tideflow as flow
import tideflow.nn.functional as F
from tideflow.framework.errors import AutogradError, DTypeError, ShapeError, TideflowError


def _t(values, dtype=np.float64, **kw):
    return flow.tensor(np.asarray(values, dtype=dtype), **kw)


def _randn(*shape, seed=0, **kw):
    return _t(np.random.default_rng(seed).standard_normal(shape), **kw)


# -- linear ---------------------------------------------------------------------------------
def test_linear_feature_mismatch_names_both_shapes():
    msg = r"linear: input has 5 features but weight expects 4 \(weight shape \[3, 4\]\)"
    with pytest.raises(ShapeError, match=msg):
        F.linear(flow.ones(2, 5), flow.ones(3, 4))


def test_linear_rejects_mixed_dtypes_and_bad_bias():
    with pytest.raises(DTypeError, match=r"linear: .* same dtype, got float32 and float64"):
        F.linear(flow.ones(2, 4), flow.ones(3, 4, dtype=flow.float64))
    with pytest.raises(ShapeError, match=r"linear: bias of shape \[2\] does not broadcast"):
        F.linear(flow.ones(2, 4), flow.ones(3, 4), flow.ones(2))
    with pytest.raises(ShapeError, match="linear: expected input of at least 1 dimension"):
        F.linear(flow.ones(()), flow.ones(3, 1))


def test_bilinear_checks_the_weight_shape():
    with pytest.raises(ShapeError, match=r"bilinear: .*got weight of shape \[4, 2, 5\]"):
        F.bilinear(flow.ones(2, 3), flow.ones(2, 5), flow.ones(4, 2, 5))


def test_linear_second_order_gradients():
    x, w, b = _randn(3, 4, requires_grad=True), _randn(2, 4, seed=1, requires_grad=True), None
    assert flow.autograd.gradgradcheck(lambda x, w: F.linear(x, w, b), (x, w))


# -- softmax --------------------------------------------------------------------------------
def test_softmax_without_dim_warns_like_torch():
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        y = F.softmax(_randn(2, 3))
    np.testing.assert_allclose(y.sum(1).numpy(), [1.0, 1.0])  # dim 1 for 2-d inputs


def test_softmax_errors():
    with pytest.raises(DTypeError, match="softmax: expected a floating point input, got int64"):
        F.softmax(flow.tensor([1, 2]), 0)
    with pytest.raises(IndexError, match="log_softmax: dimension 2 is out of range"):
        F.log_softmax(flow.ones(2, 3), 2)


def test_softmax_methods_and_dtype_argument():
    x = _randn(2, 3).float()
    np.testing.assert_allclose(x.softmax(-1).numpy(), F.softmax(x, -1).numpy())
    np.testing.assert_allclose(x.log_softmax(0).numpy(), F.log_softmax(x, 0).numpy())
    assert F.softmax(x, 1, dtype=flow.float64).dtype is flow.float64


def test_softmax_of_large_and_infinite_logits():
    y = F.softmax(_t([[1000.0, 0.0], [-np.inf, 0.0]]), 1)
    np.testing.assert_allclose(y.numpy(), [[1.0, 0.0], [0.0, 1.0]])
    assert np.isnan(F.softmax(_t([[-np.inf, -np.inf]]), 1).numpy()).all()  # as in torch


# -- losses ---------------------------------------------------------------------------------
def test_cross_entropy_target_errors():
    x = flow.ones(3, 5)
    msg = (
        r"cross_entropy: expected target of shape \[N\] = \[3\] "
        r"for input of shape \[3, 5\], got \[2\]"
    )
    with pytest.raises(ShapeError, match=msg):
        F.cross_entropy(x, flow.tensor([0, 1]))
    msg = (
        r"cross_entropy: expected a target of class "
        r"probabilities of the input's shape \[3, 5\], got \[3\]"
    )
    with pytest.raises(ShapeError, match=msg):
        F.cross_entropy(x, flow.ones(3))
    with pytest.raises(DTypeError, match=r"cross_entropy: .*int64 .*got int32"):
        F.cross_entropy(x, flow.tensor([0, 1, 2], dtype=flow.int32))
    with pytest.raises(ShapeError, match=r"cross_entropy: expected weight of shape \[5\]"):
        F.cross_entropy(x, flow.tensor([0, 1, 2]), flow.ones(4))
    with pytest.raises(ValueError, match=r"label_smoothing must be between 0\.0 and 1\.0"):
        F.cross_entropy(x, flow.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(TideflowError, match="ignore_index is not supported"):
        F.cross_entropy(x, flow.ones(3, 5), ignore_index=1)


def test_out_of_range_targets_name_the_target():
    with pytest.raises(TideflowError, match="nll_loss: target 7 is out of bounds for 5 classes"):
        F.cross_entropy(flow.ones(3, 5), flow.tensor([0, 7, 1]))
    with pytest.raises(TideflowError, match="target -1 is out of bounds"):
        F.nll_loss(flow.ones(3, 5), flow.tensor([0, -1, 1]))


def test_all_ignored_targets_give_nan_mean_and_zero_sum():
    x, t = _randn(2, 3, requires_grad=True), flow.tensor([-100, -100])
    assert np.isnan(F.cross_entropy(x, t).item())
    loss = F.cross_entropy(x, t, reduction="sum")
    loss.backward()
    assert loss.item() == 0.0
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((2, 3)))


def test_class_weights_that_require_grad_are_refused():
    w = flow.ones(3, requires_grad=True)
    msg = "cross_entropy: the function is not differentiable with respect to weight"
    with pytest.raises(TideflowError, match=msg):
        F.cross_entropy(flow.ones(2, 3), flow.tensor([0, 1]), w)
    with flow.no_grad():
        F.cross_entropy(flow.ones(2, 3), flow.tensor([0, 1]), w)


def test_cross_entropy_second_order_gradients():
    x = _randn(3, 4, requires_grad=True)
    t, w = flow.tensor([0, 3, 1]), _t([0.5, 1.0, 2.0, 1.5])
    for kw in ({}, {"label_smoothing": 0.2, "ignore_index": 3}, {"reduction": "none"}):
        assert flow.autograd.gradgradcheck(partial(F.cross_entropy, target=t, weight=w, **kw), (x,))


def test_binary_cross_entropy_clamps_the_log():
    x, t = _t([0.0, 1.0, 0.5]), _t([1.0, 0.0, 1.0])
    loss = F.binary_cross_entropy(x, t, reduction="none")
    np.testing.assert_allclose(loss.numpy(), [100.0, 100.0, np.log(2)])
    with pytest.raises(TideflowError, match="input should be between 0 and 1"):
        F.binary_cross_entropy(_t([1.5]), _t([1.0]))
    msg = r"binary_cross_entropy: expected target of the input's shape \[3\], got \[1\]"
    with pytest.raises(ShapeError, match=msg):
        F.binary_cross_entropy(x, _t([1.0]))


def test_binary_cross_entropy_weight_gradients():
    # PyTorch refuses these gradients; ours are the true derivatives.
    x = _t([[0.2, 0.7], [0.9, 0.4]], requires_grad=True)
    t = _t([[0.0, 1.0], [1.0, 0.3]], requires_grad=True)
    w = _t([0.5, 2.0], requires_grad=True)
    assert flow.autograd.gradcheck(F.binary_cross_entropy, (x, t, w))
    logits = _randn(2, 2, requires_grad=True)
    pw = _t([0.5, 3.0], requires_grad=True)

    def with_logits(x, t, w, pw):
        return F.binary_cross_entropy_with_logits(x, t, w, pos_weight=pw)

    assert flow.autograd.gradcheck(with_logits, (logits, t, w, pw))
    assert flow.autograd.gradgradcheck(with_logits, (logits, t, w, pw))


def test_binary_cross_entropy_with_logits_is_stable():
    x, t = _t([-200.0, 200.0, 0.0]), _t([1.0, 0.0, 0.5])
    np.testing.assert_allclose(
        F.binary_cross_entropy_with_logits(x, t, reduction="none").numpy(), [200, 200, np.log(2)]
    )


def test_reduction_arguments():
    x, t = _t([1.0, 2.0]), _t([0.0, 0.0])
    with pytest.raises(ValueError, match="elementwise is not a valid value for reduction"):
        F.mse_loss(x, t, reduction="elementwise")
    msg = "size_average and reduce args will be deprecated, please use reduction='sum'"
    with pytest.warns(UserWarning, match=msg):
        loss = F.mse_loss(x, t, size_average=False)
    assert loss.item() == 5.0


def test_mismatched_shapes_broadcast_with_a_warning_like_torch():
    with pytest.warns(UserWarning, match="Using a target size"):
        loss = F.mse_loss(_t([[1.0], [2.0]]), _t([0.0, 1.0]), reduction="sum")
    assert loss.item() == 1 + 0 + 4 + 1


def test_kl_div_mean_warns_and_batchmean_is_the_divergence():
    p, q = _t([[0.3, 0.7]]), _t([[0.5, 0.5]])
    with pytest.warns(UserWarning, match="reduction: 'mean' divides the total loss"):
        F.kl_div(q.log(), p)
    want = (p * (p / q).log()).sum().item()
    assert F.kl_div(q.log(), p, reduction="batchmean").item() == pytest.approx(want)


def test_loss_argument_errors():
    with pytest.raises(ValueError, match="Weights and input must have the same size"):
        F.mse_loss(flow.ones(3), flow.ones(3), weight=flow.ones(2))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_loss(flow.ones(2, 3), flow.ones(2, 3), flow.ones(2, 3), margin=0)
    with pytest.raises(ShapeError, match="margin_ranking_loss: all input tensors"):
        F.margin_ranking_loss(flow.ones(3), flow.ones(3), flow.ones(1, 3))
    with pytest.raises(ShapeError, match="cosine_embedding_loss: expected 1-d inputs"):
        F.cosine_embedding_loss(flow.ones(2, 3), flow.ones(2, 3), flow.ones(2, 1))


# -- distances ------------------------------------------------------------------------------
def test_cosine_similarity_dtypes():
    assert F.cosine_similarity(flow.tensor([[1, 0]]), flow.tensor([[1.0, 1.0]])).dtype is (
        flow.float32
    )
    with pytest.raises(DTypeError, match="cosine_similarity: expected a floating point"):
        F.cosine_similarity(flow.tensor([[1, 0]]), flow.tensor([[1, 1]]))


def test_cosine_similarity_of_a_zero_vector_is_zero():
    x = _t([[0.0, 0.0], [1.0, 0.0]], requires_grad=True)
    y = F.cosine_similarity(x, _t([[1.0, 1.0], [0.0, 1.0]]))
    np.testing.assert_allclose(y.detach().numpy(), [0.0, 0.0])
    y.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_one_hot():
    np.testing.assert_array_equal(F.one_hot(flow.tensor([2, 0])).numpy(), [[0, 0, 1], [1, 0, 0]])
    assert F.one_hot(flow.tensor([1]), 4).dtype is flow.int64
    with pytest.raises(DTypeError, match="one_hot: expected an index tensor of dtype int64"):
        F.one_hot(flow.tensor([1], dtype=flow.int32), 3)
    with pytest.raises(TideflowError, match="one_hot: class value 3 is out of range for 3"):
        F.one_hot(flow.tensor([0, 3]), 3)
    with pytest.raises(TideflowError, match="cannot infer the number of classes"):
        F.one_hot(flow.tensor([], dtype=flow.int64))


# -- embedding ------------------------------------------------------------------------------
def test_embedding_gradients_skip_the_padding_row_and_scale_by_frequency():
    w = _randn(4, 2, requires_grad=True)
    idx = flow.tensor([[0, 1, 1], [3, 1, 0]])
    F.embedding(idx, w, padding_idx=0).sum().backward()
    np.testing.assert_allclose(w.grad.numpy()[:, 0], [0.0, 3.0, 0.0, 1.0])
    w.grad = None
    F.embedding(idx, w, scale_grad_by_freq=True).sum().backward()
    np.testing.assert_allclose(w.grad.numpy()[:, 0], [1.0, 1.0, 0.0, 1.0])


def test_embedding_second_order_gradients():
    w = _randn(4, 2, requires_grad=True)
    idx = flow.tensor([[0, 1, 1], [3, 1, 0]])
    assert flow.autograd.gradgradcheck(lambda w: F.embedding(idx, w) ** 2, (w,))


def test_embedding_max_norm_renormalizes_the_rows_read_in_place():
    w = _t([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]], requires_grad=True)
    version = w._version_count
    y = F.embedding(flow.tensor([0, 1]), w, max_norm=1.0)
    norms = np.linalg.norm(w.detach().numpy(), axis=1)
    np.testing.assert_allclose(norms, [1.0, 0.5, 10.0], rtol=1e-6)  # row 2 is not read
    np.testing.assert_allclose(y.detach().numpy(), w.detach().numpy()[:2])
    assert w._version_count > version


def test_embedding_errors():
    w = flow.ones(4, 2)
    with pytest.raises(TideflowError, match="embedding: index 4 is out of range for 4"):
        F.embedding(flow.tensor([0, 4]), w)
    with pytest.raises(TideflowError, match="embedding: index -1 is out of range"):
        F.embedding(flow.tensor([-1]), w)
    with pytest.raises(DTypeError, match="embedding: expected indices of dtype int64 or int32"):
        F.embedding(flow.tensor([0.0]), w)
    with pytest.raises(ShapeError, match="padding_idx 4 must be within"):
        F.embedding(flow.tensor([0]), w, padding_idx=4)
    with pytest.raises(TideflowError, match="sparse gradients are not supported"):
        F.embedding(flow.tensor([0]), w, sparse=True)


# -- normalization --------------------------------------------------------------------------
def test_normalization_shape_errors():
    msg = r"layer_norm: normalized_shape=\[3\] expects input of shape \[\*, 3\], got \[2, 4\]"
    with pytest.raises(ShapeError, match=msg):
        F.layer_norm(flow.ones(2, 4), (3,))
    with pytest.raises(ShapeError, match=r"layer_norm: expected weight of shape \[4\]"):
        F.layer_norm(flow.ones(2, 4), (4,), flow.ones(3))
    with pytest.raises(ShapeError, match=r"group_norm: .*divisible by num_groups=4"):
        F.group_norm(flow.ones(2, 6, 3), 4)
    with pytest.raises(ValueError, match="more than 1 value per channel when training"):
        F.batch_norm(flow.ones(1, 3), None, None, training=True)
    with pytest.raises(TideflowError, match="running_mean and running_var must be given"):
        F.batch_norm(flow.ones(2, 3), None, None)
    with pytest.raises(ValueError, match="more than 1 spatial element"):
        F.instance_norm(flow.ones(2, 3, 1))
    with pytest.raises(DTypeError, match=r"layer_norm: expected weight of dtype float32 \(or "):
        F.layer_norm(flow.ones(2, 4), (4,), flow.ones(4, dtype=flow.float64))


def test_half_inputs_take_float32_parameters():
    x = _randn(2, 4).to(flow.bfloat16)
    y = F.layer_norm(x, (4,), flow.ones(4), flow.zeros(4))
    assert y.dtype is flow.bfloat16
    assert F.group_norm(x.reshape(2, 4, 1), 2, flow.ones(4)).dtype is flow.bfloat16


def test_batch_norm_updates_running_statistics_in_place():
    x = _randn(4, 3, 2)
    rm, rv = flow.zeros(3, dtype=flow.float64), flow.ones(3, dtype=flow.float64)
    version = rm._version_count
    F.batch_norm(x, rm, rv, training=True, momentum=0.25)
    data = x.numpy()
    mean, var = data.mean((0, 2)), data.var((0, 2), ddof=1)
    np.testing.assert_allclose(rm.numpy(), 0.25 * mean)
    np.testing.assert_allclose(rv.numpy(), 0.75 + 0.25 * var)
    assert rm._version_count > version
    with pytest.raises(TideflowError, match="not differentiable with respect to running_mean"):
        F.batch_norm(x, flow.zeros(3, requires_grad=True), rv)


def _batch_norm_training(x, running_mean, running_var):
    return F.batch_norm(x, running_mean, running_var, training=True, momentum=0.5)


def _instance_norm(x, running_mean, running_var):
    return F.instance_norm(x, running_mean, running_var, momentum=0.5)


@pytest.mark.parametrize(
    ("norm", "stats", "error", "message"),
    [(_batch_norm_training, ((5,), (3,)), ShapeError,
      r"batch_norm: expected running_mean of shape \[3\], got \[5\] \(input of shape "
      r"\[4, 3, 2\]\)"),
     (_batch_norm_training, ((3,), (3, 1)), ShapeError,
      r"batch_norm: expected running_var of shape \[3\], got \[3, 1\]"),
     (_instance_norm, ((3,), (6,)), ShapeError,
      r"instance_norm: expected running_var of shape \[3\], got \[6\]"),
     (_instance_norm, ((3,), None), ValueError,
      "instance_norm: running_mean and running_var must either both be None or neither"),
     (_batch_norm_training, (None, (3,)), ValueError,
      "batch_norm: running_mean and running_var must either both be None or neither")],
    ids=["batch-mean", "batch-var", "instance-var", "instance-one-given", "batch-one-given"],
)  # fmt: skip
def test_running_statistics_that_do_not_fit_fail_before_any_update(norm, stats, error, message):
    running = [None if shape is None else flow.full(shape, 0.5, dtype=flow.float64)
               for shape in stats]  # fmt: skip
    with pytest.raises(error, match=message):
        norm(_randn(4, 3, 2), *running)
    for r in running:
        assert r is None or np.all(r.numpy() == 0.5)


def test_running_statistics_must_have_the_input_dtype():
    rm, rv = flow.zeros(3, dtype=flow.float64), flow.ones(3, dtype=flow.float64)
    with pytest.raises(DTypeError, match="batch_norm: expected running_mean of dtype float32"):
        F.batch_norm(_randn(4, 3).float(), rm, rv, training=True)


def test_instance_norm_running_statistics_average_the_instances():
    x = _randn(2, 3, 4)
    rm, rv = flow.zeros(3, dtype=flow.float64), flow.ones(3, dtype=flow.float64)
    F.instance_norm(x, rm, rv, momentum=1.0)
    data = x.numpy()
    np.testing.assert_allclose(rm.numpy(), data.mean(2).mean(0))
    np.testing.assert_allclose(rv.numpy(), data.var(2, ddof=1).mean(0))


def test_normalization_second_order_gradients():
    x = _randn(3, 2, 2, requires_grad=True)
    w, b = _randn(2, seed=1, requires_grad=True), _randn(2, seed=2, requires_grad=True)
    rm, rv = _t([0.1, -0.2]), _t([1.5, 0.7])
    cases = [
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda x, w, b: F.batch_norm(x, rm, rv, w, b),
        lambda x, w, b: F.layer_norm(x, (2, 2), None, b.reshape(1, 2).expand(2, 2)) * w,
        lambda x, w, b: F.rms_norm(x, (2,), w),
        lambda x, w, b: F.group_norm(x, 1, None, b),  # PyTorch's backward fails here
    ]
    for fn in cases:
        assert flow.autograd.gradcheck(fn, (x, w, b))
        assert flow.autograd.gradgradcheck(fn, (x, w, b))


# -- dropout --------------------------------------------------------------------------------
def test_dropout_statistics():
    flow.manual_seed(0)
    x = flow.ones(100_000, requires_grad=True)
    y = F.dropout(x, p=0.3)
    values = y.detach().numpy()
    assert abs((values == 0).mean() - 0.3) < 0.01
    assert abs(values.mean() - 1.0) < 0.02  # the expectation is preserved
    np.testing.assert_allclose(np.unique(values), [0.0, 1 / 0.7], rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), values)  # gradient = mask / (1 - p)


def test_dropout_is_reproducible_and_identity_when_not_training():
    x = flow.ones(50)
    flow.manual_seed(3)
    a = F.dropout(x)
    flow.manual_seed(3)
    b = F.dropout(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert F.dropout(x, training=False) is x
    assert F.dropout(x, p=0.0) is x
    np.testing.assert_array_equal(F.dropout(x, p=1.0).numpy(), np.zeros(50))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        F.dropout(x, p=1.5)


def test_channel_dropout_zeroes_whole_channels():
    flow.manual_seed(0)
    y = F.dropout2d(flow.ones(8, 16, 3, 3), p=0.5).numpy()
    per_channel = y.reshape(8, 16, 9)
    assert (per_channel.min(-1) == per_channel.max(-1)).all()
    assert 0 < (per_channel[..., 0] == 0).mean() < 1
    y = F.dropout3d(flow.ones(4, 2, 2, 2), p=0.5).numpy()  # unbatched (C, D, H, W)
    assert all(len(np.unique(c)) == 1 for c in y)
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        F.dropout2d(flow.ones(2, 3, 4))
    with pytest.raises(ShapeError, match="dropout1d: expected a 2-d"):
        F.dropout1d(flow.ones(2, 3, 4, 5))


def test_dropout_in_place():
    flow.manual_seed(1)
    x = flow.ones(10)
    out = F.dropout(x, 0.5, inplace=True)
    assert out is x and set(np.unique(x.numpy())) <= {0.0, 2.0}
    leaf = flow.ones(3, requires_grad=True)
    with pytest.raises(AutogradError, match="dropout_: a leaf Variable that requires grad"):
        F.dropout(leaf, 0.5, inplace=True)
    h = leaf * 1
    F.dropout(h, 0.5, inplace=True).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), h.detach().numpy())


# -- attention ------------------------------------------------------------------------------
def test_attention_errors():
    q = flow.ones(2, 3, 4)
    with pytest.raises(ShapeError, match="scaled_dot_product_attention: expected query"):
        F.scaled_dot_product_attention(q, flow.ones(2, 5, 3), flow.ones(2, 5, 4))
    with pytest.raises(DTypeError, match="of one dtype"):
        F.scaled_dot_product_attention(q, q, q.double())
    with pytest.raises(TideflowError, match="either attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, q, q, flow.ones(3, 3), is_causal=True)
    with pytest.raises(ShapeError, match="enable_gqa"):
        q, kv = flow.ones(1, 3, 2, 4), flow.ones(1, 2, 2, 4)
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)


def test_attention_dropout_keeps_rows_summing_in_expectation():
    flow.manual_seed(0)
    q = k = flow.zeros(1, 4, 2)
    v = flow.ones(1, 400, 1)
    out = F.scaled_dot_product_attention(q, flow.zeros(1, 400, 2), v, dropout_p=0.5)
    assert out.shape == (1, 4, 1) and k.shape == (1, 4, 2)
    assert np.all(np.abs(out.numpy() - 1.0) < 0.2)
