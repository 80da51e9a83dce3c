"""Training-mode dropout: the reference, the candidate and the float64 re-run of the
reference draw the same mask (every forward call starts from one generator state; the
float64 run replays eager's draws, which seeding alone does not give on a GPU).

Unseeded, the float64 run drew another mask than eager: eager's own error against it was
as large as the outputs, the float64 error budget accepted almost anything, and a correct
candidate (drawing a third mask) failed at a few elements by chance."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ke_evaluator.judge import Judge
from ke_evaluator.worker import loading, random_replay, reference_cache

_SHAPES = [(3, 5, 7), (8, 33, 129), (13, 64, 17)]  # (batch, features, classes): odd sizes


class _Net(nn.Module):
    """Linear, BatchNorm in training mode (batch statistics), ReLU6, Dropout, Linear."""

    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, features), nn.BatchNorm1d(features), nn.ReLU6())
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(features, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def _kept(model: nn.Module) -> list[torch.Tensor]:
    """Records the dropout's mask (elements it kept) on every call of ``model``."""
    masks: list[torch.Tensor] = []
    drop = model.head[0]
    drop.register_forward_hook(lambda mod, inp, out: masks.append((out != 0) | (inp[0] == 0)))
    return masks


@pytest.mark.parametrize("replay", [False, True])
@pytest.mark.parametrize("shape", _SHAPES)
def test_float64_reference_draws_the_eager_mask(shape: tuple[int, int, int], replay: bool) -> None:
    batch, features, classes = shape
    cpu = torch.device("cpu")
    model = loading.build_model(_Net, [features, classes], 11, cpu)
    masks = _kept(model)
    x = torch.randn(batch, features, generator=torch.Generator().manual_seed(5)) * 3
    fseed = loading.forward_seed(11)
    with torch.no_grad():
        loading.seed_forward(fseed)
        ref = model(x.clone())
    torch.rand(1000)  # whatever ran in between: the float64 run seeds itself
    notes: list[str] = []
    ref64 = reference_cache.float64_reference(model, [x], cpu, seed=fseed, draws_on=cpu if replay else None,
                                              notes=notes)
    assert not notes
    assert len(masks) == (3 if replay else 2)  # eager, (eager recorded,) float64
    assert all(torch.equal(masks[0], m) for m in masks[1:])
    assert 0 < int(masks[0].sum()) < masks[0].numel() or masks[0].numel() < 20  # it did drop something
    err = (ref.double() - ref64).abs()
    assert float(err.max()) <= 1e-5 * max(1.0, float(ref64.abs().max())), float(err.max())


class _RandGate(nn.Module):
    """Draws in its own dtype: from one generator state float32 and float64 draw other
    numbers (as a GPU's dropout keeps other elements in float64 than in float32)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.dropout(x, 0.25, True) * (torch.rand_like(x) > 0.3) + torch.randn_like(x) * 0.01


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (17, 129), (2, 3, 33)])
def test_float64_reference_replays_draws_that_seeding_does_not_repeat(shape: tuple[int, ...]) -> None:
    cpu = torch.device("cpu")
    model = _RandGate()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)) + 2
    fseed = loading.forward_seed(3)
    with torch.no_grad():
        loading.seed_forward(fseed)
        ref = model(x.clone()).double()
    seeded = reference_cache.float64_reference(model, [x], cpu, seed=fseed)
    replayed = reference_cache.float64_reference(model, [x], cpu, seed=fseed, draws_on=cpu)
    assert float((ref - replayed).abs().max()) < 1e-6
    if x.numel() > 4:  # seeded alike, float64 draws other numbers
        assert float((ref - seeded).abs().max()) > 1e-3


def test_replay_that_does_not_line_up_is_refused() -> None:
    x = torch.randn(4, 6)
    _, draws = random_replay.record(lambda: torch.rand_like(x))
    with pytest.raises(random_replay.ReplayMismatch):
        random_replay.replay(lambda: torch.randn_like(x), draws)  # another op
    with pytest.raises(random_replay.ReplayMismatch):
        random_replay.replay(lambda: torch.rand(5, 6), draws)  # another shape
    with pytest.raises(random_replay.ReplayMismatch):
        random_replay.replay(lambda: (torch.rand_like(x), torch.rand_like(x)), draws)  # more draws
    with pytest.raises(random_replay.ReplayMismatch):
        random_replay.replay(lambda: x + 1, draws)  # fewer


def test_float64_reference_falls_back_to_its_own_draws_with_a_note() -> None:
    class Branchy(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            # a draw that depends on the dtype: the replay cannot line up
            return x + (torch.rand_like(x) if x.dtype == torch.float32 else torch.randn_like(x))

    notes: list[str] = []
    cpu = torch.device("cpu")
    out = reference_cache.float64_reference(Branchy(), [torch.ones(3)], cpu, seed=1, draws_on=cpu, notes=notes)
    assert out.dtype == torch.float64 and out.shape == (3,)
    assert notes and "could not replay" in notes[0]


def test_forward_seed_depends_on_the_seed_and_hides_it() -> None:
    assert loading.forward_seed(7) == loading.forward_seed(7)
    assert loading.forward_seed(7) != loading.forward_seed(8)
    assert loading.forward_seed(7) not in (7, 7 + 1000)
    assert 0 <= loading.forward_seed(2**40) < 2**63


_SPEC = '''
import torch
from torch import nn

B, F, C = {batch}, {features}, {classes}


class Model(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, features), nn.BatchNorm1d(features), nn.ReLU6())
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(features, classes))

    def forward(self, x):
        return self.head(self.body(x))


def get_inputs():
    return [torch.randn(B, F) * 3]


def get_init_inputs():
    return [F, C]
'''

# ReLU6 in a Triton kernel; the dropout stays a library call, in the reference's order.
_CANDIDATE = '''
import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch import nn


@triton.jit
def _relu6(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    tl.store(y_ptr + offs, tl.minimum(tl.maximum(x, 0.0), 6.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, features), nn.BatchNorm1d(features), nn.ReLU6())
        self.head = nn.Sequential(nn.Dropout(0.2), nn.Linear(features, classes))

    def forward(self, x):
        h = self.body[1](self.body[0](x)).contiguous()
        y = torch.empty_like(h)
        n = h.numel()
        _relu6[(triton.cdiv(n, 1024),)](h, y, n, BLOCK=1024)
        {extra_draw}return self.head[1](F.dropout(y, 0.2, self.training))
'''


@pytest.mark.parametrize("shape", _SHAPES[:2])
def test_training_dropout_candidate_is_judged_against_the_same_mask(judge: Judge, shape: tuple[int, int, int]
                                                                    ) -> None:
    batch, features, classes = shape
    spec = _SPEC.format(batch=batch, features=features, classes=classes)
    v = judge.evaluate(spec, _CANDIDATE.format(extra_draw=""))
    assert v.status == "correct", v.reason
    corr = v.correctness
    assert corr is not None and corr.reference_error is not None
    # eager against float64 with the same mask: rounding only (it was ~the output's size)
    assert corr.reference_error < 1e-4, corr.bound
    assert corr.outliers == 0, corr.bound
    assert "reference_draws_random" in v.evidence
    assert v.evidence["deterministic"] == "bitwise"


def test_training_dropout_candidate_with_another_mask_is_incorrect(judge: Judge) -> None:
    batch, features, classes = _SHAPES[1]
    spec = _SPEC.format(batch=batch, features=features, classes=classes)
    # one draw before the dropout: another mask than the reference's
    v = judge.evaluate(spec, _CANDIDATE.format(extra_draw="torch.rand(1)\n        "))
    assert v.status == "incorrect", v.reason
    assert "mismatch" in v.reason


def test_validation_does_not_call_seeded_dropout_nondeterministic(judge: Judge) -> None:
    batch, features, classes = _SHAPES[0]
    check = judge.validate_spec(_SPEC.format(batch=batch, features=features, classes=classes), "dropout_net")
    assert check.ok, check.reason
    assert not any("nondeterministic" in w for w in check.warnings), check.warnings
    assert any("draws random numbers" in w for w in check.warnings), check.warnings
