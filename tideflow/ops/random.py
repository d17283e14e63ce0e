"""Random sampling: rand, randn, randint, randperm, normal, bernoulli, multinomial, and the
in-place fills (`uniform_`, `normal_`, `bernoulli_`, `random_`).

Each sampler is an op whose attributes include the `Generator`, so results are reproducible
under `flow.manual_seed` and graph tracing records the draw like any other op.

With `placement=` and `sbp=` the samplers return global tensors: each rank draws the whole
logical tensor and keeps its shard, so a seeded program draws the values one process would
(broadcast axes take the first rank's draw, should the ranks' generators differ). The fills
of a global tensor draw its logical value the same way.
"""

from __future__ import annotations

import numpy as np

from ..framework import dtype as dtypes
from ..framework.dispatch import inplace
from ..framework.errors import ShapeError, TideflowError
from ..framework.random import (
    Generator,
    default_generator,
    get_rng_state,
    initial_seed,
    manual_seed,
    seed,
    set_rng_state,
)
from ..framework.tensor import Tensor
from ._rules import B, Meta, Signature, broadcast_only, checked, defop, dispatch, methods, sizes_arg
from .complex import complex
from .creation import _check_device, _check_shape, global_layout, layout_kwargs, make

__all__ = [
    "Generator",
    "bernoulli",
    "default_generator",
    "get_rng_state",
    "initial_seed",
    "manual_seed",
    "multinomial",
    "normal",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "randperm",
    "seed",
    "set_rng_state",
]


def _float_draw(draw, shape, dtype: dtypes.DType):
    """Draw in float32 or float64 (NumPy's native sampling dtypes), then cast."""
    native = np.float64 if dtype is dtypes.float64 else np.float32
    out = draw(shape, native)
    return out if out.dtype == dtype.np else out.astype(dtype.np)


def _sampler(name: str, kernel, meta):
    return defop(
        name,
        inputs=(),
        meta=meta,
        sbp=lambda **_: [Signature((), (B,))],
        kernels={"cpu": kernel},
    )


def _uniform_kernel(*, shape, low, high, dtype, generator):
    def draw(s, native):
        return (generator.rng.random(s, dtype=native) * (high - low) + low).astype(native)

    return _float_draw(draw, shape, dtype)


def _normal_kernel(*, shape, mean, std, dtype, generator):
    def draw(s, native):
        return (generator.rng.standard_normal(s, dtype=native) * std + mean).astype(native)

    return _float_draw(draw, shape, dtype)


def _shape_meta(**attrs) -> Meta:
    return Meta(attrs["shape"], attrs["dtype"])


_uniform = _sampler("uniform", _uniform_kernel, _shape_meta)
_normal = _sampler("normal", _normal_kernel, _shape_meta)
_randint = _sampler(
    "randint",
    lambda *, shape, low, high, dtype, generator: generator.rng.integers(
        low, high, size=shape
    ).astype(dtype.np),
    _shape_meta,
)
_randperm = _sampler(
    "randperm",
    lambda *, n, dtype, generator: generator.rng.permutation(n).astype(dtype.np),
    lambda *, n, dtype, generator: Meta((n,), dtype),
)


def _float_dtype(dtype) -> dtypes.DType:
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    if not dt.is_floating_point:
        raise TideflowError(f"random sampling of floats: dtype {dt} is not a floating dtype")
    return dt


def _complex_draw(draw, size, scale: float, dtype, requires_grad: bool, **kwargs) -> Tensor:
    """A complex sample as PyTorch draws it: real and imaginary parts drawn independently in
    the real dtype of `dtype`, each scaled by `scale`."""
    real_dtype = dtypes.to_real(dtypes.to_dtype(dtype))
    re, im = (draw(*size, dtype=real_dtype, **kwargs) * scale for _ in range(2))
    return complex(re, im).requires_grad_(requires_grad)


def _is_complex_dtype(dtype) -> bool:
    return dtype is not None and dtypes.to_dtype(dtype).is_complex


def _drawn(op, attrs: dict, layout, requires_grad: bool) -> Tensor:
    return make(lambda: dispatch(op, (), attrs), layout, requires_grad, synchronize=True)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False, placement=None,
         sbp=None) -> Tensor:  # fmt: skip
    """Uniform samples in [0, 1) (for complex dtypes, in both parts). `flow.rand(2, 3)`"""
    if _is_complex_dtype(dtype):
        kwargs = {"generator": generator, "device": device, "placement": placement, "sbp": sbp}
        return _complex_draw(rand, size, 1.0, dtype, requires_grad, **kwargs)
    _check_device(device)
    layout = global_layout("rand", device, placement, sbp)
    attrs = {
        "shape": _check_shape("rand", sizes_arg(size)),
        "low": 0.0,
        "high": 1.0,
        "dtype": _float_dtype(dtype),
        "generator": generator or default_generator,
    }
    return _drawn(_uniform, attrs, layout, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False, placement=None,
          sbp=None) -> Tensor:  # fmt: skip
    """Standard normal samples (for complex dtypes, variance 1/2 in each part, so 1 in all).
    `flow.randn(2, 3)`"""
    if _is_complex_dtype(dtype):
        kwargs = {"generator": generator, "device": device, "placement": placement, "sbp": sbp}
        return _complex_draw(randn, size, 0.5**0.5, dtype, requires_grad, **kwargs)
    _check_device(device)
    layout = global_layout("randn", device, placement, sbp)
    attrs = {
        "shape": _check_shape("randn", sizes_arg(size)),
        "mean": 0.0,
        "std": 1.0,
        "dtype": _float_dtype(dtype),
        "generator": generator or default_generator,
    }
    return _drawn(_normal, attrs, layout, requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad=False, placement=None, sbp=None) -> Tensor:  # fmt: skip
    """Integers uniform in [low, high): `randint(high, size)` or `randint(low, high, size)`."""
    _check_device(device)
    layout = global_layout("randint", device, placement, sbp)
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    if high is None or size is None:
        raise TideflowError("randint: expected randint(high, size) or randint(low, high, size)")
    if high <= low:
        raise TideflowError(f"randint: expected low < high, got low={low}, high={high}")
    attrs = {
        "shape": _check_shape("randint", sizes_arg((size,))),
        "low": int(low),
        "high": int(high),
        "dtype": dtypes.int64 if dtype is None else dtypes.to_dtype(dtype),
        "generator": generator or default_generator,
    }
    return _drawn(_randint, attrs, layout, requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad=False,
             placement=None, sbp=None) -> Tensor:  # fmt: skip
    """A random permutation of 0..n-1 (int64)."""
    _check_device(device)
    layout = global_layout("randperm", device, placement, sbp)
    if n < 0:
        raise TideflowError(f"randperm: n must be non-negative, got {n}")
    attrs = {
        "n": int(n),
        "dtype": dtypes.int64 if dtype is None else dtypes.to_dtype(dtype),
        "generator": generator or default_generator,
    }
    return _drawn(_randperm, attrs, layout, requires_grad)


def rand_like(input, *, dtype=None, device=None, requires_grad=False, placement=None, sbp=None):
    """`rand` of `input`'s shape and dtype; global like a global `input`."""
    layout = layout_kwargs(global_layout("rand_like", device, placement, sbp, like=input))
    return rand(tuple(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad,
                **layout)  # fmt: skip


def randn_like(input, *, dtype=None, device=None, requires_grad=False, placement=None, sbp=None):
    """`randn` of `input`'s shape and dtype; global like a global `input`."""
    layout = layout_kwargs(global_layout("randn_like", device, placement, sbp, like=input))
    return randn(tuple(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad,
                 **layout)  # fmt: skip


def randint_like(input, low=0, high=None, *, dtype=None, device=None, placement=None, sbp=None):
    """`randint` of `input`'s shape and dtype; global like a global `input`."""
    layout = layout_kwargs(global_layout("randint_like", device, placement, sbp, like=input))
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, **layout)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False, placement=None, sbp=None) -> Tensor:  # fmt: skip
    """Normal samples: `normal(mean, std, size)` with numbers, or elementwise with tensor
    means/stds (broadcast together; global means/stds give a global result)."""
    _check_device(device)
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in (mean, std) if isinstance(t, Tensor)))
        # NOTE: the noise is laid out broadcast; the ops below convert it to the operands'.
        spread = {}
        if ref.is_global:
            spread = {"placement": ref.placement, "sbp": [B] * ref.placement.ndim}
        noise = randn(shape, generator=generator, dtype=ref.dtype, **spread)
        m = mean.detach() if isinstance(mean, Tensor) else mean
        s = std.detach() if isinstance(std, Tensor) else std
        return noise * s + m
    if size is None:
        raise TideflowError("normal: give `size` when mean and std are numbers")
    layout = global_layout("normal", device, placement, sbp)
    attrs = {
        "shape": _check_shape("normal", sizes_arg((size,))),
        "mean": float(mean),
        "std": float(std),
        "dtype": _float_dtype(dtype),
        "generator": generator or default_generator,
    }
    return _drawn(_normal, attrs, layout, requires_grad)


def _bernoulli_kernel(p, *, prob, generator):
    probs = p if prob is None else np.full(p.shape, prob)
    return (generator.rng.random(p.shape) < probs).astype(p.dtype)


_bernoulli = defop(
    "bernoulli",
    inputs=("input",),
    meta=lambda x, *, prob, generator: Meta(x.shape, x.dtype),
    sbp=broadcast_only,
    kernels={"cpu": _bernoulli_kernel},
)


def bernoulli(input, p=None, *, generator=None) -> Tensor:
    """0/1 samples with probabilities `input` (or the number `p`), in input's dtype."""
    return dispatch(_bernoulli, (input,), {"prob": p, "generator": generator or default_generator})


def _check_multinomial(shape: tuple, num_samples: int, replacement: bool) -> None:
    if len(shape) not in (1, 2):
        raise ShapeError(f"multinomial: expected a 1-d or 2-d weight tensor, got {list(shape)}")
    if not replacement and num_samples > shape[-1]:
        raise TideflowError(
            f"multinomial: cannot draw {num_samples} samples without replacement from "
            f"{shape[-1]} categories"
        )


def _multinomial_meta(w: Meta, *, num_samples, replacement, generator) -> Meta:
    _check_multinomial(w.shape, num_samples, replacement)
    return Meta((*w.shape[:-1], num_samples), dtypes.int64)


def _multinomial_kernel(w, *, num_samples, replacement, generator):
    rows = np.atleast_2d(w.astype(np.float64))
    if (rows < 0).any() or not np.isfinite(rows).all() or (rows.sum(-1) <= 0).any():
        raise TideflowError(
            "multinomial: weights must be finite, non-negative, with a positive sum"
        )
    if replacement:
        cdf = np.cumsum(rows, axis=-1)
        cdf /= cdf[:, -1:]
        u = generator.rng.random((rows.shape[0], num_samples))
        # NOTE: offsetting row r's CDF by r makes one searchsorted serve every row.
        offsets = np.arange(rows.shape[0])[:, None]
        idx = np.searchsorted((cdf + offsets).ravel(), (u + offsets).ravel(), side="right")
        out = idx.reshape(u.shape) - offsets * rows.shape[1]
    else:
        # Gumbel-top-k: the k largest log(w) + Gumbel noise are a sample without replacement.
        with np.errstate(divide="ignore"):
            keys = np.log(rows) + generator.rng.gumbel(size=rows.shape)
        out = np.argsort(-keys, axis=-1, kind="stable")[:, :num_samples]
    out = np.minimum(out, rows.shape[1] - 1).astype(np.int64)
    return out[0] if w.ndim == 1 else out


_multinomial = defop(
    "multinomial",
    inputs=("input",),
    meta=_multinomial_meta,
    sbp=broadcast_only,
    kernels={"cpu": _multinomial_kernel},
)


@checked
def multinomial(
    input: Tensor, num_samples: int, replacement: bool = False, *, generator=None
) -> Tensor:
    """Category indices drawn with probabilities proportional to the rows of `input`."""
    # NOTE: checked here too: NumPy would quietly return fewer samples than asked for.
    _check_multinomial(tuple(input.shape), num_samples, replacement)
    attrs = {
        "num_samples": int(num_samples),
        "replacement": bool(replacement),
        "generator": generator or default_generator,
    }
    return dispatch(_multinomial, (input,), attrs)


# -- in-place fills: each draws a sample shaped like the tensor; `inplace` writes it back --
def _fill_sample(self, op, attrs: dict) -> Tensor:
    """A draw of `op` with `self`'s shape, laid out like `self`."""
    layout = (self.placement, self.sbp) if self.is_global else None
    return _drawn(op, attrs, layout, False)


def _uniform_like(self, a=0.0, b=1.0, *, generator=None):
    attrs = {"shape": tuple(self.shape), "low": float(a), "high": float(b),
             "dtype": self.dtype, "generator": generator or default_generator}  # fmt: skip
    return _fill_sample(self, _uniform, attrs)


def _normal_like(self, mean=0.0, std=1.0, *, generator=None):
    attrs = {"shape": tuple(self.shape), "mean": float(mean), "std": float(std),
             "dtype": self.dtype, "generator": generator or default_generator}  # fmt: skip
    return _fill_sample(self, _normal, attrs)


def _bernoulli_like(self, p=0.5, *, generator=None):
    if isinstance(p, Tensor):
        return bernoulli(p.expand(tuple(self.shape)).to(self.dtype), generator=generator)
    return bernoulli(self, float(p), generator=generator)


def _random_like(self, from_=0, to=None, *, generator=None):
    """random_(to) draws from [0, to); random_() from PyTorch's default range: integers
    representable exactly in the dtype (2**mantissa for floats, the maximum for integers)."""
    if to is None:
        from_, to = 0, (from_ or _default_random_bound(self.dtype))
    layout = {"placement": self.placement, "sbp": self.sbp} if self.is_global else {}
    return randint(from_, to, tuple(self.shape), generator=generator, dtype=self.dtype, **layout)


def _default_random_bound(dtype: dtypes.DType) -> int:
    if dtype.is_floating_point:
        return 2 ** (np.finfo(dtype.np).nmant + 1)
    if dtype is dtypes.bool_:
        return 2
    return int(np.iinfo(dtype.np).max)


methods(
    uniform_=inplace(_uniform_like, "uniform_"),
    normal_=inplace(_normal_like, "normal_"),
    bernoulli_=inplace(_bernoulli_like, "bernoulli_"),
    random_=inplace(_random_like, "random_"),
    bernoulli=bernoulli,
    multinomial=multinomial,
)
