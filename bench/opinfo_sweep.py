"""The long-tail sweep: every OpInfo entry of PyTorch's operator database, as a spec
(``opinfo_specs.py``), lowered by the offline synthesizer and, with ``--judge``, judged.

Per entry the seed candidate is one of

- ``triton``: every compute node lowered, no library call (``fallback_nodes`` empty);
- ``partly``: some Triton kernels, some library calls;
- ``library``: no Triton kernel (a library-call candidate: the judge rejects those);
- ``error``: the synthesizer raised (or took longer than ``--lower-timeout``);
- ``no_spec``: the entry counts but no spec could be written for it (a sweep failure).

``--judge`` runs the evaluator on the ``triton`` and ``partly`` candidates (in the
interpreter on a CPU; on a GPU with ``--device cuda``, at sizes scaled up as the other
GPU benchmarks do). A verdict the evaluator could not reach by itself (it rejects a spec
we checked runs, or crashes) is marked ``evaluator_failure``: those are the evaluator's
to fix, not the synthesizer's. A candidate judged anything but correct is also run against
the reference by the synthesizer's own checker (``own_check``: ``ok`` / ``mismatch``); a
Triton-only candidate whose values match but whose verdict is not ``correct`` points at
the evaluator (its audit of bool or index outputs, view-only specs) or at its policy,
and is listed as ``suspect_evaluator`` in the summary.

``--judge`` also validates every counted spec: one whose reference only views its inputs
(reshape, permute, split, ``.T``) ends there with the evaluator's ``NothingToComputeError``
("nothing to compute: the reference only reshapes its inputs"). Its verdict is
``nothing_to_compute``, its own class: neither a failure nor a Triton kernel (a kernel for
it could only copy).

The headline is over the *counted* entries (``opinfo_specs``: deterministic, a float32
sample, tensor outputs, outside ``linalg.*`` / ``fft.*``): the share lowered to Triton
only and, when judged, judged correct. ``fraction`` divides by every counted entry;
``fraction_with_compute`` by the counted entries with something to compute (all but the
``nothing_to_compute`` ones).

    python bench/opinfo_sweep.py [--judge] [--only REGEX] [--device cpu|cuda] [--out FILE] [--merge]

``--merge`` re-runs only the ``--only`` entries and writes their rows into the existing
result file, the summary recomputed over all its rows.

Writes bench/results/opinfo_sweep_<device>[_judged].json by default.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import re
import signal
import sys
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (puts the project's packages on sys.path)
import opinfo_specs  # noqa: E402

from ke_synthesizer.offline import OfflineSynthesizer  # noqa: E402
from ke_synthesizer.offline.library_candidate import WHOLE_FORWARD  # noqa: E402
from kernelevolve.ports.synthesis import ProposalRequest  # noqa: E402

log = logging.getLogger("opinfo_sweep")
RESULTS = common.ROOT / "bench" / "results"
TRITON, PARTLY, LIBRARY, ERROR, NO_SPEC = "triton", "partly", "library", "error", "no_spec"
# verdicts the evaluator reaches about a candidate; anything else about a spec that runs
# (a refused spec, a crash) is the evaluator's own failure
CANDIDATE_VERDICTS = frozenset({"correct", "incorrect", "rejected", "compile_error", "runtime_error", "timeout"})
# the evaluator's verdict about a spec whose reference only views its inputs (validation
# ends with NothingToComputeError): not a candidate's failure, not a kernel either
NOTHING_TO_COMPUTE = "nothing_to_compute"


@dataclass
class Row:
    entry: str
    opinfo_class: str
    group: str
    reason: str
    outputs: int
    lowering: str = ""
    fallback_nodes: list[str] = field(default_factory=list)
    kernels: int = 0
    error: str = ""
    lower_s: float = 0.0
    verdict: str = ""
    verdict_reason: str = ""
    evaluator_failure: bool = False
    own_check: str = ""  # a candidate not judged correct, run against the reference by our own checker

    @property
    def passes(self) -> bool:
        """Lowered to Triton only and, when judged, correct."""
        return self.lowering == TRITON and self.verdict in ("", "correct")

    @property
    def nothing_to_compute(self) -> bool:
        """The evaluator found the reference only views its inputs: there is no kernel to write."""
        return self.verdict == NOTHING_TO_COMPUTE


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def lower(synth: OfflineSynthesizer, spec: opinfo_specs.OpSpec, timeout_s: int) -> tuple[Row, str | None]:
    """The entry's row with its lowering class, and the seed candidate's source."""
    row = Row(spec.entry, spec.opinfo_class, spec.group, spec.reason, spec.outputs)
    if spec.source is None:
        row.lowering = NO_SPEC if spec.group != opinfo_specs.INELIGIBLE else ""
        return row, None
    t0 = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout_s)
    try:
        (seed,) = synth.propose(ProposalRequest(spec_source=spec.source, spec_name=_module_name(spec.entry), count=1))
    except _Timeout:
        row.lowering, row.error = ERROR, f"lowering took more than {timeout_s} s"
        return row, None
    except Exception as exc:  # noqa: BLE001 - a lowering failure is this entry's finding
        row.lowering, row.error = ERROR, f"{type(exc).__name__}: {exc}"[:400]
        return row, None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        row.lower_s = round(time.perf_counter() - t0, 2)
    row.kernels = seed.source.count("@triton.jit")
    row.fallback_nodes = list(seed.fallback_nodes)
    if seed.fallback_nodes == (WHOLE_FORWARD,) or row.kernels == 0 and seed.fallback_nodes:
        row.lowering = LIBRARY
    elif seed.fallback_nodes:
        row.lowering = PARTLY
    else:
        row.lowering = TRITON
    return row, seed.source


def _module_name(entry: str) -> str:
    return "opinfo_" + re.sub(r"\W", "_", entry)


def judge_row(judge: Any, row: Row, spec_source: str, candidate: str | None) -> None:
    """The evaluator's verdict on the entry: its spec validated, then (when there is a
    candidate) the candidate judged. A spec that only views its inputs ends at validation
    as ``nothing_to_compute``."""
    from kernelevolve.errors import KernelEvolveError

    try:
        check = judge.validate_spec(spec_source, _module_name(row.entry))
        if not check.ok:
            if check.nothing_to_compute:
                row.verdict, row.verdict_reason = NOTHING_TO_COMPUTE, str(check.reason)[:400]
                return
            row.verdict, row.verdict_reason, row.evaluator_failure = "spec_refused", str(check.reason)[:400], True
            return
        if candidate is None:
            return
        v = judge.evaluate(spec_source, candidate, candidate_id=_module_name(row.entry))
    except KernelEvolveError as exc:
        row.verdict, row.verdict_reason, row.evaluator_failure = "evaluator_error", str(exc)[:400], True
        return
    row.verdict, row.verdict_reason = v.status, v.reason[:400]
    row.evaluator_failure = v.status not in CANDIDATE_VERDICTS


def own_check(items: list[tuple[Row, str, str]]) -> None:
    """The synthesizer's own correctness check (one interpreter for all) of candidates the
    judge did not call correct."""
    from ke_synthesizer.offline.check import run_in_subprocess

    if not items:
        return
    results = run_in_subprocess([{"id": r.entry, "spec_source": s, "candidate_source": c, "seeds": [1, 2]}
                                 for r, s, c in items])
    by_id = {str(res["id"]): res for res in results}
    for row, _, _ in items:
        res = by_id.get(row.entry, {})
        row.own_check = "ok" if res.get("ok") else f"mismatch: {str(res.get('error', ''))[:200]}"


def summarize(rows: list[Row], judged: bool) -> dict[str, Any]:
    counted = [r for r in rows if r.group == opinfo_specs.COUNTED]
    passes = sum(r.passes for r in counted)
    views = sorted(r.entry for r in counted if r.nothing_to_compute)
    with_compute = len(counted) - len(views)
    out: dict[str, Any] = {
        "entries": len(rows),
        "groups": dict(Counter(r.group for r in rows)),
        "ineligible_reasons": dict(Counter(r.reason.split(":")[0] for r in rows
                                           if r.group == opinfo_specs.INELIGIBLE)),
        "counted": len(counted),
        "counted_lowering": dict(Counter(r.lowering for r in counted)),
        "linalg_fft_lowering": dict(Counter(r.lowering for r in rows if r.group == opinfo_specs.LINALG_FFT)),
        "counted_triton": sum(r.lowering == TRITON for r in counted),
        "judged": judged,
    }
    if judged:
        out["counted_verdicts"] = dict(Counter(r.verdict for r in counted if r.verdict))
        out["evaluator_failures"] = sorted(r.entry for r in counted if r.evaluator_failure)
        out["counted_triton_correct"] = passes
        out["counted_nothing_to_compute"] = len(views)
        out["nothing_to_compute"] = views
        out["suspect_evaluator"] = sorted(r.entry for r in counted if r.lowering == TRITON and
                                          r.verdict not in ("", "correct", NOTHING_TO_COMPUTE)
                                          and r.own_check == "ok")
    # over every counted entry, and over those with something to compute
    out["fraction"] = passes / len(counted) if counted else 0.0
    out["counted_with_compute"] = with_compute
    out["fraction_with_compute"] = passes / with_compute if with_compute else 0.0
    return out


def sweep(where: str | None = None, judge: bool = False, device: str = "cpu", lower_timeout_s: int = 120,
          progress: Any = None) -> dict[str, Any]:
    pattern = re.compile(where) if where else None
    specs = list(opinfo_specs.classify_all(where=(lambda e: bool(pattern.search(e))) if pattern else None))
    synth = OfflineSynthesizer()
    rows: list[Row] = []
    judged: list[tuple[Row, str, str]] = []
    for spec in specs:
        row, candidate = lower(synth, spec, lower_timeout_s)
        rows.append(row)
        if progress:
            progress(f"{row.entry:<48} {row.group:<10} {row.lowering:<8} {row.lower_s:6.1f}s {row.error[:80]}")
        if judge and spec.source is not None and row.group == opinfo_specs.COUNTED:
            # every counted spec is validated (a view-only one ends there, whatever its
            # lowering); the Triton and partly-Triton candidates are judged too
            judged.append((row, spec.source, candidate if row.lowering in (TRITON, PARTLY) else None))
    if judged:
        from ke_evaluator.judge import EvalOptions, Judge, TimingOptions

        opts = EvalOptions(device=device, correctness_trials=2,
                           timing=TimingOptions(max_trials=3 if device == "cpu" else 30, input_sets=1),
                           profile_library_time=False)
        with Judge(opts) as j:
            for row, source, candidate in judged:
                if device == "cuda":
                    source, _ = common.bench_source(source, device)
                judge_row(j, row, source, candidate)
                if progress:
                    progress(f"{row.entry:<48} judged {row.verdict}: {row.verdict_reason[:100]}")
        if device == "cpu":
            own_check([(r, s, c) for r, s, c in judged
                       if c is not None and r.verdict not in ("correct", NOTHING_TO_COMPUTE)])
    return {"summary": summarize(rows, bool(judge)), "rows": [asdict(r) for r in rows]}


def merge(old: dict[str, Any], new: dict[str, Any], judged: bool) -> dict[str, Any]:
    """``old`` with ``new``'s rows in place of its rows of the same entries, the summary
    recomputed over all rows (the host is the newer run's, the entries' order the old one's)."""
    fresh = {r["entry"]: r for r in new["rows"]}
    rows = [fresh.pop(r["entry"], r) for r in old["rows"]] + list(fresh.values())
    return {"host": new["host"], "summary": summarize([Row(**r) for r in rows], judged), "rows": rows}


def host() -> dict[str, Any]:
    return {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": platform.machine(), "cpu": platform.processor() or platform.machine(),
            "cpu_cores": os.cpu_count(), **common.fingerprint()}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--judge", action="store_true", help="judge the Triton candidates too (slower)")
    ap.add_argument("--only", default=None, help="regular expression over entry names")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--lower-timeout", type=int, default=120)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--merge", action="store_true",
                    help="write the --only entries' rows into the existing result file")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    warnings.filterwarnings("ignore")
    if args.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    result = {"host": host(), **sweep(args.only, args.judge, args.device, args.lower_timeout,
                                      progress=lambda line: print(line, flush=True))}
    out = args.out or RESULTS / f"opinfo_sweep_{args.device}{'_judged' if args.judge else ''}.json"
    if args.merge and out.exists():
        result = merge(json.loads(out.read_text()), result, bool(args.judge))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
