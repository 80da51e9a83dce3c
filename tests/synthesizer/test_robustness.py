"""Robustness: specs written the way people write models (nn.Sequential, in-place ops,
buffers, tuple outputs, casts, embeddings, slicing, reverse scans) always yield a
correct candidate; only an untraceable forward is refused."""

from __future__ import annotations

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest

SEQUENTIAL_INPLACE = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(32, 64), nn.ReLU(inplace=True), nn.Linear(64, 16), nn.Tanh())
        self.register_buffer("offset", torch.arange(16).float())

    def forward(self, x, y):
        b = x.size(0)
        h = self.seq(x.view(b, -1))
        h = h + self.offset / h.shape[1]
        z = h.relu_()
        z.mul_(2.0)
        m = (y > 0).float()
        out = z.sum(1, keepdim=True) * torch.mean(y * m, dim=1, keepdim=True)
        return out, z.max(dim=1).indices, torch.cat([z, h], dim=1)


def get_inputs():
    return [torch.randn(8, 4, 8), torch.randn(8, 5)]


def get_init_inputs():
    return []
'''

CASTS_EMBEDDING_REDUCTIONS = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.0)
        self.ln = nn.LayerNorm([4, 6])
        self.emb = nn.Embedding(10, 6)

    def forward(self, x, idx):
        e = self.emb(idx)
        x = self.ln(x + e)
        x = F.dropout(x, p=0.0, training=self.training)
        x = x.half().float()
        x = x.pow(x.abs() + 1)
        x = torch.where(x > 1, 1.0, x)
        x = x.masked_fill(x < -1, 0.0)
        r = x.norm(dim=-1) + x.amax(dim=(1, 2)).unsqueeze(-1)
        s = torch.max(x, dim=-1)[0] + torch.min(x, -1).values
        return r + s, x.std(dim=-1, correction=0), x.var(), x.logsumexp(dim=1)


def get_inputs():
    return [torch.randn(3, 4, 6), torch.randint(0, 10, (3, 4, 6))[..., 0]]


def get_init_inputs():
    return []
'''

SLICES_AND_SCANS = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n
        self.a = nn.Parameter(torch.randn(n))

    def forward(self, x, k: int = 2):
        y = torch.sigmoid(x) * self.a[None, :] + 1
        y = y[:, ::2] * 3
        y = y.sum(dim=0) ** 2
        z = torch.relu(x).prod(dim=-1, keepdim=False).unsqueeze(-1) * x
        w = torch.cumsum(z, dim=0)
        return y, torch.argmin(w), torch.flip(torch.cumsum(torch.flip(w, [1]), 1), [1])


def get_inputs():
    return [torch.randn(6, 10) * 0.3 + 1]


def get_init_inputs():
    return [10]
'''

DATA_DEPENDENT_BRANCH = '''\
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


def get_inputs():
    return [torch.randn(3, 4)]


def get_init_inputs():
    return []
'''

SPECS = {"sequential_inplace": SEQUENTIAL_INPLACE, "casts_embedding_reductions": CASTS_EMBEDDING_REDUCTIONS,
         "slices_and_scans": SLICES_AND_SCANS}


def test_seed_and_children_of_awkward_specs_are_correct(synth: OfflineSynthesizer) -> None:
    jobs = []
    for name, src in SPECS.items():
        (seed,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        parent = ParentInfo("seed", seed.source, seed.transformation, dict(seed.genome))
        children = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=3, parent=parent))
        for i, cand in enumerate([seed, *children]):
            jobs.append({"id": f"{name}/{i}", "spec_source": src, "candidate_source": cand.source, "seeds": [1]})
    results = run_in_subprocess(jobs)
    assert len(results) == len(jobs)
    assert all(r["ok"] for r in results), [(r["id"], r["error"][-500:]) for r in results if not r["ok"]]


def test_library_calls_are_listed_and_lowered_ops_are_not(synth: OfflineSynthesizer) -> None:
    (prop,) = synth.propose(ProposalRequest(spec_source=SEQUENTIAL_INPLACE, spec_name="seq", count=1))
    # in-place ops on a tensor that is read again keep their library semantics (the cat is
    # an index-family kernel now)
    assert "relu_" in prop.fallback_nodes and "cat" not in prop.fallback_nodes
    # nn.Sequential children by name; parameters straight from the module dicts (no __getattr__)
    assert "self._modules['seq']._modules['0']._parameters['weight']" in prop.source
    (prop,) = synth.propose(ProposalRequest(spec_source=SLICES_AND_SCANS, spec_name="scan", count=1))
    assert prop.fallback_nodes == ()
    assert "reverse=True" in prop.source  # flip -> cumsum -> flip became one reverse scan


def test_untraceable_forward_gets_the_library_call_candidate(synth: OfflineSynthesizer) -> None:
    """A branch on tensor values is no tracer's: the candidate is the reference forward,
    listed as one library call (test_capture_fallbacks.py judges it)."""
    (prop,) = synth.propose(ProposalRequest(spec_source=DATA_DEPENDENT_BRANCH, spec_name="branch", count=1))
    assert prop.fallback_nodes == ("forward",) and "Library-call candidate" in prop.source
