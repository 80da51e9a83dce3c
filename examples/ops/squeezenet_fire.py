"""SqueezeNet-style whole model: strided stem, three fire modules with max pooling, a 1x1 classifier."""

import torch
import torch.nn as nn

# A fire module squeezes with a 1x1 conv, then expands with 1x1 and 3x3 convs concatenated
# (the simple bypass adds its input where the widths agree). The classifier stays per
# position: a global average left this small net's output nearly independent of its input.
# A whole model of several kernels: the run phase's work must not grow with their number.


class Model(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2)
        self.pool = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.fires = nn.ModuleList([self._fire(16, 4, 8), self._fire(16, 4, 8), self._fire(16, 8, 16)])
        self.classifier = nn.Conv2d(32, num_classes, 1)

    @staticmethod
    def _fire(cin: int, squeeze: int, expand: int) -> nn.ModuleDict:
        return nn.ModuleDict(dict(squeeze=nn.Conv2d(cin, squeeze, 1), expand1=nn.Conv2d(squeeze, expand, 1),
                                  expand3=nn.Conv2d(squeeze, expand, 3, padding=1)))

    @staticmethod
    def _run_fire(fire: nn.ModuleDict, x: torch.Tensor) -> torch.Tensor:
        s = torch.relu(fire["squeeze"](x))
        out = torch.cat([torch.relu(fire["expand1"](s)), torch.relu(fire["expand3"](s))], dim=1)
        return out + x if out.shape[1] == x.shape[1] else out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.stem(x)))
        x = self.pool(self._run_fire(self.fires[1], self._run_fire(self.fires[0], x)))
        return torch.relu(self.classifier(self._run_fire(self.fires[2], x)))


NUM_CLASSES = 10


def get_inputs():
    return [torch.randn(2, 3, 33, 33)]


def get_init_inputs():
    return [NUM_CLASSES]


def get_extra_inputs():
    return [[torch.randn(1, 3, 17, 23)]]
