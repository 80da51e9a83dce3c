"""Style: a small VGG with a module-level cfg list turned into features (conv/relu/maxpool) by make_layers."""

import torch
import torch.nn as nn

cfg = [8, "M", 16, "M"]


def make_layers(cfg, in_channels=3):
    layers = []
    for v in cfg:
        if v == "M":
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
        else:
            layers += [nn.Conv2d(in_channels, v, kernel_size=3, padding=1), nn.ReLU(inplace=True)]
            in_channels = v
    return nn.Sequential(*layers)


class Model(nn.Module):
    def __init__(self, num_classes=10):
        super(Model, self).__init__()
        self.features = make_layers(cfg)
        self.classifier = nn.Sequential(
            nn.Linear(16 * 4 * 4, 64),
            nn.ReLU(True),
            nn.Linear(64, num_classes),
        )

    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), -1)
        return self.classifier(x)


def get_inputs():
    return [torch.randn(4, 3, 16, 16)]


def get_init_inputs():
    return [10]
