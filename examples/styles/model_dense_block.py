"""DenseNet-style block: each layer (BN -> ReLU -> 1x1 conv -> BN -> ReLU -> 3x3 conv) reads the concatenation of every earlier feature map and appends ``growth`` channels."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class DenseLayer(nn.Module):
    def __init__(self, in_ch: int, growth: int, bottleneck: int):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(in_ch)
        self.conv1 = nn.Conv2d(in_ch, bottleneck * growth, kernel_size=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bottleneck * growth)
        self.conv2 = nn.Conv2d(bottleneck * growth, growth, kernel_size=3, padding=1, bias=False)

    def forward(self, features):
        x = torch.cat(features, 1)
        x = self.conv1(F.relu(self.norm1(x)))
        return self.conv2(F.relu(self.norm2(x)))


class Model(nn.Module):
    def __init__(self, in_ch: int, growth: int, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(in_ch + i * growth, growth, 2) for i in range(layers))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


IN_CH, GROWTH, LAYERS = 6, 5, 3


def get_inputs():
    return [torch.randn(2, IN_CH, 9, 11)]


def get_init_inputs():
    return [IN_CH, GROWTH, LAYERS]
