"""Seeds respect the transformations already tried from the root; module-level aliases of
spec functions are not copied into candidates (they would name nothing there)."""

from __future__ import annotations

from ke_synthesizer.api import ProposalRequest, Transformation
from ke_synthesizer.offline import OfflineSynthesizer
from tests.conftest import EXAMPLES


def test_tried_seeds_are_not_offered_again() -> None:
    src = (EXAMPLES / "softmax_rows.py").read_text()
    synth = OfflineSynthesizer()
    first = synth.propose(ProposalRequest(spec_source=src, spec_name="softmax_rows", count=2))
    tried = tuple(p.transformation for p in first)
    again = synth.propose(ProposalRequest(spec_source=src, spec_name="softmax_rows", count=2, tried=tried))
    assert again and not {(t.name, tuple(sorted(t.params.items()))) for t in tried} & {
        (p.transformation.name, tuple(sorted(p.transformation.params.items()))) for p in again}
    assert Transformation("seed", {"variant": "default"}) in tried


def test_function_aliases_stay_out_of_candidates() -> None:
    src = (EXAMPLES / "relu_scale_add.py").read_text() + "\nORIGINAL_INPUTS = get_inputs\nSCALE = FEATURES * 2\n"
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=src, spec_name="relu_scale_add", count=1))
    assert "ORIGINAL_INPUTS" not in prop.source
    assert "SCALE = FEATURES * 2" in prop.source  # data constants still travel
    compile(prop.source, "candidate.py", "exec")
