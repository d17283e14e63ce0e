"""The backward engine, autograd.grad, hooks, custom Functions, grad modes, anomaly mode and
the version-counter checks."""

import numpy as np
import pytest

import tideflow as flow


def _t(values, **kw):
    return flow.tensor(np.asarray(values, dtype=np.float64), **kw)


def test_backward_accumulates_into_leaves():
    x = _t([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [5, 7, 9])
    assert x.is_leaf and x.grad.is_leaf and not x.grad.requires_grad


def test_shared_gradient_arrays_are_not_aliased_between_leaves():
    a = _t([1.0, 2.0], requires_grad=True)
    b = _t([3.0, 4.0], requires_grad=True)
    (a + b).sum().backward()
    a.grad.zero_()  # must not zero b.grad, although add passes one gradient to both
    np.testing.assert_allclose(b.grad.numpy(), [1, 1])
    assert a.grad.numpy().flags.writeable and b.grad.numpy().flags.writeable


def test_broadcast_gradients_are_reduced_to_the_operand_shape():
    x = _t([[1.0], [2.0]], requires_grad=True)  # (2, 1)
    y = _t([1.0, 2.0, 3.0], requires_grad=True)  # (3,)
    (x * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [[6.0], [6.0]])
    np.testing.assert_allclose(y.grad.numpy(), [3.0, 3.0, 3.0])


def test_gradients_are_cast_back_to_the_operand_dtype():
    x = flow.tensor([1.0, 2.0], requires_grad=True)
    y = flow.tensor([1.0, 2.0], dtype=flow.float64)
    z = x * y
    assert z.dtype == flow.float64
    z.sum().backward()
    assert x.grad.dtype == flow.float32


def test_backward_of_non_scalar_needs_a_gradient():
    x = _t([1.0, 2.0], requires_grad=True)
    y = x * 2
    with pytest.raises(flow.TideflowError, match=r"implicitly created only for scalar.*\[2\]"):
        y.backward()
    y.backward(flow.tensor([1.0, 10.0], dtype=flow.float64))
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 20.0])
    with pytest.raises(flow.TideflowError, match="does not match"):
        (x * 2).backward(flow.ones(3, dtype=flow.float64))


def test_backward_twice_needs_retain_graph():
    x = _t([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [4.0, 8.0])
    with pytest.raises(flow.TideflowError, match="second time"):
        y.backward()


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(flow.TideflowError, match="does not require grad"):
        flow.ones(2).sum().backward()


def test_autograd_grad_returns_instead_of_accumulating():
    x = _t([1.0, 2.0], requires_grad=True)
    w = _t([3.0, 4.0], requires_grad=True)
    y = (x * w).sum()
    (gx,) = flow.autograd.grad(y, x, retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), [3.0, 4.0])
    assert x.grad is None and w.grad is None
    unused = _t([1.0], requires_grad=True)
    with pytest.raises(flow.TideflowError, match="not used"):
        flow.autograd.grad(y, [x, unused], retain_graph=True)
    gx, gu = flow.autograd.grad(y, [x, unused], allow_unused=True)
    assert gu is None


def test_grad_of_non_leaf():
    x = _t([1.0, 2.0], requires_grad=True)
    h = x * x
    y = (h * 3).sum()
    (gh,) = flow.autograd.grad(y, h)
    np.testing.assert_allclose(gh.numpy(), [3.0, 3.0])


def test_second_order_gradients_through_create_graph():
    x = _t([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x * x).sum()
    (g,) = flow.autograd.grad(y, x, create_graph=True)
    np.testing.assert_allclose(g.numpy() if not g.requires_grad else g.detach().numpy(),
                               [3, 12, 27])  # fmt: skip
    (gg,) = flow.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [6, 12, 18])
    x.grad = None
    z = (x.exp() * x).sum()
    z.backward(create_graph=True)
    x.grad.sum().backward()  # d/dx sum(d/dx (x e^x)) = (x + 2) e^x, added to x.grad
    assert x.grad.requires_grad


def test_tensor_hooks_and_retain_grad():
    x = _t([1.0, 2.0], requires_grad=True)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10)
    h = x * 2
    h.retain_grad()
    h.register_hook(lambda g: g + 1)
    h.sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), [2.0, 2.0])  # after the +1 hook
    np.testing.assert_allclose(seen[0], [4.0, 4.0])
    np.testing.assert_allclose(x.grad.numpy(), [40.0, 40.0])
    handle.remove()
    x.grad = None
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_post_accumulate_grad_hook():
    w = _t([1.0], requires_grad=True)
    calls = []
    w.register_post_accumulate_grad_hook(lambda p: calls.append(p.grad.item()))
    (w * 5).sum().backward()
    assert calls == [5.0]


def test_grad_modes_as_context_and_decorator():
    x = _t([1.0], requires_grad=True)
    with flow.no_grad():
        assert not (x * 2).requires_grad
        with flow.enable_grad():
            assert (x * 2).requires_grad
    assert (x * 2).requires_grad

    @flow.no_grad()
    def f(t):
        return t * 2

    @flow.no_grad
    def g(t):
        return t * 2

    assert not f(x).requires_grad and not g(x).requires_grad
    with flow.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    flow.set_grad_enabled(False)
    assert not flow.is_grad_enabled()
    flow.set_grad_enabled(True)
    with flow.inference_mode():
        assert flow.is_inference_mode_enabled() and not (x * 2).requires_grad
    assert flow.is_grad_enabled() and not flow.is_inference_mode_enabled()


def test_detach_shares_memory_and_cuts_the_graph():
    x = _t([1.0, 2.0], requires_grad=True)
    d = (x * 2).detach()
    assert not d.requires_grad and d.grad_fn is None
    y = x * 1
    yd = y.detach()
    yd.numpy()[0] = 100.0
    assert y.detach().numpy()[0] == 100.0


def test_in_place_on_saved_tensor_is_detected():
    x = _t([1.0, 2.0], requires_grad=True)
    h = x * 1
    y = h * h  # saves h
    h.add_(1)
    with pytest.raises(flow.TideflowError, match=r"modified by an inplace operation.*MulBackward0"):
        y.sum().backward()


def test_in_place_on_unsaved_tensor_is_fine_and_tracks_history():
    x = _t([1.0, 2.0], requires_grad=True)
    h = x * 2
    h.add_(5)  # add does not need its operands
    h.mul_(3)
    assert h.grad_fn.name() == "MulBackward0"
    h.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])


def test_in_place_on_leaf_requiring_grad_raises():
    x = _t([1.0], requires_grad=True)
    with pytest.raises(flow.TideflowError, match="leaf Variable that requires grad"):
        x.add_(1)
    with flow.no_grad():
        x.add_(1)
    assert x.item() == 2.0


def test_in_place_result_must_fit():
    x = flow.zeros(3, dtype=flow.int64)
    with pytest.raises(flow.TideflowError, match="can't be cast"):
        x.add_(1.5)
    with pytest.raises(flow.TideflowError, match="does not match the shape"):
        flow.zeros(3).add_(flow.ones(2, 3))


class _Cube(flow.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * x * k

    @staticmethod
    def backward(ctx, gy):
        (x,) = ctx.saved_tensors
        return gy * 3 * x * x * ctx.k, None


def test_custom_function():
    x = _t([1.0, 2.0], requires_grad=True)
    y = _Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "_CubeBackward"
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 24.0])
    assert flow.autograd.gradcheck(
        lambda t: _Cube.apply(t, 0.5), (_t([0.3, -1.2], requires_grad=True),)
    )


def test_custom_function_needs_input_grad_and_non_differentiable_outputs():
    class Split(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            assert ctx.needs_input_grad == (True, False)
            idx = flow.tensor([0, 1])
            out = x * 2
            ctx.mark_non_differentiable(idx)
            return out, idx

        @staticmethod
        def backward(ctx, gy, gidx):
            return gy * 2, None

    x = _t([1.0, 2.0], requires_grad=True)
    out, idx = Split.apply(x, _t([1.0, 1.0]))
    assert out.requires_grad and not idx.requires_grad
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


def test_detect_anomaly_names_the_op_that_produced_nan():
    x = _t([0.0], requires_grad=True)
    with flow.autograd.detect_anomaly():
        y = (x / x).sum()  # 0/0: forward nan, backward nan
        with pytest.raises(flow.TideflowError, match=r"DivBackward0.*returned nan") as info:
            y.backward()
    assert "test_autograd.py" in str(info.value)  # the forward trace points at the user's line


def test_gradcheck_catches_a_wrong_gradient():
    class Wrong(flow.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * x

        @staticmethod
        def backward(ctx, gy):
            return gy  # should be 2 x gy

    x = _t([0.5, 1.5], requires_grad=True)
    assert not flow.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False)
    with pytest.raises(flow.TideflowError, match="float64"):
        flow.autograd.gradcheck(lambda t: t * 2, (flow.ones(2, requires_grad=True),))


def test_requires_grad_rules():
    with pytest.raises(flow.TideflowError, match="floating point"):
        flow.tensor([1, 2]).requires_grad_()
    x = _t([1.0], requires_grad=True)
    y = x * 2
    with pytest.raises(flow.TideflowError, match="leaf"):
        y.requires_grad_(False)
    assert flow.tensor([1.0], requires_grad=True).requires_grad
    assert x.numpy().tolist() == [1.0]  # OneFlow's rule (PyTorch's under mock_torch)


def test_assigned_gradients_must_match_the_tensor():
    p = flow.nn.Parameter(flow.ones(3, 4))
    with pytest.raises(
        flow.TideflowError, match=r"gradient of size \[4\] to a tensor of size \[3, 4\]"
    ):
        p.grad = flow.ones(4)
    with pytest.raises(TypeError, match="Tensor or None"):
        p.grad = 1.0
    p.grad = flow.zeros(3, 4)
    (p * 2).sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), np.full((3, 4), 2.0))
