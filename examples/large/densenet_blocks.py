"""A densely connected network (DenseNet-121 layout: blocks of 6, 12, 24, 16 layers, growth 32)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH_SIZE = 32
IMAGE = 224
GROWTH_RATE = 32
NUM_CLASSES = 1000


class DenseLayer(nn.Sequential):
    """BN-ReLU-1x1 conv to bn_size * growth channels, then BN-ReLU-3x3 conv to growth."""

    def __init__(self, in_features, growth_rate, bn_size=4):
        inner = bn_size * growth_rate
        super().__init__(
            nn.BatchNorm2d(in_features), nn.ReLU(inplace=True), nn.Conv2d(in_features, inner, 1, bias=False),
            nn.BatchNorm2d(inner), nn.ReLU(inplace=True), nn.Conv2d(inner, growth_rate, 3, padding=1, bias=False),
        )


class DenseBlock(nn.ModuleDict):
    def __init__(self, num_layers, in_features, growth_rate):
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", DenseLayer(in_features + i * growth_rate, growth_rate))

    def forward(self, x):
        for layer in self.values():
            x = torch.cat([x, layer(x)], dim=1)
        return x


class Transition(nn.Sequential):
    def __init__(self, in_features, out_features):
        super().__init__(
            nn.BatchNorm2d(in_features),
            nn.ReLU(),
            nn.Conv2d(in_features, out_features, kernel_size=1, bias=False),
            nn.AvgPool2d(kernel_size=2, stride=2),
        )


class Model(nn.Module):
    def __init__(self, growth_rate=32, block_config=(6, 12, 24, 16), num_classes=1000):
        super().__init__()
        features = 2 * growth_rate
        layers = [nn.Conv2d(3, features, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(features),
                  nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1)]
        for i, n in enumerate(block_config):
            layers.append(DenseBlock(n, features, growth_rate))
            features += n * growth_rate
            if i != len(block_config) - 1:
                layers.append(Transition(features, features // 2))
                features //= 2
        layers += [nn.BatchNorm2d(features), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(features, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1)).flatten(1)
        return self.classifier(x)


def get_inputs():
    return [torch.randn(BATCH_SIZE, 3, IMAGE, IMAGE)]


def get_init_inputs():
    return [GROWTH_RATE, (6, 12, 24, 16), NUM_CLASSES]
