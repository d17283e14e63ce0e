"""Short-time Fourier transforms: `stft` and its inverse `istft`, with PyTorch's signatures.

Both are composites of ops with their own gradients (indexing gathers the frames, `fft`
transforms them, `fold` overlap-adds them back), so they differentiate, trace into graphs and
run on global tensors without rules of their own.
"""

from __future__ import annotations

from ..framework import dtype as dtypes
from ..framework.errors import ArgumentError, DTypeError, ShapeError, TideflowError
from ._rules import int_arg, methods, tensor_arg
from .complex import view_as_real
from .creation import arange, on_placement_of, ones, zeros
from .fft import fft, ifft, irfft, rfft
from .nn.fold import fold
from .nn.padding import pad
from .shape import cat

__all__ = ["istft", "stft"]


def _frame_geometry(op: str, n_fft, hop_length, win_length) -> tuple[int, int, int]:
    """(n_fft, hop_length, win_length) with PyTorch's defaults: a hop of n_fft // 4, a
    window as long as the frame."""
    n_fft = int_arg(op, "n_fft", n_fft)
    hop = n_fft // 4 if hop_length is None else int_arg(op, "hop_length", hop_length)
    win = n_fft if win_length is None else int_arg(op, "win_length", win_length)
    if n_fft <= 0 or hop <= 0 or not 0 < win <= n_fft:
        raise ShapeError(
            f"{op}: expected 0 < n_fft, 0 < hop_length and 0 < win_length <= n_fft, got "
            f"n_fft={n_fft}, hop_length={hop}, win_length={win}"
        )
    return n_fft, hop, win


def _frame_window(op: str, window, n_fft: int, win: int, like):
    """The window over a whole frame: `window` (ones if None) centred in n_fft zeros."""
    if window is None:
        window = ones(win, dtype=dtypes.to_real(like.dtype), **on_placement_of(like))
    else:
        tensor_arg(op, "window", 1, window)
        if tuple(window.shape) != (win,):
            raise ShapeError(
                f"{op}: expected a 1-D window of size win_length={win}, got shape "
                f"{list(window.shape)}"
            )
    left = (n_fft - win) // 2
    if left == 0 and win == n_fft:
        return window
    return pad(window, (left, n_fft - win - left))


def stft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    pad_mode="reflect",
    normalized=False,
    onesided=None,
    return_complex=None,
):
    """The short-time Fourier transform: the `fft` of each frame of n_fft samples, taken
    every hop_length samples and multiplied by `window`, as a (n_freq, n_frames) (or, for a
    batch, (B, n_freq, n_frames)) complex tensor. `center` pads the signal by n_fft // 2 on
    both sides (`pad_mode`), so frame t is centred at sample t * hop_length; `onesided`
    (default for real input and window) keeps the n_fft // 2 + 1 non-negative frequencies;
    `normalized` scales by n_fft ** -0.5. Real inputs need `return_complex=True` (False gives
    `view_as_real` of the result, which PyTorch deprecates).

    >>> flow.stft(flow.ones(8), 4, hop_length=2, return_complex=True).shape
    tideflow.Size([3, 5])
    """
    tensor_arg("stft", "input", 1, input)
    n_fft, hop, win = _frame_geometry("stft", n_fft, hop_length, win_length)
    complex_operands = input.dtype.is_complex or (window is not None and window.dtype.is_complex)
    if return_complex is None:
        if not complex_operands:
            raise ArgumentError(
                "stft: return_complex must be given for real inputs (True: a complex "
                "result; False: its view_as_real, which PyTorch deprecates)"
            )
        return_complex = True
    if onesided is None:
        onesided = not complex_operands
    elif onesided and complex_operands:
        raise TideflowError("stft: a complex input or window has no one-sided spectrum")
    if input.ndim not in (1, 2):
        raise ShapeError(
            f"stft: expected a 1-D or 2-D (batched) input, got shape {list(input.shape)}"
        )
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise DTypeError(
            f"stft: expected a floating point or complex input, got {input.dtype.name}"
        )
    x = input if input.ndim == 2 else input.reshape(1, -1)
    if center:
        x = pad(x.reshape(x.shape[0], 1, -1), (n_fft // 2, n_fft // 2), mode=pad_mode)
        x = x.reshape(x.shape[0], -1)
    length = x.shape[-1]
    if length < n_fft:
        raise ShapeError(
            f"stft: the signal of {length} samples (padded: center={center}) is shorter than "
            f"n_fft={n_fft}"
        )
    n_frames = 1 + (length - n_fft) // hop
    starts = arange(n_frames, **on_placement_of(x)) * hop
    frames = x[:, starts.reshape(-1, 1) + arange(n_fft, **on_placement_of(x))]
    frames = frames * _frame_window("stft", window, n_fft, win, x)
    norm = "ortho" if normalized else "backward"
    spectrum = rfft(frames, dim=-1, norm=norm) if onesided else fft(frames, dim=-1, norm=norm)
    spectrum = spectrum.transpose(1, 2)
    if input.ndim == 1:
        spectrum = spectrum.reshape(spectrum.shape[1:])
    return spectrum if return_complex else view_as_real(spectrum)


def istft(
    input,
    n_fft,
    hop_length=None,
    win_length=None,
    window=None,
    center=True,
    normalized=False,
    onesided=None,
    length=None,
    return_complex=False,
):
    """The inverse of `stft`: each frame's inverse transform, windowed, overlap-added and
    divided by the overlap-added squared window. `input` is (n_freq, n_frames) or batched
    (B, n_freq, n_frames); `length` trims or zero-pads the signal (default: what `stft`
    with `center` was given, up to the last full hop).

    >>> spec = flow.stft(flow.arange(8.0), 4, hop_length=1, return_complex=True)
    >>> flow.istft(spec, 4, hop_length=1, length=8)
    tensor([0., 1., 2., 3., 4., 5., 6., 7.])
    """
    tensor_arg("istft", "input", 1, input)
    n_fft, hop, win = _frame_geometry("istft", n_fft, hop_length, win_length)
    if not input.dtype.is_complex:
        raise DTypeError(f"istft: expected a complex input, got {input.dtype.name}")
    if input.ndim not in (2, 3):
        raise ShapeError(
            f"istft: expected a 2-D or 3-D (batched) input, got shape {list(input.shape)}"
        )
    spec = input if input.ndim == 3 else input.reshape(1, *input.shape)
    n_freq, n_frames = spec.shape[1], spec.shape[2]
    onesided = n_freq != n_fft if onesided is None else onesided
    expected = n_fft // 2 + 1 if onesided else n_fft
    if n_freq != expected:
        raise ShapeError(
            f"istft: expected {expected} frequencies ({'one' if onesided else 'two'}-sided, "
            f"n_fft={n_fft}), got {n_freq}"
        )
    if n_frames == 0:
        raise ShapeError("istft: the input has no frames")
    frames = spec.transpose(1, 2)
    norm = "ortho" if normalized else "backward"
    if return_complex:
        if onesided:
            raise TideflowError("istft: return_complex=True needs a two-sided input")
        frames = ifft(frames, n=n_fft, dim=-1, norm=norm)
    else:
        half = frames if onesided else frames.narrow(-1, 0, n_fft // 2 + 1)
        frames = irfft(half, n=n_fft, dim=-1, norm=norm)
    frame_window = _frame_window("istft", window, n_fft, win, frames)
    signal_length = n_fft + hop * (n_frames - 1)
    signal = _overlap_add(frames * frame_window, signal_length, n_fft, hop)
    envelope = _overlap_add(
        (frame_window * frame_window).expand(1, n_frames, n_fft), signal_length, n_fft, hop
    )
    start = n_fft // 2 if center else 0
    end = signal_length - start if length is None else min(start + length, signal_length)
    signal = signal.narrow(-1, start, max(end - start, 0))
    envelope = envelope.narrow(-1, start, max(end - start, 0))
    if envelope.numel() and float(envelope.abs().min()) < 1e-11:
        raise TideflowError(
            "istft: the window's overlap-added squares vanish somewhere (window overlap add "
            "min below 1e-11): no inverse there; use a window and hop that overlap"
        )
    signal = signal / envelope
    if length is not None and signal.shape[-1] < length:  # past the last frame: zeros
        shape = (signal.shape[0], length - signal.shape[-1])
        signal = cat([signal, zeros(*shape, dtype=signal.dtype, **on_placement_of(signal))], -1)
    return signal if input.ndim == 3 else signal.reshape(-1)


def _overlap_add(frames, signal_length: int, n_fft: int, hop: int):
    """Frames (B, n_frames, n_fft) summed into a (B, signal_length) signal, frame t from
    sample t * hop on: `fold` with one-row blocks."""
    blocks = frames.transpose(1, 2)  # fold's (N, C * kH * kW, L) with C = kH = 1
    out = fold(blocks, (1, signal_length), (1, n_fft), stride=(1, hop))
    return out.reshape(out.shape[0], signal_length)


methods(stft=stft, istft=istft)
