"""Records of `stft` and `istft` (tideflow/ops/spectral.py) against torch.stft/torch.istft:
batched and single signals, windows shorter than the frame, hops that do and do not divide
the signal, centring with each padding mode, normalization, one- and two-sided spectra."""

import numpy as np

import tideflow as flow

from ..opinfo import FLOATS, OpInfo, Sample, make_array


def _hann(n: int, dtype: str) -> np.ndarray:
    """A periodic Hann window (torch.hann_window's), positive inside: every sample counts."""
    return (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n) + 0.1).astype(dtype)


def _stft_samples(rng, dtype):
    def signal(*shape):
        return np.asarray(make_array(rng, shape, dtype, -1.0, 1.0))

    return [
        Sample((signal(16), _hann(8, dtype)), {"n_fft": 8, "hop_length": 2}),
        Sample((signal(2, 13), _hann(8, dtype)), {"n_fft": 8, "hop_length": 3}),
        Sample((signal(12), _hann(5, dtype)), {"n_fft": 8, "win_length": 5, "normalized": True}),
        Sample((signal(15), _hann(6, dtype)), {"n_fft": 6, "hop_length": 2, "center": False}),
        Sample((signal(10), _hann(4, dtype)), {"n_fft": 4, "pad_mode": "constant"}),
        Sample((signal(10), _hann(4, dtype)), {"n_fft": 4, "onesided": False}),
    ]


def _stft(lib, x, window, **kwargs):
    return lib.stft(x, window=window, return_complex=True, **kwargs)


def _istft_samples(rng, dtype):
    complex_dtype = "complex128" if dtype == "float64" else "complex64"

    def spectrum(*shape):
        return np.asarray(make_array(rng, shape, complex_dtype, -1.0, 1.0))

    return [
        Sample((spectrum(5, 7), _hann(8, dtype)), {"n_fft": 8, "hop_length": 2}),
        Sample((spectrum(2, 5, 4), _hann(8, dtype)), {"n_fft": 8, "hop_length": 3, "length": 12}),
        Sample(
            (spectrum(5, 6), _hann(6, dtype)),
            {"n_fft": 8, "win_length": 6, "hop_length": 2, "normalized": True},
        ),
        Sample((spectrum(4, 5), _hann(6, dtype)), {"n_fft": 6, "hop_length": 2, "center": False}),
        Sample((spectrum(4, 5), _hann(6, dtype)), {"n_fft": 6, "hop_length": 2, "length": 8}),
        Sample((spectrum(3, 7), _hann(4, dtype)), {"n_fft": 4, "onesided": True, "length": 6}),
    ]


def _istft(lib, spec, window, **kwargs):
    return lib.istft(spec, window=window, **kwargs)


RECORDS = [
    OpInfo(
        "stft",
        _stft_samples,
        op=lambda x, w, **k: _stft(flow, x, w, **k),
        torch=_stft,
        dtypes=FLOATS,
    ),
    OpInfo(
        "istft",
        _istft_samples,
        op=lambda s, w, **k: _istft(flow, s, w, **k),
        torch=_istft,
        dtypes=FLOATS,
    ),
]
