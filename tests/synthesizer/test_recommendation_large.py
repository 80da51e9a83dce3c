"""The recommendation-model examples of ``examples/large`` (hashed embedding bag, DLRM
interaction, jagged segment sum, bucketized features): lowered at their real sizes
(captured on fake tensors) with nothing left to the library, and, shrunk to the
interpreter's budget by their own size constants, correct against their references."""

from __future__ import annotations

from pathlib import Path

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest
from kernelevolve.spec_shrink import fit_for_interpreter

LARGE = Path(__file__).resolve().parents[2] / "examples" / "large"
NAMES = ["embedding_bag_hashed", "dlrm_interaction_large", "jagged_segment_sum_large", "bucketized_features_large"]
# the kernel each must launch (the family that carries it)
KERNELS = {"embedding_bag_hashed": "index_embedding_bag", "dlrm_interaction_large": "index_index_select",
           "jagged_segment_sum_large": "index_segment_reduce", "bucketized_features_large": "index_embedding_bag"}


@pytest.mark.parametrize("name", NAMES)
def test_real_size_fully_triton(name: str, synth: OfflineSynthesizer) -> None:
    src = (LARGE / f"{name}.py").read_text()
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    assert prop.fallback_nodes == ()
    assert f"def {KERNELS[name]}" in prop.source


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_shrunk_correct(name: str, synth: OfflineSynthesizer) -> None:
    fit = fit_for_interpreter((LARGE / f"{name}.py").read_text())
    assert fit.method == "constants" and fit.changed
    (prop,) = synth.propose(ProposalRequest(spec_source=fit.source, spec_name=name, count=1))
    assert prop.fallback_nodes == ()
    (result,) = run_in_subprocess([{"id": name, "spec_source": fit.source, "candidate_source": prop.source,
                                    "seeds": [1]}])
    assert result["ok"], result["error"] or [t for t in result["trials"] if not t["ok"]]
