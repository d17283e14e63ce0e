"""`flow.fft`, `stft` and `istft` beyond the op database's value and gradient checks against
PyTorch: inverse pairs, the norm modes' scaling, errors naming the op, and `torch.fft` under
mock_torch."""

import numpy as np
import pytest

import tideflow as flow
from tideflow.testing.accuracy import unit_roundoff

rng = np.random.default_rng(0)


def _signal(*shape, dtype=np.float64):
    return flow.tensor(rng.standard_normal(shape).astype(dtype))


def _assert_close(actual, expected, n: int, dtype=np.float64):
    # NOTE: an FFT's rounding error grows with log2(n) butterflies over the values' scale
    scale = max(1.0, float(np.abs(expected).max()))
    tol = 8 * unit_roundoff(np.dtype(dtype).name) * max(1.0, np.log2(n)) * scale
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tol)


@pytest.mark.parametrize("n", [7, 8])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_inverse_pairs_round_trip(n, norm):
    x = _signal(3, n)
    z = flow.complex(_signal(3, n), _signal(3, n))
    _assert_close(flow.fft.ifft(flow.fft.fft(z, norm=norm), norm=norm).numpy(), z.numpy(), n)
    back = flow.fft.irfft(flow.fft.rfft(x, norm=norm), n=n, norm=norm)
    _assert_close(back.numpy(), x.numpy(), n)
    back = flow.fft.hfft(flow.fft.ihfft(x, norm=norm), n=n, norm=norm)
    _assert_close(back.numpy(), x.numpy(), n)
    back = flow.fft.irfftn(flow.fft.rfftn(_signal(2, n), norm=norm), s=(2, n), norm=norm)
    assert back.shape == (2, n)


def test_ortho_preserves_energy_and_norms_scale_as_named():
    x = _signal(16)
    energy = float((x * x).sum())
    spectrum = flow.fft.fft(x, norm="ortho")
    _assert_close(float((spectrum.abs() ** 2).sum()), energy, 16)
    unscaled = flow.fft.fft(x).numpy()
    _assert_close(flow.fft.fft(x, norm="forward").numpy(), unscaled / 16, 16)
    _assert_close(flow.fft.ifft(flow.fft.fft(x), norm="forward").numpy() / 16, x.numpy(), 16)


def test_real_and_integer_inputs_promote_like_torch():
    assert flow.fft.fft(flow.ones(4)).dtype is flow.complex64
    assert flow.fft.fft(flow.ones(4, dtype=flow.float64)).dtype is flow.complex128
    assert flow.fft.rfft(flow.arange(4)).dtype is flow.complex64
    assert flow.fft.irfft(flow.ones(3, dtype=flow.complex128)).dtype is flow.float64
    assert flow.fft.irfft(flow.ones(3)).shape == (4,)


def test_gradient_of_a_real_loss_through_rfft_and_irfft():
    x = _signal(6, dtype=np.float64).requires_grad_()
    loss = flow.fft.irfft(flow.fft.rfft(x) * 2j, n=6).sum()
    (gx,) = flow.autograd.grad(loss, [x])
    # irfft(rfft(x) * 2j) is a real linear map of x: check it against finite differences
    assert flow.autograd.gradcheck(lambda x: flow.fft.irfft(flow.fft.rfft(x) * 2j, n=6), (x,))
    assert gx.dtype is flow.float64 and gx.shape == (6,)


def test_shifts_invert_each_other_for_odd_lengths():
    x = flow.arange(15).reshape(3, 5)
    assert flow.fft.ifftshift(flow.fft.fftshift(x)).tolist() == x.tolist()
    assert flow.fft.fftshift(flow.fft.fftfreq(5)).tolist() == sorted(flow.fft.fftfreq(5).tolist())
    assert flow.fft.fftshift(x, dim=1).tolist()[0] == [3, 4, 0, 1, 2]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: flow.fft.fft(flow.ones(4), norm="twice"), flow.TideflowError, "fft: invalid norm"),
        (lambda: flow.fft.fft(flow.ones(4), n=0), flow.ShapeError, r"fft: invalid number .*\(0\)"),
        (lambda: flow.fft.fft(flow.ones(4), n=2.5), flow.ArgumentError, "fft.*'n' must be int"),
        (lambda: flow.fft.fft(flow.tensor(1.0)), flow.TensorIndexError, "fft: .*0-d"),
        (lambda: flow.fft.fft(flow.ones(4), dim=1), flow.TensorIndexError, "fft: dimension 1"),
        (lambda: flow.fft.rfft(flow.ones(4, dtype=flow.cfloat)), flow.DTypeError, "rfft: .*real"),
        (lambda: flow.fft.rfft(flow.ones(4, dtype=flow.half)), flow.DTypeError, "rfft: float16"),
        (lambda: flow.fft.rfftn(flow.ones(4), dim=()), flow.ShapeError, "rfftn: .*one axis"),
        (lambda: flow.fft.fftn(flow.ones(4), s=(2, 2)), flow.ShapeError, "fftn: got s with 2"),
        (lambda: flow.fft.fft2(flow.ones(4, 4), dim=(0, 0)), flow.ShapeError, "fft2: dims .*"),
        (lambda: flow.fft.fftfreq(4, dtype=flow.int64), flow.DTypeError, "fftfreq: expected"),
    ],
)
def test_errors_name_the_op(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_torch_fft_under_mock_torch():
    import tideflow.mock_torch

    with tideflow.mock_torch.enabled():
        import torch
        import torch.fft

        spectrum = torch.fft.rfft(torch.tensor([1.0, 2.0, 3.0, 4.0]))
        assert isinstance(spectrum, flow.Tensor)
        assert spectrum.tolist() == [10 + 0j, -2 + 2j, -2 + 0j]
        assert torch.stft is flow.stft and torch.Tensor.istft is flow.Tensor.istft


def _hann(n):
    return flow.tensor(0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n))


@pytest.mark.parametrize("center", [True, False])
def test_istft_inverts_stft(center):
    x = _signal(2, 40)
    window = _hann(16) + 0.1  # nonzero ends: uncentred frames alone cover the first sample
    spec = x.stft(16, hop_length=4, window=window, center=center, return_complex=True)
    assert spec.shape == (2, 9, 11 if center else 7)
    back = flow.istft(spec, 16, hop_length=4, window=window, center=center, length=40)
    _assert_close(back.numpy(), x.numpy(), 16)


def test_istft_pads_with_zeros_past_the_last_frame():
    x = _signal(12)
    spec = flow.stft(x, 4, hop_length=2, window=_hann(4), return_complex=True)
    signal = flow.istft(spec, 4, hop_length=2, window=_hann(4), length=20)
    # the frames cover 12 samples and the 2 of the centring's right padding: zeros after
    assert signal.shape == (20,) and signal[14:].abs().max().item() == 0.0
    _assert_close(signal[:12].numpy(), x.numpy(), 4)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: flow.stft(flow.ones(16), 8), flow.ArgumentError, "stft: return_complex must"),
        (
            lambda: flow.stft(flow.ones(16), 8, window=flow.ones(4), return_complex=True),
            flow.ShapeError,
            r"stft: expected a 1-D window of size win_length=8, got shape \[4\]",
        ),
        (
            lambda: flow.stft(flow.ones(6), 8, center=False, return_complex=True),
            flow.ShapeError,
            "stft: the signal of 6 samples",
        ),
        (lambda: flow.stft(flow.ones(16), 0), flow.ShapeError, "stft: expected 0 < n_fft"),
        (lambda: flow.istft(flow.ones(5, 3), 8), flow.DTypeError, "istft: expected a complex"),
        (
            lambda: flow.istft(flow.ones(4, 3, dtype=flow.cfloat), 8),
            flow.ShapeError,
            r"istft: expected 5 frequencies \(one-sided, n_fft=8\), got 4",
        ),
        (
            lambda: flow.istft(flow.ones(5, 3, dtype=flow.cfloat), 8, window=flow.zeros(8)),
            flow.TideflowError,
            "istft: the window's overlap-added squares vanish",
        ),
    ],
)
def test_stft_errors_name_the_op(call, error, match):
    with pytest.raises(error, match=match):
        call()
