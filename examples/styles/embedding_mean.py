"""Style: nn.Embedding on integer token ids, mean over the sequence, then a Linear classifier."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_classes):
        super(Model, self).__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.fc = nn.Linear(embed_dim, num_classes)

    def forward(self, tokens):
        return self.fc(self.embedding(tokens).mean(dim=1))


def get_inputs():
    return [torch.randint(0, 500, (8, 20))]


def get_init_inputs():
    return [500, 64, 6]


def get_extra_inputs():
    return [[torch.randint(0, 500, (3, 7))]]
