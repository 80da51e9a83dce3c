"""Seeds respect the transformations already tried from the root; candidates carry the
spec's top-level lines the class reaches, and no others."""

from __future__ import annotations

from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ProposalRequest, Transformation
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


def test_only_what_the_class_reaches_travels() -> None:
    src = (EXAMPLES / "relu_scale_add.py").read_text() + (
        "\nORIGINAL_INPUTS = get_inputs\nSCALE = FEATURES * 2\n"
        "WIDTH = 3 * 2\n\n\nclass Wide(nn.Module):\n    width = WIDTH\n")
    src = src.replace("super().__init__()", "super().__init__()\n        self.w = Wide.width", 1)
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=src, spec_name="relu_scale_add", count=1))
    assert "ORIGINAL_INPUTS" not in prop.source  # an alias of a spec function would name nothing there
    assert "SCALE" not in prop.source  # the class never reads it
    assert "WIDTH = 3 * 2" in prop.source and "class Wide(nn.Module)" in prop.source  # reached through Wide
    ns: dict[str, object] = {}
    exec(compile(prop.source, "candidate.py", "exec"), ns)
    assert ns["ModelNew"](7).w == 6  # type: ignore[operator]
