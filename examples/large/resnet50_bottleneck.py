"""A 50-layer residual network of bottleneck blocks (3, 4, 6, 3), batch 64 of 224x224 images."""

import torch
import torch.nn as nn

batch_size = 64
image_size = 224
num_classes = 1000


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand by 4; a projection shortcut when the shape changes."""

    def __init__(self, cin, mid, stride=1):
        super().__init__()
        cout = 4 * mid
        self.body = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )
        self.shortcut = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        return torch.relu(self.body(x) + self.shortcut(x))


class Model(nn.Module):
    def __init__(self, depths, num_classes):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        stages, cin = [], 64
        for i, depth in enumerate(depths):
            mid = 64 * 2**i
            for j in range(depth):
                stages.append(Bottleneck(cin, mid, stride=2 if j == 0 and i > 0 else 1))
                cin = 4 * mid
        self.stages = nn.ModuleList(stages)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.stem(x)
        for block in self.stages:
            x = block(x)
        return self.fc(x.mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [[3, 4, 6, 3], num_classes]
