"""How much of each example's reference the seed candidate lowers to Triton.

For every spec in ``examples/ops/`` and ``examples/styles/`` (or the paths given), the
offline synthesizer captures the forward and proposes its default (seed) candidate. On
the captured graph the lowering works on, *compute nodes* are the calls that do
arithmetic: not placeholders, views and shape glue (graph.is_glue), nor pure data
movement (``cat``, ``stack``, ``clone``, ``contiguous``, casts) or tensor factories
(``zeros``, ``new_zeros``, ...). A compute node is *lowered* when it is not in the
proposal's ``fallback_nodes`` (those stay library calls). A spec no tracer captures
counts as one compute node left to the library (its whole forward).

    python bench/lowered_fraction.py [spec.py ...]   (from the repository root)

Writes bench/results/lowered_fraction.json (when run over the default example sets).
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "libs"), str(ROOT / "services" / "synthesizer")]

import torch.fx  # noqa: E402

from ke_synthesizer.offline import OfflineSynthesizer  # noqa: E402
from ke_synthesizer.offline.families.impl_policy import ImplPolicy  # noqa: E402
from ke_synthesizer.offline.graph import is_glue  # noqa: E402
from ke_synthesizer.offline.library_candidate import WHOLE_FORWARD  # noqa: E402
from kernelevolve.ports.synthesis import ProposalRequest  # noqa: E402

log = logging.getLogger("lowered_fraction")

DEFAULT_DIRS = (ROOT / "examples" / "ops", ROOT / "examples" / "styles")
RESULT = ROOT / "bench" / "results" / "lowered_fraction.json"
# calls that move or create data without arithmetic on it
DATA_MOVEMENT = frozenset({
    "cat", "concat", "concatenate", "stack", "hstack", "vstack", "clone", "contiguous", "copy_", "to", "float",
    "double", "half", "bfloat16", "type", "type_as", "zeros", "ones", "empty", "full", "new_zeros", "new_ones",
    "new_empty", "new_full", "zeros_like", "ones_like", "empty_like", "arange", "tensor", "repeat", "expand",
    "expand_as", "select", "index_select", "flip", "roll", "tril", "triu", "getattr", "identity", "dropout",
})


@dataclass
class SpecCount:
    spec: str
    tracer: str
    compute: int
    lowered: int
    library: list[str] = field(default_factory=list)  # compute nodes left to library calls
    data_movement_library: list[str] = field(default_factory=list)  # non-compute fallbacks

    @property
    def fraction(self) -> float:
        return self.lowered / self.compute if self.compute else 1.0


def _call_name(node: torch.fx.Node, gm: torch.fx.GraphModule) -> str:
    if node.op == "call_module":
        return type(gm.get_submodule(str(node.target))).__name__.lower()
    if node.op == "call_function":
        return str(getattr(node.target, "__name__", node.target)).split(".")[0]
    return str(node.target)


def is_compute(node: torch.fx.Node, gm: torch.fx.GraphModule) -> bool:
    if node.op not in ("call_function", "call_method", "call_module"):
        return False
    if is_glue(node, gm):
        return False
    name = _call_name(node, gm)
    return name not in DATA_MOVEMENT and name.rstrip("_") not in DATA_MOVEMENT


def count(synth: OfflineSynthesizer, path: Path) -> SpecCount:
    source = path.read_text()
    (seed,) = synth.propose(ProposalRequest(spec_source=source, spec_name=path.stem, count=1))
    spec = synth.captured(source, path.stem)
    if seed.fallback_nodes == (WHOLE_FORWARD,):
        return SpecCount(path.stem, spec.tracer, 1, 0, [WHOLE_FORWARD])
    gm = spec.gm
    fallback = set(seed.fallback_nodes)
    compute = [n for n in gm.graph.nodes if is_compute(n, gm)]
    names = {n.name for n in compute}
    library = [n.name for n in compute if n.name in fallback]
    return SpecCount(path.stem, spec.tracer, len(compute), len(compute) - len(library), library,
                     sorted(fallback - names))


def run(paths: list[Path]) -> dict[str, object]:
    # what the synthesizer can lower, not what the seed chooses: the seed policy's library
    # calls (a model's convolutions, impl_policy.py) are choices, so every heavy node starts in Triton
    synth = OfflineSynthesizer(policy=ImplPolicy(library_when_several=frozenset()))
    rows = [count(synth, p) for p in paths]
    compute = sum(r.compute for r in rows)
    lowered = sum(r.lowered for r in rows)
    return {
        "specs": len(rows),
        "compute_nodes": compute,
        "lowered_nodes": lowered,
        "lowered_fraction": lowered / compute if compute else 1.0,
        # every spec weighs the same here (an unrolled recurrent layer has hundreds of nodes)
        "mean_spec_fraction": sum(r.fraction for r in rows) / len(rows) if rows else 1.0,
        "library_call_specs": [r.spec for r in rows if r.tracer == "library"],
        "per_spec": [{**asdict(r), "fraction": round(r.fraction, 4)} for r in rows],
    }


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    paths = [Path(a) for a in argv] or sorted(p for d in DEFAULT_DIRS for p in d.glob("*.py"))
    result = run(paths)
    out = sys.stdout
    for row in result["per_spec"]:  # type: ignore[union-attr]
        missing = ", ".join(row["library"])
        out.write(f"{row['spec']:<36} {row['tracer']:<9} {row['lowered']:>4}/{row['compute']:<4} "
                  f"{row['fraction']:6.1%}  {missing}\n")
    out.write(f"total: {result['lowered_nodes']}/{result['compute_nodes']} compute nodes lowered = "
              f"{result['lowered_fraction']:.2%} over {result['specs']} specs "
              f"(mean per spec {result['mean_spec_fraction']:.2%})\n")
    if not argv:
        RESULT.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
