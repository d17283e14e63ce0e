"""ResNet (He et al., 2015) as torchvision defines it: the same modules, parameter names and
initialization, so torchvision state dicts load unchanged."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .. import nn
from ..nn import init

NormLayer = Callable[[int], nn.Module]


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1, dilation: int = 1):
    """3x3 convolution with 'same' padding and no bias (a BatchNorm follows)."""
    return nn.Conv2d(
        in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
        groups=groups, bias=False, dilation=dilation,
    )  # fmt: skip


def conv1x1(in_planes: int, out_planes: int, stride: int = 1):
    """1x1 convolution with no bias."""
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


# NOTE: torchvision uses ReLU(inplace=True) and `out += identity` to save memory. tideflow's
# in-place ops compute out of place and copy back, so the out-of-place forms are cheaper here
# and give the same values.


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with BatchNorm and a residual connection (ResNet-18/34)."""

    expansion = 1

    def __init__(
        self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
        groups: int = 1, base_width: int = 64, dilation: int = 1,
        norm_layer: NormLayer | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        if groups != 1 or base_width != 64:
            raise ValueError(
                f"BasicBlock only supports groups=1 and base_width=64, got groups={groups} "
                f"and base_width={base_width}"
            )
        if dilation > 1:
            raise NotImplementedError(f"Dilation > 1 not supported in BasicBlock, got {dilation}")
        norm_layer = norm_layer or nn.BatchNorm2d
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = norm_layer(planes)
        self.relu = nn.ReLU()
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = norm_layer(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided, grouped), 1x1 expand by 4, with a residual connection
    (ResNet-50/101/152). The stride sits on the 3x3 convolution ("ResNet v1.5")."""

    expansion = 4

    def __init__(
        self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None,
        groups: int = 1, base_width: int = 64, dilation: int = 1,
        norm_layer: NormLayer | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        norm_layer = norm_layer or nn.BatchNorm2d
        width = int(planes * (base_width / 64.0)) * groups
        self.conv1 = conv1x1(inplanes, width)
        self.bn1 = norm_layer(width)
        self.conv2 = conv3x3(width, width, stride, groups, dilation)
        self.bn2 = norm_layer(width)
        self.conv3 = conv1x1(width, planes * self.expansion)
        self.bn3 = norm_layer(planes * self.expansion)
        self.relu = nn.ReLU()
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    """A ResNet: a 7x7/2 stem convolution, 3x3/2 max pooling, four stages of residual blocks
    (64, 128, 256, 512 planes; stages 2-4 halve the resolution), global average pooling and a
    linear classifier. Input (N, 3, H, W) with H, W >= 32; output (N, num_classes) logits.

    `layers` gives the number of blocks per stage. `zero_init_residual` starts each block's
    last BatchNorm scale at zero, so every block begins as the identity. `groups` and
    `width_per_group` give ResNeXt / wide ResNets; `replace_stride_with_dilation` (three
    bools) keeps the resolution of stages 2-4 with dilated convolutions instead.

    >>> net = flow.models.resnet18(num_classes=10)
    >>> net(flow.randn(2, 3, 32, 32)).shape
    tideflow.Size([2, 10])
    """

    def __init__(
        self, block: type[BasicBlock | Bottleneck], layers: Sequence[int],
        num_classes: int = 1000, zero_init_residual: bool = False, groups: int = 1,
        width_per_group: int = 64, replace_stride_with_dilation: Sequence[bool] | None = None,
        norm_layer: NormLayer | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        if len(layers) != 4:
            raise ValueError(f"ResNet: layers needs 4 block counts, got {list(layers)}")
        dilate = list(replace_stride_with_dilation or (False, False, False))
        if len(dilate) != 3:
            raise ValueError(
                "replace_stride_with_dilation should be None or a 3-element tuple, "
                f"got {replace_stride_with_dilation}"
            )
        self._norm_layer = norm_layer or nn.BatchNorm2d
        self.inplanes = 64
        self.dilation = 1
        self.groups = groups
        self.base_width = width_per_group
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = self._norm_layer(self.inplanes)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2, dilate=dilate[0])
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2, dilate=dilate[1])
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2, dilate=dilate[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        self._init_weights(zero_init_residual)

    def _init_weights(self, zero_init_residual: bool) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                init.constant_(m.weight, 1)
                init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, Bottleneck) and m.bn3.weight is not None:
                    init.constant_(m.bn3.weight, 0)
                elif isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    init.constant_(m.bn2.weight, 0)

    def _make_layer(
        self, block: type[BasicBlock | Bottleneck], planes: int, blocks: int, stride: int = 1,
        dilate: bool = False,
    ) -> nn.Sequential:  # fmt: skip
        norm_layer = self._norm_layer
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                norm_layer(planes * block.expansion),
            )
        first = block(
            self.inplanes, planes, stride, downsample, self.groups, self.base_width,
            previous_dilation, norm_layer,
        )  # fmt: skip
        self.inplanes = planes * block.expansion
        rest = (
            block(self.inplanes, planes, groups=self.groups, base_width=self.base_width,
                  dilation=self.dilation, norm_layer=norm_layer)
            for _ in range(1, blocks)
        )  # fmt: skip
        layers = [first, *rest]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))


def resnet18(**kwargs) -> ResNet:
    """ResNet-18: BasicBlocks [2, 2, 2, 2]. `flow.models.resnet18(num_classes=10)`"""
    return ResNet(BasicBlock, [2, 2, 2, 2], **kwargs)


def resnet34(**kwargs) -> ResNet:
    """ResNet-34: BasicBlocks [3, 4, 6, 3]. `flow.models.resnet34(num_classes=10)`"""
    return ResNet(BasicBlock, [3, 4, 6, 3], **kwargs)


def resnet50(**kwargs) -> ResNet:
    """ResNet-50: Bottlenecks [3, 4, 6, 3]. `flow.models.resnet50(num_classes=10)`"""
    return ResNet(Bottleneck, [3, 4, 6, 3], **kwargs)


def resnet101(**kwargs) -> ResNet:
    """ResNet-101: Bottlenecks [3, 4, 23, 3]. `flow.models.resnet101(num_classes=10)`"""
    return ResNet(Bottleneck, [3, 4, 23, 3], **kwargs)


def resnet152(**kwargs) -> ResNet:
    """ResNet-152: Bottlenecks [3, 8, 36, 3]. `flow.models.resnet152(num_classes=10)`"""
    return ResNet(Bottleneck, [3, 8, 36, 3], **kwargs)
