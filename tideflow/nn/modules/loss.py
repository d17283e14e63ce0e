"""Loss layers: each holds its reduction ('none' | 'mean' | 'sum') and hyperparameters and
calls its `nn.functional` loss. Class weights are buffers, so they follow `.to()` and appear
in the state dict under PyTorch's key names."""

from __future__ import annotations

import warnings

from .. import functional as F
from .module import Module


def _legacy_reduction(size_average, reduce) -> str:
    """The reduction PyTorch's deprecated `size_average`/`reduce` pair stands for."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = ("mean" if size_average else "sum") if reduce else "none"
    warnings.warn(
        f"size_average and reduce args will be deprecated, please use reduction='{reduction}' "
        "instead.",
        stacklevel=3,
    )
    return reduction


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean") -> None:
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = _legacy_reduction(size_average, reduce)
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """Mean absolute error `|input - target|`, reduced.

    >>> flow.nn.L1Loss()(flow.tensor([1.0, 2.0]), flow.tensor([1.5, 1.0]))
    tensor(0.7500)
    """

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    """Mean squared error `(input - target)**2`, reduced.

    >>> flow.nn.MSELoss()(flow.tensor([1.0, 2.0]), flow.tensor([1.5, 1.0]))
    tensor(0.6250)
    """

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Quadratic (`0.5 d**2 / beta`) where `|d| < beta`, L1 (`|d| - 0.5 beta`) beyond.

    >>> flow.nn.SmoothL1Loss()(flow.tensor([0.5, 3.0]), flow.zeros(2))
    tensor(1.3125)
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean", beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """`0.5 d**2` where `|d| < delta`, else `delta (|d| - 0.5 delta)`.

    >>> flow.nn.HuberLoss(delta=2.0)(flow.tensor([0.5, 3.0]), flow.zeros(2))
    tensor(2.0625)
    """

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of class-index targets under log-probabilities `input` of
    shape (C,), (N, C) or (N, C, d1, ...); `weight` rescales each class, targets equal to
    `ignore_index` are skipped.

    >>> logp = flow.nn.LogSoftmax(dim=1)(flow.randn(3, 5))
    >>> flow.nn.NLLLoss()(logp, flow.tensor([1, 0, 4])).shape
    tideflow.Size([])
    """

    def __init__(
        self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
        reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(
            input, target, weight=self.weight, ignore_index=self.ignore_index,
            reduction=self.reduction,
        )  # fmt: skip


class NLLLoss2d(NLLLoss):
    """Deprecated (as in PyTorch): `NLLLoss`, which takes (N, C, H, W) inputs itself."""

    def __init__(
        self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
        reduction: str = "mean",
    ) -> None:  # fmt: skip
        warnings.warn(
            "`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in "
            "replacement.",
            stacklevel=2,
        )
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy between logits (C,), (N, C) or (N, C, d1, ...) and class indices or
    class probabilities; `label_smoothing` mixes the target with the uniform distribution.

    >>> loss = flow.nn.CrossEntropyLoss(label_smoothing=0.1)
    >>> loss(flow.randn(3, 5, requires_grad=True), flow.tensor([1, 0, 4])).backward()
    """

    def __init__(
        self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
        reduction: str = "mean", label_smoothing: float = 0.0,
    ) -> None:  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(
            input, target, weight=self.weight, ignore_index=self.ignore_index,
            reduction=self.reduction, label_smoothing=self.label_smoothing,
        )  # fmt: skip


class BCELoss(_WeightedLoss):
    """Binary cross entropy between probabilities `input` in [0, 1] and `target`; `weight`
    rescales each element.

    >>> flow.nn.BCELoss()(flow.tensor([0.2, 0.9]), flow.tensor([0.0, 1.0]))
    tensor(0.1643)
    """

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """`BCELoss(sigmoid(input), target)` computed stably from logits; `pos_weight` (a buffer,
    broadcast along the last dim) weighs the positive term of each class.

    >>> loss = flow.nn.BCEWithLogitsLoss(pos_weight=flow.tensor([3.0]))
    >>> loss(flow.tensor([-1.0, 2.0]), flow.tensor([0.0, 1.0]))
    tensor(0.3470)
    """

    def __init__(
        self, weight=None, size_average=None, reduce=None, reduction: str = "mean",
        pos_weight=None,
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, pos_weight=self.pos_weight, reduction=self.reduction
        )


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of `target` from the log-probabilities `input`; use
    `reduction='batchmean'` for the mathematical KL divergence.

    >>> loss = flow.nn.KLDivLoss(reduction="batchmean")
    >>> loss(flow.tensor([[-1.2, -0.4]]), flow.tensor([[0.3, 0.7]])).shape
    tideflow.Size([])
    """

    def __init__(
        self, size_average=None, reduce=None, reduction: str = "mean", log_target: bool = False
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class PoissonNLLLoss(_Loss):
    """Negative log likelihood of `target` under a Poisson distribution whose rate is
    `exp(log_input)` (or `log_input` itself with `log_input=False`).

    >>> flow.nn.PoissonNLLLoss()(flow.tensor([0.5, 1.0]), flow.tensor([1.0, 3.0])).shape
    tideflow.Size([])
    """

    def __init__(
        self, log_input: bool = True, full: bool = False, size_average=None, eps: float = 1e-8,
        reduce=None, reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(
            log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
            reduction=self.reduction,
        )  # fmt: skip


class SoftMarginLoss(_Loss):
    """Two-class logistic loss `log(1 + exp(-target * input))` for targets of +1 / -1.

    >>> flow.nn.SoftMarginLoss()(flow.tensor([0.3, -2.0]), flow.tensor([1.0, -1.0])).shape
    tideflow.Size([])
    """

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class _MarginLoss(_Loss):
    def __init__(
        self, margin: float = 0.0, size_average=None, reduce=None, reduction: str = "mean"
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class MarginRankingLoss(_MarginLoss):
    """`max(0, -target * (input1 - input2) + margin)`: target 1 asks input1 to rank above
    input2 by `margin`, -1 the opposite.

    >>> flow.nn.MarginRankingLoss(0.1)(flow.tensor([0.5]), flow.tensor([0.2]), flow.tensor([1.0]))
    tensor(0.)
    """

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(
            input1, input2, target, margin=self.margin, reduction=self.reduction
        )


class CosineEmbeddingLoss(_MarginLoss):
    """`1 - cos(x1, x2)` for target 1, `max(0, cos(x1, x2) - margin)` for target -1.

    >>> loss = flow.nn.CosineEmbeddingLoss(margin=0.2)
    >>> loss(flow.randn(3, 4), flow.randn(3, 4), flow.tensor([1, -1, 1])).shape
    tideflow.Size([])
    """

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(
            input1, input2, target, margin=self.margin, reduction=self.reduction
        )


class TripletMarginLoss(_Loss):
    """`max(0, d(anchor, positive) - d(anchor, negative) + margin)` with the p-norm distance;
    `swap` uses the smaller of d(anchor, negative) and d(positive, negative).

    >>> a, p, n = flow.randn(8, 4), flow.randn(8, 4), flow.randn(8, 4)
    >>> flow.nn.TripletMarginLoss(margin=1.0, p=2)(a, p, n).shape
    tideflow.Size([])
    """

    def __init__(
        self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
        size_average=None, reduce=None, reduction: str = "mean",
    ) -> None:  # fmt: skip
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(
                f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead"
            )
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(
            anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
            swap=self.swap, reduction=self.reduction,
        )  # fmt: skip


class TripletMarginWithDistanceLoss(_Loss):
    """`max(0, d(anchor, positive) - d(anchor, negative) + margin)` for any distance
    `distance_function(x, y)` (default: `F.pairwise_distance`); `swap` as TripletMarginLoss.

    >>> a, p, n = flow.randn(8, 4), flow.randn(8, 4), flow.randn(8, 4)
    >>> cosine = lambda x, y: 1 - F.cosine_similarity(x, y)
    >>> flow.nn.TripletMarginWithDistanceLoss(distance_function=cosine)(a, p, n).shape
    tideflow.Size([])
    """

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:  # fmt: skip
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(
                "TripletMarginWithDistanceLoss: expected margin to be greater than 0, got "
                f"{margin} instead"
            )
        self.distance_function = distance_function
        self.margin = margin
        self.swap = swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction,
        )  # fmt: skip


class GaussianNLLLoss(_Loss):
    """Negative log likelihood of the target under Gaussians of the input's mean and the
    given variance (see `F.gaussian_nll_loss`).

    >>> flow.nn.GaussianNLLLoss()(flow.randn(4, 2), flow.randn(4, 2), flow.ones(4, 1)).shape
    tideflow.Size([])
    """

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.full = full
        self.eps = eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(
            input, target, var, full=self.full, eps=self.eps, reduction=self.reduction
        )


class HingeEmbeddingLoss(_MarginLoss):
    """`input` where target is 1, `max(0, margin - input)` where it is -1 (inputs are
    distances).

    >>> flow.nn.HingeEmbeddingLoss()(flow.tensor([0.3, 2.0]), flow.tensor([1.0, -1.0]))
    tensor(0.1500)
    """

    def __init__(self, margin: float = 1.0, size_average=None, reduce=None,
                 reduction: str = "mean") -> None:  # fmt: skip
        super().__init__(margin, size_average, reduce, reduction)

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss (see `F.multi_margin_loss`), `p` 1 or 2.

    >>> flow.nn.MultiMarginLoss()(flow.tensor([[0.1, 0.8, 0.3]]), flow.tensor([1]))
    tensor(0.2667)
    """

    def __init__(self, p: int = 1, margin: float = 1.0, weight=None, size_average=None,
                 reduce=None, reduction: str = "mean") -> None:  # fmt: skip
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        self.p = p
        self.margin = margin

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)  # fmt: skip


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss; each target row lists its classes and ends at the first -1
    (see `F.multilabel_margin_loss`).

    >>> flow.nn.MultiLabelMarginLoss()(flow.tensor([[0.1, 0.2, 0.4, 0.8]]),
    ...                                flow.tensor([[3, 0, -1, 1]]))
    tensor(0.8500)
    """

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Multi-label one-versus-all logistic loss, averaged over the classes.

    >>> flow.nn.MultiLabelSoftMarginLoss()(flow.tensor([[0.3, -1.0]]), flow.tensor([[1.0, 0.0]]))
    tensor(0.4338)
    """

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)  # fmt: skip


class CTCLoss(_Loss):
    """The connectionist temporal classification loss of label sequences given per-frame
    class log-probabilities (see `F.ctc_loss`); `blank` is the blank class, `zero_infinity`
    zeros the losses of sequences no alignment fits.

    >>> x = flow.randn(6, 2, 4).log_softmax(2)
    >>> flow.nn.CTCLoss()(x, flow.tensor([[1, 2], [3, 3]]), (6, 6), (2, 2)).shape
    tideflow.Size([])
    """

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(
            log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
            self.zero_infinity,
        )  # fmt: skip
