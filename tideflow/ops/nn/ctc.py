"""Connectionist temporal classification: `F.ctc_loss`.

The loss of one sequence is -log of the total probability of every alignment of its target
(labels interleaved with blanks: the extended target l') to the input's frames. The forward
variables alpha[t, s] (all alignments of the first t frames ending at l'[s]) and, for the
gradient, the backward variables beta are computed in log space, one frame at a time for
the whole batch at once. The gradient follows PyTorch's rule (Graves et al. 2006, eq. 16):
d loss / d log_probs[t, c] = exp(log_probs[t, c]) - sum_{s: l'[s] = c} alpha beta / (p y),
exact for the logits when `log_probs` come from a log_softmax, which the classic use has.
"""

from __future__ import annotations

import numpy as np

from ...framework.errors import ArgumentError, DTypeError, ShapeError
from .. import binary
from .._rules import (
    B,
    Meta,
    Signature,
    broadcast_only,
    defop,
    dispatch,
    int_arg,
    tensor_arg,
)

__all__ = ["ctc_loss"]

_NEG_INF = -np.inf


def _logsumexp(*terms: np.ndarray) -> np.ndarray:
    """Elementwise log(sum(exp(terms))), -inf where every term is -inf."""
    top = np.maximum.reduce(terms)
    finite = np.isfinite(top)
    shift = np.where(finite, top, 0)
    total = sum(np.exp(t - shift) for t in terms)
    with np.errstate(divide="ignore"):
        return np.where(finite, np.log(total) + shift, top)


def _extended_targets(targets: np.ndarray, target_lengths: tuple, blank: int) -> np.ndarray:
    """l' per sample, (N, 2 * max_target_length + 1): blanks at even positions, the labels at
    odd ones; padding past a sample's own 2 * length + 1 positions is blank."""
    n, longest = len(target_lengths), max(target_lengths, default=0)
    labels = np.full((n, longest), blank, np.int64)
    if targets.ndim == 1:  # concatenated targets
        starts = np.concatenate([[0], np.cumsum(target_lengths)[:-1]]).astype(np.int64)
        for i, (start, length) in enumerate(zip(starts, target_lengths, strict=True)):
            labels[i, :length] = targets[start : start + length]
    else:
        inside = np.arange(longest) < np.asarray(target_lengths)[:, None]
        labels = np.where(inside, targets[:, :longest], blank)
    extended = np.full((n, 2 * longest + 1), blank, np.int64)
    extended[:, 1::2] = labels
    return extended


def _can_skip(extended: np.ndarray) -> np.ndarray:
    """Whether an alignment may jump from l'[s - 2] to l'[s]: s is a label position and the
    label differs from the previous one (repeated labels need a blank between them)."""
    skip = np.zeros(extended.shape, bool)
    skip[:, 3::2] = extended[:, 3::2] != extended[:, 1:-2:2]
    return skip


def _emissions(log_probs: np.ndarray, extended: np.ndarray) -> np.ndarray:
    """log_probs[t, n, l'[n, s]] as (T, N, L')."""
    return np.take_along_axis(
        log_probs, np.broadcast_to(extended, (log_probs.shape[0], *extended.shape)), 2
    )


def _shifted(a: np.ndarray, by: int, fill=_NEG_INF) -> np.ndarray:
    """`a` moved `by` places along its last axis (positive: towards higher s), filled."""
    out = np.full_like(a, fill)
    if by > 0:
        out[..., by:] = a[..., :-by]
    else:
        out[..., :by] = a[..., -by:]
    return out


def _ends(target_lengths: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The two positions of l' an alignment may end at: the last blank and the last label."""
    last = 2 * np.asarray(target_lengths, np.int64)
    return last, np.maximum(last - 1, 0)


def _forward(log_probs, extended, skip, input_lengths, target_lengths):
    """log alpha (N, T, L') and each sample's negative log likelihood (N,)."""
    frames, n, width = log_probs.shape[0], extended.shape[0], extended.shape[1]
    emit = _emissions(log_probs, extended)
    alpha = np.full((frames, n, width), _NEG_INF, log_probs.dtype)
    if frames:
        alpha[0, :, 0] = emit[0, :, 0]
        has_label = np.asarray(target_lengths) > 0
        alpha[0, has_label, 1] = emit[0, has_label, 1]
    for t in range(1, frames):
        prev = alpha[t - 1]
        jump = np.where(skip, _shifted(prev, 2), _NEG_INF)
        alpha[t] = emit[t] + _logsumexp(prev, _shifted(prev, 1), jump)
    last_frame = np.asarray(input_lengths, np.int64) - 1
    blank_end, label_end = _ends(target_lengths)
    # no frames: only the empty target has an (empty) alignment
    likelihood = np.where(blank_end == 0, 0.0, _NEG_INF)
    if frames:
        rows = np.arange(n)
        final = alpha[np.maximum(last_frame, 0), rows]
        end_blank = final[rows, blank_end]
        end_label = np.where(blank_end > 0, final[rows, label_end], _NEG_INF)
        likelihood = np.where(last_frame >= 0, _logsumexp(end_blank, end_label), likelihood)
    return np.ascontiguousarray(alpha.transpose(1, 0, 2)), -likelihood


def _backward_variables(log_probs, extended, skip, input_lengths, target_lengths):
    """log beta (T, N, L'): alignments of the frames from t on, starting at l'[s]."""
    frames, n, width = log_probs.shape[0], extended.shape[0], extended.shape[1]
    emit = _emissions(log_probs, extended)
    beta = np.full((frames, n, width), _NEG_INF, log_probs.dtype)
    last_frame = np.asarray(input_lengths, np.int64) - 1
    blank_end, label_end = _ends(target_lengths)
    rows = np.arange(n)
    start = np.full((n, width), _NEG_INF, log_probs.dtype)
    # NOTE: skip[s + 2] says whether l'[s] may jump to l'[s + 2]
    skip_ahead = _shifted(skip, -2, fill=False)
    for t in range(frames - 1, -1, -1):
        if t + 1 < frames:
            nxt = beta[t + 1]
            jump = np.where(skip_ahead, _shifted(nxt, -2), _NEG_INF)
            beta[t] = emit[t] + _logsumexp(nxt, _shifted(nxt, -1), jump)
        starting = last_frame == t
        start.fill(_NEG_INF)
        start[rows, blank_end] = emit[t, rows, blank_end]
        has_label = blank_end > 0
        start[rows[has_label], label_end[has_label]] = emit[t, rows, label_end][has_label]
        beta[t] = np.where(
            starting[:, None], start, np.where((t < last_frame)[:, None], beta[t], _NEG_INF)
        )
    return beta


def _ctc_meta(
    log_probs: Meta, targets: Meta, *, input_lengths, target_lengths, blank, zero_infinity
):
    op = "ctc_loss"
    if not log_probs.dtype.is_floating_point:
        raise DTypeError(f"{op}: log_probs must be floating point, got {log_probs.dtype}")
    if targets.dtype.is_floating_point or targets.dtype.name == "bool":
        raise DTypeError(f"{op}: targets must be an integer tensor, got {targets.dtype}")
    if len(log_probs.shape) != 3:
        raise ShapeError(f"{op}: log_probs must be (T, N, C), got shape {list(log_probs.shape)}")
    frames, n, classes = log_probs.shape
    if len(input_lengths) != n or len(target_lengths) != n:
        raise ShapeError(
            f"{op}: input_lengths ({len(input_lengths)}) and target_lengths "
            f"({len(target_lengths)}) must have one entry per sequence of the batch of log_probs "
            f"of shape {list(log_probs.shape)}"
        )
    if not 0 <= blank < classes:
        raise ShapeError(f"{op}: blank {blank} must be a class index in [0, {classes})")
    if any(not 0 <= length <= frames for length in input_lengths):
        raise ShapeError(
            f"{op}: input_lengths {list(input_lengths)} must lie in [0, {frames}] (the frames of "
            f"log_probs of shape {list(log_probs.shape)})"
        )
    if any(length < 0 for length in target_lengths):
        raise ShapeError(f"{op}: target_lengths {list(target_lengths)} must not be negative")
    if len(targets.shape) == 1:
        if sum(target_lengths) > targets.shape[0]:
            raise ShapeError(
                f"{op}: concatenated targets of shape {list(targets.shape)} hold fewer labels than "
                f"target_lengths {list(target_lengths)} add up to"
            )
    elif (
        len(targets.shape) != 2
        or targets.shape[0] != n
        or (targets.shape[1] < max(target_lengths, default=0))
    ):
        raise ShapeError(
            f"{op}: targets must be (N, S) with S >= max(target_lengths) = "
            f"{max(target_lengths, default=0)}, or 1-d concatenated; got shape "
            f"{list(targets.shape)} for log_probs of shape {list(log_probs.shape)}"
        )
    width = 2 * max(target_lengths, default=0) + 1
    return Meta((n,), log_probs.dtype), Meta((n, frames, width), log_probs.dtype)


def _check_labels(extended: np.ndarray, classes: int, blank: int) -> None:
    bad = (extended < 0) | (extended >= classes)
    if bad.any():
        raise ShapeError(
            f"ctc_loss: target label {int(extended[bad].flat[0])} is not a class index in "
            f"[0, {classes})"
        )


def _prepare(log_probs, targets, target_lengths, blank):
    extended = _extended_targets(targets, target_lengths, blank)
    _check_labels(extended, log_probs.shape[2], blank)
    return extended, _can_skip(extended)


def _ctc_kernel(log_probs, targets, *, input_lengths, target_lengths, blank, zero_infinity):
    extended, skip = _prepare(log_probs, targets, target_lengths, blank)
    alpha, nll = _forward(log_probs, extended, skip, input_lengths, target_lengths)
    return nll.astype(log_probs.dtype), alpha


def _ctc_backward_kernel(gy, log_probs, targets, nll, alpha, *, input_lengths, target_lengths,
                         blank, zero_infinity):  # fmt: skip
    extended, skip = _prepare(log_probs, targets, target_lengths, blank)
    beta = _backward_variables(log_probs, extended, skip, input_lengths, target_lengths)
    both = alpha.transpose(1, 0, 2) + beta  # (T, N, L'): alignments through (t, l'[s])
    top = np.max(both, axis=2, initial=_NEG_INF, keepdims=True)
    shift = np.where(np.isfinite(top), top, 0)
    frames, n, _ = both.shape
    # per class: the alignments through each of its positions in l', summed
    total = np.zeros(log_probs.shape, log_probs.dtype)
    where = (np.arange(frames)[:, None, None], np.arange(n)[None, :, None], extended[None])
    np.add.at(total, where, np.exp(both - shift))
    with np.errstate(divide="ignore", invalid="ignore"):
        through = np.log(total) + shift
        grad = np.exp(log_probs) - np.exp(through + nll[None, :, None] - log_probs)
    grad *= gy[None, :, None]
    inside = np.arange(frames)[:, None] < np.asarray(input_lengths)[None, :]
    keep = inside if not zero_infinity else inside & np.isfinite(nll)[None, :]
    return np.where(keep[:, :, None], grad, 0).astype(log_probs.dtype)


def _ctc_backward_meta(gy: Meta, log_probs: Meta, targets: Meta, nll: Meta, alpha: Meta, **_):
    return Meta(log_probs.shape, log_probs.dtype)


_ctc_loss_backward = defop(
    "ctc_loss_backward",
    inputs=("grad", "log_probs", "targets", "nll", "log_alpha"),
    meta=_ctc_backward_meta,
    sbp=broadcast_only,
    kernels={"cpu": _ctc_backward_kernel},
    # NOTE: PyTorch has no double backward for CTC either
    differentiable=False,
)


def _ctc_grad(ctx, gy, _g_alpha):
    operands = (gy, ctx.log_probs, ctx.targets, ctx.out, ctx.out1)
    return dispatch(_ctc_loss_backward, operands, ctx.attrs), None


def _ctc_sbp(log_probs: Meta, targets: Meta, **_) -> list[Signature]:
    # NOTE: the lengths are attributes of the whole batch, so the batch stays whole
    return [Signature((B, B), (B, B))]


_ctc_loss = defop(
    "ctc_loss",
    inputs=("log_probs", "targets"),
    meta=_ctc_meta,
    sbp=_ctc_sbp,
    kernels={"cpu": _ctc_kernel},
    grad=_ctc_grad,
    saves=("log_probs", "targets", "out", "out1"),
    n_out=2,
)


def _lengths(name: str, value) -> tuple:
    """Lengths given as a tensor, a sequence or (unbatched) one int, as a tuple of ints."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, int):
        return (value,)
    if not isinstance(value, tuple | list):
        raise ArgumentError(
            f"ctc_loss(): argument '{name}' must be a 1-d tensor or a sequence of ints, not "
            f"{type(value).__name__}"
        )
    return tuple(int_arg("ctc_loss", name, v) for v in value)


_REDUCTIONS = ("none", "mean", "sum")


def ctc_loss(
    log_probs,
    targets,
    input_lengths,
    target_lengths,
    blank=0,
    reduction="mean",
    zero_infinity=False,
):
    """The CTC loss of label sequences `targets` given per-frame class log-probabilities
    `log_probs` (T, N, C), usually a log_softmax; (T, C) for one unbatched sequence.
    `targets` is (N, S) padded, or 1-d: the targets concatenated; `input_lengths` and
    `target_lengths` say how many frames and labels each sequence has. `blank` is the blank
    class. 'mean' divides each loss by its target length, then averages over the batch;
    `zero_infinity` replaces infinite losses (no alignment fits the frames) and their
    gradients by zeros.
    `F.ctc_loss(x.log_softmax(2), targets, (50,) * 16, lengths)`"""
    tensor_arg("ctc_loss", "log_probs", 1, log_probs)
    tensor_arg("ctc_loss", "targets", 2, targets)
    if reduction not in _REDUCTIONS:
        raise ValueError(
            f"ctc_loss: reduction must be one of {list(_REDUCTIONS)}, got {reduction!r}"
        )
    unbatched = log_probs.ndim == 2
    if unbatched:
        log_probs, targets = log_probs.unsqueeze(1), targets.unsqueeze(0)
    attrs = {
        "input_lengths": _lengths("input_lengths", input_lengths),
        "target_lengths": _lengths("target_lengths", target_lengths),
        "blank": int_arg("ctc_loss", "blank", blank),
        "zero_infinity": bool(zero_infinity),
    }
    loss = dispatch(_ctc_loss, (log_probs, targets), attrs)[0]
    if zero_infinity:
        loss = binary.where(binary.eq(loss, float("inf")), 0.0, loss)
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        lengths = [max(n, 1) for n in attrs["target_lengths"]]
        divisor = loss.new_tensor(lengths)
        return (loss / divisor).mean()
    return loss[0] if unbatched else loss
