"""`repr(tensor)` in PyTorch's format (`tensor([1., 2.], requires_grad=True)`) and the print
options that control it (`set_printoptions`).

The layout follows PyTorch's `torch/_tensor_str.py` step by step, so that the same values
print the same text: one formatter (width, fixed or scientific notation) chosen from the
elements that will be shown, rows wrapped at `linewidth`, dims longer than `2 * edgeitems`
summarized with '...' once the tensor has more than `threshold` elements, and suffixes
(`dtype=`, `grad_fn=`) moved to a new line when they would overflow it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from . import dtype as dtypes

__all__ = ["format_tensor", "get_printoptions", "printoptions", "set_printoptions"]


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTIONS = _PrintOptions()

_PROFILES = {
    "default": {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80},
    "short": {"precision": 2, "threshold": 1000, "edgeitems": 2, "linewidth": 80},
    "full": {"precision": 4, "threshold": math.inf, "edgeitems": 3, "linewidth": 80},
}


def set_printoptions(
    precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None
) -> None:
    """Set how tensors print, as `torch.set_printoptions` does.

    `precision`: digits after the decimal point (default 4); `threshold`: number of elements
    above which dims are summarized with '...' (1000); `edgeitems`: entries shown at each end
    of a summarized dim (3); `linewidth`: characters per line before rows wrap (80);
    `profile`: 'default', 'short' (precision 2, edgeitems 2) or 'full' (never summarize),
    applied first so the other arguments can override it; `sci_mode`: True/False forces
    scientific/fixed notation, None (the default, and what every call without it restores)
    chooses from the values.

    >>> flow.set_printoptions(precision=2)
    >>> flow.tensor([1.12345])
    tensor([1.12])
    >>> flow.set_printoptions(threshold=5)
    >>> flow.arange(10)
    tensor([0, 1, 2,  ..., 7, 8, 9])
    >>> flow.set_printoptions(profile="default")
    >>> flow.tensor([1.12345])
    tensor([1.1235])
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(
                f"set_printoptions: unknown profile {profile!r}; expected one of "
                f"{', '.join(map(repr, _PROFILES))}"
            )
        for name, value in _PROFILES[profile].items():
            setattr(_OPTIONS, name, value)
    given = (
        ("precision", precision),
        ("threshold", threshold),
        ("edgeitems", edgeitems),
        ("linewidth", linewidth),
    )
    for name, value in given:
        if value is not None:
            setattr(_OPTIONS, name, value)
    _OPTIONS.sci_mode = sci_mode


def get_printoptions() -> dict:
    """The current print options, as keyword arguments `set_printoptions` accepts."""
    return dataclasses.asdict(_OPTIONS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Print options set for the duration of a `with` block (`set_printoptions` arguments)."""
    saved = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**saved)


class _Formatter:
    """One width and notation for every element shown, chosen as PyTorch chooses it: floats
    whose shown values are all integral print as '3.', a wide range (max/min > 1000, or
    values above 1e8 or below 1e-4) in scientific notation, the rest with `precision`
    decimals; non-finite values and zeros do not take part in the choice."""

    def __init__(self, shown: np.ndarray, floating: bool) -> None:
        self.floating = floating
        self.precision = _OPTIONS.precision
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        values = shown.ravel()
        if not floating:
            self.width = max([1, *(len(str(v)) for v in values.tolist())])
            return
        chosen = values[np.isfinite(values) & (values != 0)]
        if chosen.size == 0:
            return
        magnitude = np.abs(chosen)
        low, high = magnitude.min(), magnitude.max()
        self.int_mode = bool(np.all(chosen == np.ceil(chosen)))
        if _OPTIONS.sci_mode is None:
            self.sci_mode = bool(high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4)
        else:
            self.sci_mode = _OPTIONS.sci_mode
        chosen = chosen.tolist()
        if self.sci_mode:
            widths = (len(f"{v:.{self.precision}e}") for v in chosen)
        elif self.int_mode:
            widths = (len(f"{v:.0f}") + 1 for v in chosen)  # + 1: the trailing '.'
        else:
            widths = (len(f"{v:.{self.precision}f}") for v in chosen)
        self.width = max(1, *widths)

    def format(self, value) -> str:
        if not self.floating:
            text = str(value)
        elif self.sci_mode:
            text = f"{value:.{self.precision}e}"
        elif self.int_mode:
            text = f"{value:.0f}" + ("" if math.isinf(value) or math.isnan(value) else ".")
        else:
            text = f"{value:.{self.precision}f}"
        return text.rjust(self.width)


def _shown_indices(shape: tuple, summarize: bool) -> tuple[list, list[bool]]:
    """Per dim, the indices printed and whether '...' stands between them."""
    edge = _OPTIONS.edgeitems
    indices, cut = [], []
    for size in shape:
        if summarize and size > 2 * edge:
            indices.append(list(range(edge)) + list(range(size - edge, size)))
            cut.append(True)
        else:
            indices.append(list(range(size)))
            cut.append(False)
    return indices, cut


def _vector(cells: list[str], cut: bool, indent: int, width: int) -> str:
    per_line = max(1, (_OPTIONS.linewidth - indent) // (width + 2))
    if cut:
        half = len(cells) // 2
        cells = [*cells[:half], " ...", *cells[half:]] if half else ["..."]
    lines = [", ".join(cells[i : i + per_line]) for i in range(0, len(cells), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(cells: np.ndarray, cut: list[bool], indent: int, width: int) -> str:
    """The bracketed text of `cells` (the formatted shown elements), '...' where `cut`."""
    if cells.ndim == 0:
        return cells.item()
    if cells.ndim == 1:
        return _vector(cells.tolist(), cut[0], indent, width)
    rows = [_nested(row, cut[1:], indent + 1, width) for row in cells]
    if cut[0]:
        half = len(rows) // 2
        rows = [*rows[:half], "...", *rows[half:]]
    return "[" + ("," + "\n" * (cells.ndim - 1) + " " * (indent + 1)).join(rows) + "]"


def _complex_texts(shown: np.ndarray) -> tuple[list[str], int]:
    """Each complex element as PyTorch prints it ('1.5000-2.0000j'): real and imaginary
    parts each get the formatter chosen from all the shown parts of their kind."""
    real, imag = _Formatter(shown.real, True), _Formatter(shown.imag, True)
    texts = []
    for z in shown.ravel().tolist():
        imag_text = (imag.format(z.imag) + "j").lstrip()
        sign = "" if imag_text[0] in "+-" else "+"
        texts.append(real.format(z.real) + sign + imag_text)
    return texts, real.width + imag.width + 1  # + 1: the 'j'


def _body(data: np.ndarray, floating: bool, indent: int) -> str:
    summarize = data.size > _OPTIONS.threshold
    indices, cut = _shown_indices(data.shape, summarize)
    shown = data[np.ix_(*indices)] if data.ndim else data
    if data.dtype.kind == "c":
        texts, width = _complex_texts(shown.astype(np.complex128))
    else:
        if floating:  # Python floats format every dtype alike (bfloat16 has no format)
            shown = shown.astype(np.float64)
        formatter = _Formatter(shown, floating)
        texts = [formatter.format(v) for v in shown.ravel().tolist()]
        width = formatter.width
    cells = np.empty(len(texts), dtype=object)
    cells[:] = texts
    return _nested(cells.reshape(shown.shape), cut, indent, width)


def _with_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """`text, suffix, ...)`, a suffix going to a new line when it would pass `linewidth`."""
    parts = [text]
    # NOTE: PyTorch's count, 2 more than the last line's length: lines break where it breaks
    line_length = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if line_length + len(suffix) + 2 > _OPTIONS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            line_length = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            line_length += len(suffix) + 2
    return "".join(parts) + ")"


def format_tensor(data: np.ndarray, *, requires_grad: bool, grad_fn) -> str:
    """The repr of a tensor holding `data`, with its autograd state."""
    prefix = "tensor("
    indent = len(prefix)
    dt = dtypes.from_numpy(data.dtype)
    suffixes = []
    if data.size == 0:
        body = "[]"
        if data.ndim != 1:
            suffixes.append(f"size={tuple(int(d) for d in data.shape)}")
        if dt is not dtypes.get_default_dtype():
            suffixes.append(f"dtype=tideflow.{dt.name}")
    else:
        body = _body(data, dt.is_floating_point, indent)
        if not _OPTIONS.edgeitems:
            suffixes.append(f"size={tuple(int(d) for d in data.shape)}")
        defaults = (dtypes.get_default_dtype(), dtypes.get_default_complex_dtype())
        if dt not in (*defaults, dtypes.int64, dtypes.bool_):
            suffixes.append(f"dtype=tideflow.{dt.name}")
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name()}>")
    elif requires_grad:
        suffixes.append("requires_grad=True")
    return _with_suffixes(prefix + body, suffixes, indent)
