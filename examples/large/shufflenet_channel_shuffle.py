"""A channel-shuffle network (ShuffleNetV2 1.0x: stages of 4, 8, 4 units), batch 256 at 224x224."""

import torch
import torch.nn as nn

BATCH = 256
RESOLUTION = 224
CLASSES = 1000


def channel_shuffle(x, groups):
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, inp, oup, stride):
        super(ShuffleUnit, self).__init__()  # noqa: UP008 - the common style on purpose
        self.stride = stride
        branch = oup // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False), nn.BatchNorm2d(inp),
                nn.Conv2d(inp, branch, 1, bias=False), nn.BatchNorm2d(branch), nn.ReLU(inplace=True))
        else:
            self.branch1 = nn.Sequential()
        cin = inp if stride > 1 else branch
        self.branch2 = nn.Sequential(
            nn.Conv2d(cin, branch, 1, bias=False), nn.BatchNorm2d(branch), nn.ReLU(inplace=True),
            nn.Conv2d(branch, branch, 3, stride, 1, groups=branch, bias=False), nn.BatchNorm2d(branch),
            nn.Conv2d(branch, branch, 1, bias=False), nn.BatchNorm2d(branch), nn.ReLU(inplace=True))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class Model(nn.Module):
    def __init__(self, num_classes=1000, stage_repeats=(4, 8, 4), stage_channels=(24, 116, 232, 464, 1024)):
        super(Model, self).__init__()  # noqa: UP008 - the common style on purpose
        self.conv1 = nn.Sequential(nn.Conv2d(3, stage_channels[0], 3, 2, 1, bias=False),
                                   nn.BatchNorm2d(stage_channels[0]), nn.ReLU(inplace=True))
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        units = []
        inp = stage_channels[0]
        for repeats, oup in zip(stage_repeats, stage_channels[1:4], strict=True):
            units.append(ShuffleUnit(inp, oup, 2))
            units += [ShuffleUnit(oup, oup, 1) for _ in range(repeats - 1)]
            inp = oup
        self.stages = nn.Sequential(*units)
        self.conv5 = nn.Sequential(nn.Conv2d(inp, stage_channels[-1], 1, bias=False),
                                   nn.BatchNorm2d(stage_channels[-1]), nn.ReLU(inplace=True))
        self.fc = nn.Linear(stage_channels[-1], num_classes)

    def forward(self, x):
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stages(x))
        return self.fc(x.mean([2, 3]))


def get_inputs():
    return [torch.randn(BATCH, 3, RESOLUTION, RESOLUTION)]


def get_init_inputs():
    return [CLASSES]
