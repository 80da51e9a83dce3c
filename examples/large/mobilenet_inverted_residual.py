"""An inverted-residual network with depthwise convolutions (MobileNetV2 layout), batch 128 at 224x224."""

import torch
from torch import nn

batch_size = 128
input_size = 224
num_classes = 1000
width = 32


def conv_bn(inp, oup, kernel, stride, groups=1, act=True):
    layers = [nn.Conv2d(inp, oup, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(oup)]
    if act:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, expand_ratio):
        super().__init__()
        hidden = inp * expand_ratio
        self.use_res = stride == 1 and inp == oup
        layers = [] if expand_ratio == 1 else [conv_bn(inp, hidden, 1, 1)]
        layers += [conv_bn(hidden, hidden, 3, stride, groups=hidden), conv_bn(hidden, oup, 1, 1, act=False)]
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.block(x) if self.use_res else self.block(x)


class Model(nn.Module):
    # t (expansion), c (channels), n (repeats), s (first stride)
    settings = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2],
                [6, 320, 1, 1]]

    def __init__(self, num_classes, first_channels=32, last_channels=1280):
        super().__init__()
        blocks = [conv_bn(3, first_channels, 3, 2)]
        inp = first_channels
        for t, c, n, s in self.settings:
            for i in range(n):
                blocks.append(InvertedResidual(inp, c, s if i == 0 else 1, t))
                inp = c
        blocks.append(conv_bn(inp, last_channels, 1, 1))
        self.features = nn.Sequential(*blocks)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last_channels, num_classes))

    def forward(self, x):
        x = self.features(x)
        x = x.mean([2, 3])
        return self.classifier(x)


def get_inputs():
    return [torch.randn(batch_size, 3, input_size, input_size)]


def get_init_inputs():
    return [num_classes, width]
