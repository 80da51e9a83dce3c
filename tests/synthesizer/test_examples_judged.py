"""Every example spec gets a candidate from the offline synthesizer that the evaluator's
full protocol judges ``correct`` (interpreter on CPU): the CI form of "every reference
yields a correct candidate"."""

from __future__ import annotations

from pathlib import Path

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ProposalRequest
from tests.conftest import EXAMPLES

SPECS = sorted(EXAMPLES.glob("*.py"))



@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_seed_candidate_is_judged_correct(path: Path, judge: Judge) -> None:
    source = path.read_text()
    (proposal,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=source, spec_name=path.stem, count=1))
    verdict = judge.evaluate(source, proposal.source, path.stem)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    assert verdict.evidence["kernel_launches"], "the candidate launched none of its own kernels"


def test_there_are_at_least_60_examples() -> None:
    assert len(SPECS) >= 60
