"""LeNet-5 (LeCun et al., 1998) for 28x28 single-channel images such as MNIST."""

from __future__ import annotations

from collections.abc import Callable

from .. import nn


class LeNet5(nn.Module):
    """LeNet-5: two 5x5 convolutions (6 and 16 channels), each followed by the activation and
    2x2 pooling, then fully connected layers 400 -> 120 -> 84 -> `num_classes`.

    The first convolution pads by 2, so a 28x28 input (MNIST) reaches the fully connected
    layers as 16x5x5, as the original 32x32 input did. The defaults are the original's tanh and
    average pooling ("subsampling"); pass `activation=nn.ReLU, pool=nn.MaxPool2d` for the
    common modern variant. Input: (N, in_channels, 28, 28); output: (N, num_classes) logits.

    >>> net = flow.models.LeNet5()
    >>> net(flow.randn(4, 1, 28, 28)).shape
    tideflow.Size([4, 10])
    """

    def __init__(
        self,
        num_classes: int = 10,
        in_channels: int = 1,
        activation: Callable[[], nn.Module] = nn.Tanh,
        pool: Callable[[int], nn.Module] = nn.AvgPool2d,
    ) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 6, kernel_size=5, padding=2),
            activation(),
            pool(2),
            nn.Conv2d(6, 16, kernel_size=5),
            activation(),
            pool(2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 5 * 5, 120),
            activation(),
            nn.Linear(120, 84),
            activation(),
            nn.Linear(84, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))
