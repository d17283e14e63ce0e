"""Records of `flow.fft` (tideflow/ops/fft.py) against torch.fft: every transform with trimmed
and zero-padded sizes (`n`, `s`), chosen dims and the three norm modes, real and complex
inputs; the frequency helpers and the shifts."""

import numpy as np

from ..opinfo import COMPLEX, FLOATS, OpInfo, Sample, make_array

NORMS = (None, "backward", "ortho", "forward")


def _array(rng, shape, dtype) -> np.ndarray:
    return np.asarray(make_array(rng, shape, dtype, -2.0, 2.0))


def _one_dim(lengths=(None, 3, 8)):
    """f(x, n, dim, norm): trimmed (3) and zero-padded (8) lengths of a 5-long dim, along the
    last and the first dim, in every norm mode."""

    def build(rng, dtype):
        out = [Sample((_array(rng, (5,), dtype),), {"n": n}) for n in lengths]
        out += [Sample((_array(rng, (5, 2), dtype),), {"dim": 0, "norm": m}) for m in NORMS]
        out.append(Sample((_array(rng, (2, 3, 4), dtype),), {"n": 6, "dim": 1}))
        return out

    return build


def _half_spectra(rng, dtype):
    """Inputs of irfft/hfft: one-sided spectra, output lengths even (default), odd, longer and
    shorter than the input implies, in every norm mode."""
    out = [Sample((_array(rng, (4,), dtype),), {"n": n}) for n in (None, 7, 4, 10)]
    out += [Sample((_array(rng, (3, 2), dtype),), {"dim": 0, "norm": m}) for m in NORMS]
    out.append(Sample((_array(rng, (2, 4, 3), dtype),), {"n": 5, "dim": 1}))
    return out


def _two_dims(rng, dtype):
    return [
        Sample((_array(rng, (3, 4), dtype),)),
        Sample((_array(rng, (2, 3, 4), dtype),), {"s": (2, 5), "norm": "ortho"}),
        Sample((_array(rng, (3, 2, 4), dtype),), {"dim": (0, 2), "norm": "forward"}),
    ]


def _n_dims(rng, dtype):
    return [
        Sample((_array(rng, (2, 3, 4), dtype),)),
        Sample((_array(rng, (2, 3, 4), dtype),), {"s": (3, 3)}),
        Sample((_array(rng, (2, 3, 4), dtype),), {"dim": (0, -1), "norm": "forward"}),
        Sample((_array(rng, (3, 4), dtype),), {"s": (2, -1), "dim": (1, 0), "norm": "ortho"}),
    ]


def _half_spectra_n_dims(rng, dtype):
    return [
        Sample((_array(rng, (3, 3), dtype),)),
        Sample((_array(rng, (2, 3, 4), dtype),), {"s": (3, 5), "norm": "ortho"}),
        Sample((_array(rng, (4, 2, 3), dtype),), {"dim": (0, 2), "norm": "forward"}),
    ]


def _frequency_samples(rng, dtype):
    return [
        Sample((n,), {"d": d, "dtype": dtype}) for n, d in ((1, 1.0), (4, 1.0), (7, 0.5), (8, 2))
    ]


def _dtype_kw(path):
    """The torch oracle gets a torch dtype where the sample names one."""

    def call(torch, *args, dtype, **kwargs):
        fn = getattr(torch.fft, path)
        return fn(*args, dtype=getattr(torch, dtype), **kwargs)

    return call


def _shift_samples(rng, dtype):
    return [
        Sample((_array(rng, (5,), dtype),)),
        Sample((_array(rng, (4, 5), dtype),)),
        Sample((_array(rng, (3, 4, 5), dtype),), {"dim": (0, 2)}),
        Sample((_array(rng, (3, 4), dtype),), {"dim": 1}),
    ]


ANY = FLOATS + COMPLEX

RECORDS = [
    OpInfo("fft.fft", _one_dim(), dtypes=ANY),
    OpInfo("fft.ifft", _one_dim(), dtypes=ANY),
    OpInfo("fft.rfft", _one_dim(), dtypes=FLOATS),
    OpInfo("fft.ihfft", _one_dim(), dtypes=FLOATS),
    OpInfo("fft.irfft", _half_spectra, dtypes=COMPLEX),
    OpInfo("fft.hfft", _half_spectra, dtypes=COMPLEX),
    OpInfo("fft.fft2", _two_dims, dtypes=ANY),
    OpInfo("fft.ifft2", _two_dims, dtypes=ANY),
    OpInfo("fft.rfft2", _two_dims, dtypes=FLOATS),
    OpInfo("fft.irfft2", _half_spectra_n_dims, dtypes=COMPLEX),
    OpInfo("fft.fftn", _n_dims, dtypes=ANY),
    OpInfo("fft.ifftn", _n_dims, dtypes=ANY),
    OpInfo("fft.rfftn", _n_dims, dtypes=FLOATS),
    OpInfo("fft.irfftn", _half_spectra_n_dims, dtypes=COMPLEX),
    OpInfo("fft.hfft2", _half_spectra_n_dims, dtypes=COMPLEX),
    OpInfo("fft.hfftn", _half_spectra_n_dims, dtypes=COMPLEX),
    OpInfo("fft.ihfft2", _two_dims, dtypes=FLOATS),
    OpInfo("fft.ihfftn", _n_dims, dtypes=FLOATS),
    OpInfo("fft.fftfreq", _frequency_samples, torch=_dtype_kw("fftfreq"), grad=False),
    OpInfo("fft.rfftfreq", _frequency_samples, torch=_dtype_kw("rfftfreq"), grad=False),
    OpInfo("fft.fftshift", _shift_samples, dtypes=ANY),
    OpInfo("fft.ifftshift", _shift_samples, dtypes=ANY),
]
