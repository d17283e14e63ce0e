"""An op fuzzer: calls of the public ops (`flow.*`, `flow.nn.functional.*`, Tensor methods) with
mutated arguments, run on tideflow and, where the record has a PyTorch oracle, on PyTorch.

Calls start from the op database's samples (they know each op's arity and dtypes) and then
mutate a few arguments: tensors of other shapes (size-0, 0-d, rank 6), other dtypes or holding
NaN/inf, tensors replaced by Python or NumPy scalars, lists or None; integers replaced by
negative, out-of-range or huge values, floats, NaN, strings. Every call must either return or
raise an error a user can read: a `TideflowError`, or the TypeError / ValueError / IndexError
PyTorch would raise, whose message names the op. A raw exception (AttributeError, KeyError,
ZeroDivisionError, an exception raised inside NumPy/SciPy, MemoryError, RecursionError), a
hang or an allocation past the guard is a bug. Where both libraries return, results agree.

Random choices go through a `Chooser` so the same generator runs under Hypothesis (tests:
shrinking, fixed seeds) or a NumPy generator (`python tests/fuzz/campaign.py N SEED`).
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import threading
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

import tideflow as flow

from ..framework.errors import TideflowError
from ..framework.tensor import Tensor
from .harness import as_numpy, call_torch, flatten, flow_fn, resolve
from .op_db import OP_DB
from .opinfo import OpInfo, Sample

# NOTE: records left out: random outputs cannot be compared, optimizers are not ops, and
# these build whole models' state (or call back into the fuzzer's own harness).
_SKIP_PREFIXES = ("optim.",)
_SKIP = {"resample_backward", "conv_weight_grad", "pool_gather", "pool_scatter"}

# Outputs that depend on the order ties are broken in (indices of equal values): only compared
# when every input tensor is a float tensor of the sample's original dtype without NaN.
_TIES = {
    "argmax", "argmin", "argsort", "sort", "topk", "kthvalue", "mode", "median", "nanmedian",
    "max", "min", "cummax", "cummin", "unique", "unique_consecutive", "aminmax",
}  # fmt: skip

ALLOC_LIMIT = 2 << 30  # bytes of address space a call may add (the guard)
TIMEOUT_S = 10.0  # seconds a call may take
_COMPARE_LIMIT = 1 << 22  # elements compared per output


def _public(info: OpInfo) -> bool:
    # NOTE: records of internal ops (softmax_backward, ...) call PyTorch's private aten ops,
    # which do not check their arguments (a mutated shape kills the process with SIGFPE).
    try:
        resolve(flow, info.name)
    except AttributeError:
        return hasattr(Tensor, info.name) or info.name in ("getitem", "setitem")
    return True


def records() -> list[OpInfo]:
    """The records the fuzzer draws from."""
    return [
        r
        for r in OP_DB
        if not r.random
        and r.name not in _SKIP
        and not r.name.startswith(_SKIP_PREFIXES)
        and _public(r)
    ]


class Chooser(Protocol):
    def choice(self, options: Sequence[Any]) -> Any: ...
    def integer(self, low: int, high: int) -> int: ...  # inclusive


class RngChooser:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def integer(self, low, high):
        return int(self.rng.integers(low, high + 1))


@dataclass
class Call:
    """One call: an op record, its (mutated) sample and how it is called (`method`: as a
    Tensor method on the first argument). Runs on either library."""

    info: OpInfo
    sample: Sample
    method: bool = False
    mutations: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        how = f"Tensor.{self.info.name}" if self.method else self.info.name
        return f"{how}{self.sample!r}"[:2000] + f"  mutations={self.mutations}"

    def run_flow(self):
        args, kwargs = _convert(self.sample, _flow_tensor), dict(self.sample.kwargs)
        if self.method:
            return getattr(args[0], self.info.name)(*args[1:], **kwargs)
        return flow_fn(self.info)(*args, **kwargs)

    def run_torch(self, torch):
        args, kwargs = (
            _convert(self.sample, lambda a: _torch_tensor(torch, a)),
            dict(self.sample.kwargs),
        )
        if self.method:
            return getattr(args[0], self.info.name)(*args[1:], **kwargs)
        return call_torch(torch, self.info, args, kwargs)


def _flow_tensor(a: np.ndarray):
    return flow.from_numpy(a.copy())


def _torch_tensor(torch, a: np.ndarray):
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return torch.from_numpy(a.copy())


def _convert(sample: Sample, tensor: Callable) -> tuple:
    # NOTE: arrays nested in lists/tuples are tensor lists (cat, stack, broadcast_tensors).
    def conv(a):
        if isinstance(a, np.ndarray):
            return tensor(a)
        if isinstance(a, list | tuple) and any(isinstance(x, np.ndarray) for x in a):
            return type(a)(conv(x) for x in a)
        return a

    return tuple(conv(a) for a in sample.args)


# -- drawing calls ----------------------------------------------------------------------------
_SHAPES = ((), (0,), (1,), (0, 3), (3, 0, 2), (1, 1, 1, 1, 1, 2), (2, 1, 3), (4,), (3, 4))
_DTYPES = ("float32", "float64", "float16", "int64", "int32", "bool", "uint8")
_INTS = (-1, -2, 0, 1, 2, 3, 7, -7, 100, -100, 2**31, -(2**63), 2**40)
_ODD = (None, 1.5, float("nan"), float("inf"), -float("inf"), "a", True, (), [], [1, 2])


def _array(c: Chooser, rng: np.random.Generator, shape, dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if dtype.startswith(("int", "uint")):
        low = 0 if dtype.startswith("uint") else -3
        return rng.integers(low, 4, size=shape).astype(dtype)
    values = rng.uniform(-3, 3, size=shape).astype(dtype)
    if values.size and c.integer(0, 3) == 0:  # NaN and inf in floats
        flat = values.reshape(-1)
        flat[c.integer(0, flat.size - 1)] = c.choice((np.nan, np.inf, -np.inf))
    return values


def _mutate_value(c: Chooser, rng: np.random.Generator, value) -> tuple[Any, str]:
    if isinstance(value, np.ndarray):
        kind = c.choice(("shape", "shape", "dtype", "values", "scalar", "odd"))
        if kind == "shape":
            shape = c.choice(_SHAPES)
            if value.ndim and c.integer(0, 1):  # one dim changed, the rest kept
                s = list(value.shape)
                s[c.integer(0, len(s) - 1)] = c.choice((0, 1, 2, 5))
                shape = tuple(s)
            return _array(c, rng, shape, value.dtype.name), f"shape{list(shape)}"
        if kind == "dtype":
            dt = c.choice(_DTYPES)
            return _array(c, rng, value.shape, dt), dt
        if kind == "values":
            return _array(c, rng, value.shape, value.dtype.name), "values"
        if kind == "scalar":
            v = c.choice((3, -1, 2.5, np.float32(1.0), np.int64(2), np.array(1.0)))
            return v, f"scalar {v!r}"
        v = c.choice(_ODD)
        return v, f"odd {v!r}"
    if isinstance(value, bool):
        v = c.choice((None, 0, 2, "yes", not value))
        return v, f"bool->{v!r}"
    if isinstance(value, int):
        v = c.choice((*_INTS, *_ODD))
        return v, f"int->{v!r}"
    if isinstance(value, float):
        v = c.choice((0.0, -1.0, float("nan"), float("inf"), -0.5, 1e30, None, "a", 2))
        return v, f"float->{v!r}"
    if isinstance(value, list | tuple) and value:
        items = list(value)
        i = c.integer(0, len(items) - 1)
        items[i], what = _mutate_value(c, rng, items[i])
        if c.integer(0, 3) == 0:
            items = items[: c.integer(0, len(items))]
            what += ", truncated"
        return type(value)(items), f"[{i}] {what}"
    v = c.choice((*_ODD, 0, -1))
    return v, f"odd {v!r}"


def draw_call(c: Chooser, pool: Sequence[OpInfo] | None = None) -> Call:
    """A call of a random record's random sample with 0-3 arguments mutated."""
    pool = pool if pool is not None else records()
    info = c.choice(pool)
    rng = np.random.default_rng(c.integer(0, 2**32 - 1))
    samples = info.samples(rng, c.choice(info.dtypes))
    if not samples:
        return Call(info, Sample(()))
    sample = c.choice(samples)
    args, kwargs = list(sample.args), dict(sample.kwargs)
    mutations = []
    for _ in range(c.choice((0, 1, 1, 1, 2, 2, 3))):
        slots = [("arg", i) for i in range(len(args))] + [("kw", k) for k in kwargs]
        if not slots:
            break
        where, key = c.choice(slots)
        if where == "arg":
            args[key], what = _mutate_value(c, rng, args[key])
        elif c.integer(0, 5) == 0:
            del kwargs[key]
            what = "removed"
        else:
            kwargs[key], what = _mutate_value(c, rng, kwargs[key])
        mutations.append(f"{key}: {what}")
    sample = Sample(tuple(args), kwargs, sample.grad, sample.name)
    method = (
        info.op is None
        and "." not in info.name
        and bool(args)
        and isinstance(sample.args[0], np.ndarray)
        and callable(getattr(Tensor, info.name, None))  # not a property (Tensor.real)
        and c.integer(0, 3) == 0
    )
    return Call(info, sample, method, mutations)


# -- running them ------------------------------------------------------------------------------
class CallTimeout(BaseException):
    """A call ran past TIMEOUT_S (BaseException: an op's `except Exception` cannot hide it)."""


def _vm_size() -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@contextlib.contextmanager
def guarded(timeout: float = TIMEOUT_S, alloc_limit: int = ALLOC_LIMIT):
    """Runs a call with an address-space limit (a silly size fails its allocation instead of
    swapping the machine) and a timer (a hang raises CallTimeout). Both need the main thread
    on Linux; elsewhere the call runs unguarded."""
    main = threading.current_thread() is threading.main_thread()
    vm = _vm_size()
    old_limit = resource.getrlimit(resource.RLIMIT_AS)
    if (
        vm is not None
        and old_limit[0] == resource.RLIM_INFINITY
        and not os.environ.get("TIDEFLOW_FUZZ_NO_RLIMIT")
    ):
        resource.setrlimit(resource.RLIMIT_AS, (vm + alloc_limit, old_limit[1]))
    if main:

        def on_alarm(signum, frame):
            raise CallTimeout(f"call took more than {timeout} s")

        old_handler = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    finally:
        if main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
        resource.setrlimit(resource.RLIMIT_AS, old_limit)


@dataclass
class Result:
    value: Any = None
    error: BaseException | None = None
    where: str = ""  # the file the error was raised in


def run_guarded(fn: Callable[[], Any]) -> Result:
    try:
        # NOTE: warnings are not outcomes (pytest turns them into errors)
        with guarded(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = fn()
            # NOTE: materialize inside the guard (lazy outputs, generators)
            if isinstance(value, Tensor | tuple | list):
                [as_numpy(v) for v in flatten(value) if isinstance(v, Tensor)]
        return Result(value)
    except (Exception, CallTimeout, RecursionError, MemoryError) as e:
        frames = traceback.extract_tb(e.__traceback__)
        last = frames[-1] if frames else None
        return Result(error=e, where=f"{last.filename}:{last.name}" if last else "")


# Outcomes; the last three are bugs.
OK, BOTH_RAISE, FLOW_ONLY_RAISES, TORCH_ONLY_RAISES, FLOW_ONLY = (
    "ok", "both-raise", "flow-only-raises", "torch-only-raises", "flow-only",
)  # fmt: skip
MISMATCH, RAW, UNNAMED = "mismatch", "raw-exception", "unnamed-error"
HARNESS = "harness"  # a record's own lambda (x.clone(), ...) broke on a mutated argument
BUGS = (MISMATCH, RAW, UNNAMED)

_USER_ERRORS = (TypeError, ValueError, IndexError)
_RAW_TYPES = (AttributeError, KeyError, ZeroDivisionError, MemoryError, RecursionError)


def _raw(r: Result) -> bool:
    e = r.error
    if isinstance(e, CallTimeout) or (
        isinstance(e, _RAW_TYPES) and not isinstance(e, TideflowError)
    ):
        return True
    if isinstance(e, TideflowError):
        return False
    if not isinstance(e, _USER_ERRORS):
        return True  # OverflowError, RuntimeError from NumPy, numpy.exceptions.*, ...
    module = type(e).__module__
    inside = any(f"{os.sep}{lib}{os.sep}" in r.where for lib in ("numpy", "scipy", "ml_dtypes"))
    return module.startswith(("numpy", "scipy")) or inside


def _names_op(call: Call, e: BaseException) -> bool:
    text = str(e)
    short = call.info.name.rsplit(".", 1)[-1]
    # NOTE: a composite's error may name the op it is built from (celu -> "elu: ..."): a
    # tideflow error always starts with the op it comes from ("op: ...", or "op(): ..." for
    # an argument of the wrong kind, as PyTorch words it).
    named = isinstance(e, TideflowError) and re.match(r"[\w.]+(\(\))?: ", text) is not None
    return named or short in text or short.rstrip("_") in text


@dataclass
class Outcome:
    kind: str
    call: Call
    detail: str = ""

    def __str__(self) -> str:
        return f"[{self.kind}] {self.call!r}\n    {self.detail}"


def _compare(call: Call, got, want) -> str:
    """'' when the outputs agree, else what differs."""
    got, want = flatten(got), flatten(want)
    if len(got) != len(want):
        return f"{len(got)} outputs != torch's {len(want)}"
    tie_free = call.info.name not in _TIES or all(
        a.dtype.kind == "f" and not np.isnan(a).any()
        for a in call.sample.args
        if isinstance(a, np.ndarray)
    )
    finite = all(
        np.isfinite(a).all()
        for a in (*call.sample.args, *call.sample.kwargs.values())
        if isinstance(a, np.ndarray) and a.dtype.kind in "fc"
    )
    if call.info.name.startswith("fft.") and not finite:
        return ""  # which bins of a transform of inf turn nan depends on the FFT's algorithm
    if call.info.name == "nn.functional.grid_sample" and not finite:
        return ""  # a grid point that is not finite reads nan, 0 or an edge pixel, depending
        # on which of PyTorch's kernels (2-d vectorized, 3-d scalar) and padding runs
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if not hasattr(w, "shape") and not isinstance(w, int | float | bool):
            continue  # torch.Size, dtypes, strings: not values
        try:
            a, b = as_numpy(g), as_numpy(w)
        except Exception as e:  # NOTE: an output tideflow cannot turn into an array is a bug
            return f"output {i}: {type(e).__name__}: {e}"
        if a.shape != b.shape:
            return f"output {i}: shape {list(a.shape)} != torch's {list(b.shape)}"
        if a.size > _COMPARE_LIMIT:  # a broadcast view of a silly size: shapes agree
            continue
        if not tie_free or a.dtype == object or b.dtype == object:
            continue
        if "c" in (a.dtype.kind, b.dtype.kind) and not (
            np.isfinite(a).all() and np.isfinite(b).all()
        ):
            # NOTE: complex arithmetic with infinities: PyTorch's formulas (its `alpha`
            # product, its vectorized multiply) leave nan parts where NumPy's do not
            continue
        if a.dtype.kind in "biu" and b.dtype.kind in "biu":
            if not np.array_equal(a, b):
                return f"output {i}: values differ\n{a}\n{b}"
            continue
        dt = "float64" if a.dtype == np.float64 else "float32"
        rtol, atol = call.info.tolerance(dt)
        # NOTE: mutated inputs reach values the records' tolerances were not set for
        rtol, atol = max(rtol * 10, 1e-4 if dt == "float32" else 1e-6), max(atol * 10, 1e-5)
        if any(x.dtype.kind in "fV" and x.dtype.itemsize < 4 for x in (a, b)):  # halves
            rtol, atol = 2e-2, 1e-2
        a64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
        b64 = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
        with np.errstate(all="ignore"):
            if not np.allclose(a64, b64, rtol=rtol, atol=atol, equal_nan=True):
                return f"output {i}: values differ\n{a}\n{b}"
    return ""


def check(call: Call, torch=None) -> Outcome:
    """Runs a call on tideflow (and on torch if given and the record has a torch oracle) and
    classifies the outcome."""
    with np.errstate(all="ignore"):  # NOTE: NumPy's float warnings are not the op's errors
        f = run_guarded(call.run_flow)
    if f.error is not None and f"{os.sep}testing{os.sep}records{os.sep}" in f.where:
        return Outcome(HARNESS, call)
    if f.error is not None and _raw(f):
        where = f" (raised in {f.where})" if f.where else ""
        return Outcome(RAW, call, f"{type(f.error).__name__}: {f.error}{where}")
    if f.error is not None and not _names_op(call, f.error):
        return Outcome(UNNAMED, call, f"{type(f.error).__name__}: {f.error}")
    if torch is None or call.info.ref is not None:
        return Outcome(FLOW_ONLY if f.error is None else BOTH_RAISE, call)
    t = run_guarded(lambda: call.run_torch(torch))
    if f.error is not None and t.error is not None:
        return Outcome(BOTH_RAISE, call)
    if f.error is not None:
        return Outcome(FLOW_ONLY_RAISES, call, f"{type(f.error).__name__}: {f.error}")
    if t.error is not None:
        return Outcome(TORCH_ONLY_RAISES, call, f"torch: {type(t.error).__name__}: {t.error}")
    diff = _compare(call, f.value, t.value)
    return Outcome(MISMATCH, call, diff) if diff else Outcome(OK, call)


def campaign(n: int, seed: int = 0, torch=None) -> tuple[Counter, list[Outcome]]:
    """n calls drawn with a NumPy generator: outcome counts and the bugs."""
    chooser, pool = RngChooser(np.random.default_rng(seed)), records()
    counts: Counter = Counter()
    bugs = []
    for _ in range(n):
        out = check(draw_call(chooser, pool), torch)
        counts[out.kind] += 1
        if out.kind in BUGS:
            bugs.append(out)
    return counts, bugs
