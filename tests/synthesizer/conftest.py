"""Shared fixtures: example specs and one batched correctness run of their seed
candidates (one child interpreter for all examples keeps the suite fast on 2 cores)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ke_evaluator.judge import EvalOptions, Judge, TimingOptions
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ParentInfo, Proposal, ProposalRequest

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples" / "ops"
EXAMPLES = sorted(p.stem for p in EXAMPLES_DIR.glob("*.py"))
# specs written in the many ways people write PyTorch (super(Model, self), no __init__,
# helper classes and functions, aliases, integer and boolean inputs, ...)
STYLES_DIR = EXAMPLES_DIR.parent / "styles"
STYLES = sorted(p.stem for p in STYLES_DIR.glob("*.py"))


def one_input_spec(what: str, init: list[str], body: str, inputs: str, extra: str | None = None,
                   tolerance: str | None = None) -> str:
    """A spec of one input ``x``: ``init`` lines in ``__init__``, ``return body`` as the
    forward, ``inputs`` (and ``extra`` as its one extra input set), optional tolerance."""
    lines = [f'"""A {what} case."""', "import torch", "import torch.nn as nn", "import torch.nn.functional as F",
             "", ""]
    if tolerance:
        lines += [f"KE_TOLERANCE = {tolerance}", "", ""]
    lines += ["class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    lines += [f"        {line}" for line in init]
    lines += ["", "    def forward(self, x):", f"        return {body}", "", "",
              "def get_inputs():", f"    return [{inputs}]", "", "", "def get_init_inputs():", "    return []", ""]
    if extra:
        lines += ["", "def get_extra_inputs():", f"    return [[{extra}]]", ""]
    return "\n".join(lines)


def triton_seed(spec_source: str, name: str) -> Proposal:
    """The offline synthesizer's seed for the spec, asserted to leave nothing to the library."""
    (seed,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=spec_source, spec_name=name, count=1))
    assert not seed.fallback_nodes, f"left to the library: {seed.fallback_nodes}"
    assert "@triton.jit" in seed.source
    return seed


def candidate_and_reference(spec_source: str, candidate_source: str, seed: int = 0) -> tuple[Any, Any]:
    """The candidate's ``ModelNew`` and the spec's ``Model`` on the spec's inputs (drawn
    after seeding), in this process (the interpreter on CPU): (got, want)."""
    import types

    import torch

    spec, cand = types.ModuleType("spec"), types.ModuleType("cand")
    exec(compile(spec_source, "spec", "exec"), spec.__dict__)  # noqa: S102 - a test's own spec
    exec(compile(candidate_source, "cand", "exec"), cand.__dict__)  # noqa: S102 - the candidate under test
    torch.manual_seed(seed)
    inputs = spec.get_inputs()
    with torch.no_grad():
        return cand.ModelNew()(*inputs), spec.Model()(*inputs)


def example_source(name: str) -> str:
    return (EXAMPLES_DIR / f"{name}.py").read_text()


def seed_children(synth: OfflineSynthesizer, name: str, count: int = 100) -> list[Proposal]:
    """Up to ``count`` children of example ``name``'s seed: one transformation each."""
    src = example_source(name)
    (seed,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    parent = ParentInfo("seed", seed.source, seed.transformation, dict(seed.genome))
    return list(synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=count, parent=parent)))


def lower_example(synth: OfflineSynthesizer, name: str, genome: dict[str, str],
                  src: str | None = None) -> tuple[str, dict[str, str], tuple[str, ...]]:
    """(source, completed genome, fallback nodes) for ``genome`` on example ``name`` (or on
    the spec source ``src``)."""
    return synth.lower(synth._capture(src or example_source(name), name), genome)


@pytest.fixture(scope="session")
def synth() -> OfflineSynthesizer:
    return OfflineSynthesizer()


def batched_seed_results(synth: OfflineSynthesizer, folder: Path,
                         names: list[str]) -> dict[str, dict[str, Any]]:
    """Seed proposal of every spec ``names`` of ``folder``, checked in one interpreter
    subprocess; a spec whose proposal raises gets an error result of its own."""
    jobs = []
    proposals: dict[str, Proposal | None] = {}
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        src = (folder / f"{name}.py").read_text()
        try:
            (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        except Exception as exc:  # noqa: BLE001 - reported per spec by the tests
            proposals[name] = None
            results[name] = {"id": name, "ok": False, "trials": [],
                             "error": f"propose raised {type(exc).__name__}: {exc}"}
            continue
        proposals[name] = prop
        jobs.append({"id": name, "spec_source": src, "candidate_source": prop.source, "seeds": [1, 2]})
    if jobs:
        results.update({r["id"]: r for r in run_in_subprocess(jobs)})
    for name, prop in proposals.items():
        results[name]["proposal"] = prop
    return results


@pytest.fixture(scope="session")
def seed_results(synth: OfflineSynthesizer) -> dict[str, dict[str, Any]]:
    """Seed proposal of every example, checked in one interpreter subprocess."""
    return batched_seed_results(synth, EXAMPLES_DIR, EXAMPLES)


@pytest.fixture(scope="session")
def style_seed_results(synth: OfflineSynthesizer) -> dict[str, dict[str, Any]]:
    """Seed proposal of every examples/styles spec, checked in one interpreter subprocess."""
    return batched_seed_results(synth, STYLES_DIR, STYLES)


@pytest.fixture(scope="module")
def judge() -> Iterator[Judge]:
    """The evaluator's full correctness and integrity protocol on CPU (interpreter); timing
    says nothing there, so it is kept short."""
    opts = EvalOptions(device="cpu", correctness_trials=2, timing=TimingOptions(max_trials=3, input_sets=1),
                       profile_library_time=False)
    with Judge(opts) as j:
        yield j
