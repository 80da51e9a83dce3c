"""Host overhead of generated code (README "Host overhead"): launchers keep per-signature
plans instead of per-call torch.broadcast_shapes / triton.cdiv / views, and stay correct
when the run-time shapes broadcast differently from the captured ones (the slow paths:
materialised operands, views that are copies)."""

from __future__ import annotations

import ast

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import EXAMPLES, example_source

# families whose launchers follow the rules here (the row family has its own tests)
FAMILIES = ("launch_pointwise_", "launch_matmul_", "launch_pool_", "launch_conv_", "launch_flash_")
SLOW_CALLS = {"broadcast_shapes", "cdiv", "next_power_of_2", "prod"}
VIEWS = {"expand", "reshape", "t", "unsqueeze"}  # allowed only in a guarded slow path (an ``if``)

# captured: all operands [48, 200]; extra inputs broadcast a same-shape operand ([1, 200]),
# lower the rank ([200]) and pass a transposed (non-contiguous) broadcast operand
POINTWISE_BROADCAST = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(200))

    def forward(self, x, y, z):
        return torch.tanh(x * self.w + y) - z.abs() / (1.0 + z * z)


def get_inputs():
    return [torch.randn(48, 200), torch.randn(48, 200), torch.randn(1, 200)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(11, 200), torch.randn(1, 200), torch.randn(11, 1)],
            [torch.randn(200, 7).t(), torch.randn(7, 200), torch.randn(200, 1).t()]]
'''

# the bias-like epilogue operand [B, 1, N] cannot be flattened with the [B * S, N] rows of
# the linear: its view is a copy, rebuilt per call; the batch of a [B, S, K] input folds
LINEAR_BROADCAST_EPILOGUE = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 40)

    def forward(self, x, g):
        return torch.relu(self.fc(x)) * g


def get_inputs():
    return [torch.randn(3, 5, 24), torch.randn(3, 1, 40)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 7, 24).transpose(0, 1), torch.randn(1, 2, 40)]]
'''

# log_softmax(x) is read outside its kernel only for its size: not stored
SIZE_ONLY = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        l = torch.log_softmax(x, dim=-1)
        return torch.tanh(x * 2.0 + 1.0) * l.size(0) + torch.tensor(0.25)


def get_inputs():
    return [torch.randn(16, 30)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 30)]]
'''


def _called(nodes: list[ast.AST]) -> set[str]:
    return {c.func.attr if isinstance(c.func, ast.Attribute) else getattr(c.func, "id", "")
            for n in nodes for c in ast.walk(n) if isinstance(c, ast.Call)}


def _launcher_calls(source: str) -> dict[str, tuple[set[str], set[str]]]:
    """Per launcher of the covered families: (every function it calls, those called
    outside ``if`` blocks)."""
    out: dict[str, tuple[set[str], set[str]]] = {}
    for fn in ast.parse(source).body:
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith(FAMILIES):
            out[fn.name] = (_called(fn.body), _called([s for s in fn.body if not isinstance(s, ast.If)]))
    return out


def test_launchers_avoid_slow_calls_on_the_hot_path(synth: OfflineSynthesizer) -> None:
    seen = 0
    for name in EXAMPLES:
        (prop,) = synth.propose(ProposalRequest(spec_source=example_source(name), spec_name=name, count=1))
        for launcher, (calls, unguarded) in _launcher_calls(prop.source).items():
            seen += 1
            assert not calls & SLOW_CALLS and not unguarded & VIEWS, (name, launcher, calls & SLOW_CALLS,
                                                                      unguarded & VIEWS)
    assert seen >= 40


def test_runtime_broadcast_patterns_and_copied_views_stay_correct(synth: OfflineSynthesizer) -> None:
    jobs = []
    for name, src in (("pw", POINTWISE_BROADCAST), ("lin", LINEAR_BROADCAST_EPILOGUE), ("size", SIZE_ONLY)):
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        assert not prop.fallback_nodes, (name, prop.fallback_nodes)
        jobs.append({"id": name, "spec_source": src, "candidate_source": prop.source, "seeds": [1]})
        if name == "size":
            assert "t_log_softmax.size(0)" not in prop.source and "x.size(0)" in prop.source
            assert "torch.tensor(" not in prop.source  # the 0-d constant is a literal in the kernel
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), [(r["id"], r["trials"], r["error"][-800:]) for r in results]
    assert all(len(r["trials"]) >= 2 for r in results)


def test_small_pointwise_producers_and_min_tuples_fuse(synth: OfflineSynthesizer) -> None:
    """A [1, N] pointwise producer is recomputed inside the [M, N] kernel; the pointwise
    input of torch.min(x, dim) fuses into the reduction (one launch each)."""
    for name in ("tanh_row_broadcast", "relu_min_values", "reverse_cumprod"):
        (prop,) = synth.propose(ProposalRequest(spec_source=example_source(name), spec_name=name, count=1))
        forward = prop.source.split("def forward", 1)[1]
        assert forward.count("launch_") == 1, (name, forward)
