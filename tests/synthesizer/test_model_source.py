"""The candidate rebuilds the reference class from the spec source, whatever the style:
``model_source`` keeps the class (minus forward) under its new name and the top-level
lines it reaches. Construction is checked by building both classes with one seed."""

from __future__ import annotations

import types

import pytest
import torch

from ke_synthesizer.offline.frontend.model_source import model_source
from kernelevolve.errors import InvalidSpecError

_TAIL = "\n\ndef get_inputs():\n    return [torch.randn(2, 4)]\n\n\ndef get_init_inputs():\n    return []\n"

STYLES = {
    "super_named": """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()
        self.lin = nn.Linear(4, 3)
    def forward(self, x):
        return self.lin(x)
""",
    "super_dunder_class": """
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self, d):
        super(self.__class__, self).__init__()
        self.lin = nn.Linear(d, d)

class Model(nn.Module):
    def __init__(self):
        super(type(self), self).__init__()
        self.blocks = nn.ModuleList([Block(4) for _ in range(2)])
    def forward(self, x):
        return x
""",
    "module_init_call": """
import torch
import torch.nn as tnn

class Model(tnn.Module):
    def __init__(self, dims=(4, 5)):
        tnn.Module.__init__(self)
        self.seq = tnn.Sequential(*[tnn.Linear(a, b) for a, b in zip(dims, dims[1:])])
    def forward(self, x):
        return self.seq(x)
""",
    "no_init": """
import torch
import torch.nn as nn

class Model(nn.Module):
    @torch.no_grad()
    def forward(self, x: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
        return x * scale
""",
    "helpers_everywhere": """
import torch
import torch.nn as nn
import torch.nn.functional as fn

hidden = 6
unused = 1 / 0 if False else 3

def make_mlp(dims):
    layers = []
    for a, b in zip(dims, dims[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)

def helper_for_forward(x):
    return fn.gelu(x)

class Model(nn.Module):
    expansion = 2
    def __init__(self):
        super().__init__()
        self.width = hidden * self.expansion
        self.mlp = self._build()
        self.register_buffer("scale", torch.ones(self.width), persistent=False)
    def _build(self):
        return make_mlp([4, hidden, self.width])
    def forward(self, x):
        return helper_for_forward(self.mlp(x)) * self.scale
""",
}


def _construct(source: str, cls: str, namespace_source: str) -> torch.nn.Module:
    module = types.ModuleType("m")
    exec(compile(namespace_source, "<m>", "exec"), module.__dict__)
    torch.manual_seed(0)
    return module.__dict__[cls]()


@pytest.mark.parametrize("style", sorted(STYLES))
def test_candidate_class_rebuilds_the_reference_parameters(style: str) -> None:
    spec = STYLES[style] + _TAIL
    pieces = model_source(spec)
    candidate = "import torch\nimport torch.nn as nn\n\n" + "\n\n".join(pieces.prelude) + "\n\n" + pieces.class_source
    assert "Model(" not in candidate.replace("ModelNew(", "") and "__class__" not in candidate
    assert "def forward" not in pieces.class_source.split("class ModelNew")[1]
    assert "get_inputs" not in candidate
    ref = _construct(spec, "Model", spec)
    new = _construct(candidate, "ModelNew", candidate)
    assert [(k, tuple(v.shape)) for k, v in ref.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in new.state_dict().items()]
    for (k, a), b in zip(ref.state_dict().items(), new.state_dict().values(), strict=True):
        assert torch.equal(a, b), k  # same seed, same draws in the same order


def test_only_reached_lines_travel() -> None:
    pieces = model_source(STYLES["helpers_everywhere"] + _TAIL)
    text = "\n".join(pieces.prelude)
    assert "unused" not in text
    assert "def make_mlp" in text and "hidden = 6" in text
    # read only by forward, which the synthesizer generates from the traced graph
    assert "helper_for_forward" not in text and "functional" not in text
    # _build and the class attribute stay on the class
    assert "def _build" in pieces.class_source and "expansion = 2" in pieces.class_source


def test_a_spec_without_a_model_class_is_refused_clearly() -> None:
    with pytest.raises(InvalidSpecError, match="class Model"):
        model_source("import torch\nfrom somewhere import Model\n" + _TAIL)
