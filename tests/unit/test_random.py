import numpy as np
import pytest

import tideflow as flow


def test_manual_seed_reproduces_every_sampler():
    def draw():
        return [
            flow.rand(4),
            flow.randn(4),
            flow.randint(0, 100, (4,)),
            flow.randperm(6),
            flow.normal(0.0, 2.0, (3,)),
            flow.bernoulli(flow.full((5,), 0.5)),
            flow.multinomial(flow.tensor([0.2, 0.3, 0.5]), 2),
        ]

    flow.manual_seed(123)
    first = draw()
    flow.manual_seed(123)
    second = draw()
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_generator_is_independent_of_the_default():
    g = flow.Generator().manual_seed(7)
    a = flow.rand(5, generator=g)
    flow.manual_seed(0)
    flow.rand(3)
    g.manual_seed(7)
    np.testing.assert_array_equal(a.numpy(), flow.rand(5, generator=g).numpy())


def test_rng_state_roundtrip_is_plain_bytes():
    state = flow.get_rng_state()
    assert state.dtype == flow.uint8
    x = flow.randn(3)
    flow.set_rng_state(state)
    np.testing.assert_array_equal(x.numpy(), flow.randn(3).numpy())
    with pytest.raises(flow.TideflowError, match="37 bytes"):
        flow.set_rng_state(flow.zeros(3, dtype=flow.uint8))


def test_distributions_have_the_right_moments():
    flow.manual_seed(0)
    u = flow.rand(200_000).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    n = flow.normal(1.0, 2.0, (200_000,)).numpy()
    assert abs(n.mean() - 1.0) < 0.02 and abs(n.std() - 2.0) < 0.02
    r = flow.randint(3, 7, (100_000,)).numpy()
    assert set(np.unique(r)) == {3, 4, 5, 6}
    b = flow.bernoulli(flow.full((100_000,), 0.3)).numpy()
    assert abs(b.mean() - 0.3) < 0.01
    assert sorted(flow.randperm(50).tolist()) == list(range(50))


def test_multinomial_frequencies_and_no_replacement():
    flow.manual_seed(0)
    w = flow.tensor([1.0, 2.0, 7.0])
    draws = flow.multinomial(w.expand(20_000, 3), 1, replacement=True).numpy().ravel()
    freq = np.bincount(draws, minlength=3) / draws.size
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.015)
    rows = flow.multinomial(flow.ones(100, 5), 5).numpy()
    assert all(sorted(r) == [0, 1, 2, 3, 4] for r in rows.tolist())
    with pytest.raises(flow.TideflowError, match="without replacement"):
        flow.multinomial(w, 4)


def test_dtypes_and_in_place_fills():
    assert flow.rand(2, dtype=flow.float64).dtype == flow.float64
    assert flow.randn(2, dtype=flow.bfloat16).dtype == flow.bfloat16
    assert flow.randint(0, 3, (2,)).dtype == flow.int64
    x = flow.zeros(1000)
    v = x._version_count
    x.uniform_(2, 3)
    assert x.numpy().min() >= 2 and x.numpy().max() < 3 and x._version_count == v + 1
    x.normal_(5, 0.1)
    assert abs(x.numpy().mean() - 5) < 0.05
    w = flow.zeros(3, requires_grad=True)
    with pytest.raises(flow.TideflowError, match="leaf Variable that requires grad"):
        w.normal_()
    with flow.no_grad():
        w.normal_()
    assert w.requires_grad and w.is_leaf
