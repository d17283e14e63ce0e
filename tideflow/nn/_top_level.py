"""The nn.functional ops PyTorch also has at the top level (`torch.conv2d`, `torch.dropout`,
...), with the top level's signatures: the same functions where the signatures agree, thin
adapters where the top level differs (dropout's `train`, layer_norm's `cudnn_enable`)."""

from __future__ import annotations

from . import functional as F

__all__ = [
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "alpha_dropout", "avg_pool1d", "bilinear",
    "channel_shuffle", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "cosine_similarity", "dropout", "feature_alpha_dropout", "group_norm",
    "layer_norm", "max_pool1d", "max_pool1d_with_indices", "max_pool2d", "max_pool3d",
    "native_channel_shuffle", "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle",
    "rms_norm", "rrelu", "rrelu_",
]  # fmt: skip

adaptive_avg_pool1d = F.adaptive_avg_pool1d
avg_pool1d = F.avg_pool1d
bilinear = F.bilinear
channel_shuffle = F.channel_shuffle
native_channel_shuffle = F.native_channel_shuffle
conv1d, conv2d, conv3d = F.conv1d, F.conv2d, F.conv3d
conv_transpose1d, conv_transpose2d, conv_transpose3d = (
    F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d,
)  # fmt: skip
cosine_similarity = F.cosine_similarity
pairwise_distance = F.pairwise_distance
pdist = F.pdist
pixel_shuffle, pixel_unshuffle = F.pixel_shuffle, F.pixel_unshuffle
max_pool1d_with_indices = F.max_pool1d_with_indices
rms_norm = F.rms_norm


def adaptive_max_pool1d(input, output_size):
    """(values, indices): the top level always returns the argmax too."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def max_pool1d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """`F.max_pool1d` (an empty stride is the kernel size, as the top level's default)."""
    return F.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """`F.max_pool2d` (an empty stride is the kernel size, as the top level's default)."""
    return F.max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool3d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """`F.max_pool3d` (an empty stride is the kernel size, as the top level's default)."""
    return F.max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def dropout(input, p, train):
    """`F.dropout(input, p, training=train)`."""
    return F.dropout(input, p, train)


def alpha_dropout(input, p, train):
    """`F.alpha_dropout(input, p, training=train)`."""
    return F.alpha_dropout(input, p, train)


def feature_alpha_dropout(input, p, train):
    """`F.feature_alpha_dropout(input, p, training=train)`."""
    return F.feature_alpha_dropout(input, p, train)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """`F.layer_norm` (`cudnn_enable` chooses a GPU library: no meaning here)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """`F.group_norm` (`cudnn_enabled` chooses a GPU library: no meaning here)."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """`F.rrelu`."""
    return F.rrelu(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    """`F.rrelu_`."""
    return F.rrelu(input, lower, upper, training, inplace=True)
