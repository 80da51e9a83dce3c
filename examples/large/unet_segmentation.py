"""A U-Net (four down and four up steps, skip connections) over 16 three-channel 512x512 images."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
in_channels = 3
num_classes = 2
image_height = 512
image_width = 512
base_features = 64


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.net(x)


class Model(nn.Module):
    def __init__(self, in_channels, num_classes, features=64):
        super().__init__()
        widths = [features * 2**i for i in range(5)]
        self.inc = DoubleConv(in_channels, widths[0])
        self.downs = nn.ModuleList([DoubleConv(widths[i], widths[i + 1]) for i in range(4)])
        self.ups = nn.ModuleList([nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2)
                                  for i in reversed(range(4))])
        self.up_convs = nn.ModuleList([DoubleConv(widths[i + 1], widths[i]) for i in reversed(range(4))])
        self.head = nn.Conv2d(widths[0], num_classes, 1)

    def forward(self, x):
        skips = [self.inc(x)]
        for down in self.downs:
            skips.append(down(F.max_pool2d(skips[-1], 2)))
        x = skips.pop()
        for up, conv in zip(self.ups, self.up_convs, strict=True):
            x = conv(torch.cat([skips.pop(), up(x)], dim=1))
        return self.head(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_height, image_width)]


def get_init_inputs():
    return [in_channels, num_classes, base_features]
