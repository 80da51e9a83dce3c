"""Real-size specs on a machine without a GPU: before an embedded CPU session starts, the
spec is sized without allocating anything and, when the interpreter cannot judge it at its
size in time, replaced by a shrunk variant (``kernelevolve.spec_shrink``). The user is told
up front, and the summary, the JSON output and the report say which shapes were judged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kernelevolve.config import Settings
from kernelevolve.spec import make_spec
from kernelevolve.spec_shrink import FitProbe, FitResult, ShrinkBudget
from kernelevolve.v1 import common_pb2 as pb

SHAPES_FILE = "judged_shapes.json"


def judged_on_cpu(settings: Settings) -> bool:
    """Whether the embedded stack's evaluator will judge in the CPU interpreter."""
    from ke_evaluator.judge import resolve_hardware_kind

    return resolve_hardware_kind(settings.evaluator.hardware_kind) not in ("nvidia",)


def budget(settings: Settings) -> ShrinkBudget:
    """The interpreter's budget from the settings (evaluator.interpreter_max_*)."""
    ev = settings.evaluator
    return ShrinkBudget(input_bytes=int(ev.interpreter_max_input_bytes), flops=float(ev.interpreter_max_flops))


def fit_spec(spec: pb.OperatorSpec, probe: FitProbe, quiet: bool) -> tuple[pb.OperatorSpec, FitResult | None]:
    """The spec the CPU session should judge, and how it was fitted (None: as it is), from
    a probe started on ``spec``. Raises SpecShrinkError (a resource limit: exit 3) when it
    is too large and no shrink keeps its model."""
    fit = probe.result()
    if not fit.shrunk:
        return spec, None
    if not quiet:
        sys.stderr.write(f"kernelevolve: {spec.name} is too large for the CPU interpreter at its own size "
                         f"({fit.original_input_bytes / 2**30:.3g} GiB of inputs); correctness is "
                         f"{fit.describe()}. Timings at these shapes say nothing about the real size.\n")
    return make_spec(spec.name, fit.source), fit


def record(run_dir: Path, fit: FitResult) -> None:
    """``RUN_DIR/judged_shapes.json``, read by the session report."""
    (run_dir / SHAPES_FILE).write_text(json.dumps(fit.to_dict(), indent=2))


def recorded(run_dir: Path) -> dict[str, object] | None:
    """What ``record`` wrote for this run folder (a resumed session judges the shapes its
    first run chose: the session keeps the shrunk spec), or None."""
    path = run_dir / SHAPES_FILE
    try:
        doc = json.loads(path.read_text()) if path.is_file() else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None
