"""Loss: triplet margin loss on L2-normalised embeddings (metric learning head)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, margin=0.2):
        super(Model, self).__init__()
        self.criterion = nn.TripletMarginLoss(margin=margin, p=2)

    def forward(self, anchor, positive, negative):
        anchor = F.normalize(anchor, dim=1)
        positive = F.normalize(positive, dim=1)
        negative = F.normalize(negative, dim=1)
        return self.criterion(anchor, positive, negative)


def get_inputs():
    return [torch.randn(64, 128), torch.randn(64, 128), torch.randn(64, 128)]


def get_init_inputs():
    return [0.2]


def get_extra_inputs():
    return [[torch.randn(5, 3), torch.randn(5, 3), torch.randn(5, 3)]]
