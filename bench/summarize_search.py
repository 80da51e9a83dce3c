"""Summary of `search_bench.py` result files: per-spec rows and the aggregates RESULTS.md reports.

    python bench/summarize_search.py results/search_a.json [results/search_b.json ...]
        [--markdown] [--compare results/search_earlier.json]

Rows without ``evaluated`` (specs skipped or not reached in that file) are left out; a spec
found in several files keeps its last row. Speedups are device-time ratios; per-call ratios
(max of device and host enqueue time) are printed beside them. Specs are grouped as ``ops``
or ``styles`` by where their example lives (``examples/ops``, ``examples/styles``).
With ``--compare`` the ops specs present in both runs are set side by side (the runs may
differ in device and budget; each ratio is still taken within its own run). Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
GROUPS = ("styles", "ops")
# The bandwidth target RESULTS.md uses: share of the measured 1 GiB device-to-device copy.
BW_TARGET = 0.85


@dataclass
class Row:
    spec: str
    group: str
    source: str
    raw: dict[str, Any]

    def num(self, key: str) -> float | None:
        value = self.raw.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
        return None

    @property
    def evaluated(self) -> int:
        return int(self.raw.get("evaluated") or 0)

    @property
    def correct(self) -> int:
        return int((self.raw.get("statuses") or {}).get("correct", 0))

    @property
    def has_best(self) -> bool:
        return self.correct > 0 and self.num("speedup_vs_eager") is not None


@dataclass
class Run:
    rows: dict[str, Row] = field(default_factory=dict)
    meta: list[dict[str, Any]] = field(default_factory=list)


def group_of(spec: str) -> str:
    for group in GROUPS:
        if (EXAMPLES / group / f"{spec}.py").exists():
            return group
    return "other"


def load(paths: Iterable[str]) -> Run:
    run = Run()
    for path in paths:
        data = json.loads(Path(path).read_text())
        run.meta.append({k: v for k, v in data.items() if k != "rows"} | {"file": Path(path).name})
        for raw in data.get("rows", []):
            if "evaluated" not in raw:
                continue
            spec = str(raw["spec"])
            if spec in run.rows:
                print(
                    f"note: {spec} in {run.rows[spec].source} and {Path(path).name}; keeping the latter",
                    file=sys.stderr,
                )
            run.rows[spec] = Row(spec, group_of(spec), Path(path).name, raw)
    return run


def geomean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


def values(rows: Iterable[Row], key: str) -> list[float]:
    return [v for v in (r.num(key) for r in rows) if v is not None]


def aggregate(rows: Sequence[Row]) -> dict[str, str]:
    """The aggregate measures of one group of rows, formatted."""
    best = [r for r in rows if r.has_best]
    eager = values(best, "speedup_vs_eager")
    comp = values(best, "speedup_vs_compile")
    call_eager = values(best, "per_call_speedup_vs_eager")
    call_comp = values(best, "per_call_speedup_vs_compile")
    bw = values(best, "fraction_of_copy_bw")
    retimed = sum(1 for r in best if r.num("judge_retimed_speedup") is not None)
    stopped = sum(1 for r in rows if r.raw.get("search_stopped"))
    judged = sum(r.evaluated for r in rows)
    correct = sum(r.correct for r in rows)
    n = len(rows)
    return {
        "specs searched": str(n),
        "judged candidates (correct)": f"{judged} ({correct})",
        "searches stopped by their time limit": str(stopped),
        "specs with a correct best": f"{len(best)} / {n}",
        "faster than eager, device time / per call": (
            f"{sum(v > 1.0 for v in eager)} / {n}; {sum(v > 1.0 for v in call_eager)} / {n}"
        ),
        "faster than torch.compile, device time / per call": (
            f"{sum(v > 1.0 for v in comp)} / {n}; {sum(v > 1.0 for v in call_comp)} / {n}"
        ),
        "geomean vs eager, device time / per call": f"{fmt_x(geomean(eager))} / {fmt_x(geomean(call_eager))}",
        "geomean vs torch.compile, device time / per call": f"{fmt_x(geomean(comp))} / {fmt_x(geomean(call_comp))}",
        "share of 1 GiB copy bandwidth, median / max": (
            f"{fmt_pct(statistics.median(bw) if bw else None)} / {fmt_pct(max(bw) if bw else None)}"
        ),
        f"kernels at >= {100 * BW_TARGET:.0f} % of copy bandwidth": str(sum(v >= BW_TARGET for v in bw)),
        "best with a finalist re-timing recorded": f"{retimed} / {len(best)}",
    }


def table(header: Sequence[str], body: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(str(c)) for c in col) for col in zip(header, *body, strict=False)]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in [header, *body]]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


def spec_rows(run: Run) -> list[list[str]]:
    body = []
    for r in sorted(run.rows.values(), key=lambda r: (r.group, r.spec)):
        body.append(
            [
                r.spec,
                r.group,
                str(r.evaluated),
                f"{r.correct} / {r.evaluated}",
                fmt_x(r.num("speedup_vs_eager")),
                fmt_x(r.num("speedup_vs_compile")),
                fmt_x(r.num("per_call_speedup_vs_eager")),
                fmt_x(r.num("per_call_speedup_vs_compile")),
                fmt_pct(r.num("fraction_of_copy_bw")),
                "yes" if r.num("judge_retimed_speedup") is not None else "no",
            ]
        )
    return body


def compare(run: Run, ref: Run, markdown: bool) -> str:
    common = sorted(
        s for s, r in run.rows.items() if r.group == "ops" and r.has_best and s in ref.rows and ref.rows[s].has_best
    )
    body = []
    for s in common:
        a, b = run.rows[s], ref.rows[s]
        body.append(
            [
                s,
                fmt_x(a.num("speedup_vs_eager")),
                fmt_x(b.num("speedup_vs_eager")),
                fmt_x(a.num("speedup_vs_compile")),
                fmt_x(b.num("speedup_vs_compile")),
            ]
        )
    this, earlier = [run.rows[s] for s in common], [ref.rows[s] for s in common]
    summary = [
        [
            "geomean vs eager, device time",
            fmt_x(geomean(values(this, "speedup_vs_eager"))),
            fmt_x(geomean(values(earlier, "speedup_vs_eager"))),
        ],
        [
            "geomean vs torch.compile, device time",
            fmt_x(geomean(values(this, "speedup_vs_compile"))),
            fmt_x(geomean(values(earlier, "speedup_vs_compile"))),
        ],
        [
            "geomean vs eager, per call",
            fmt_x(geomean(values(this, "per_call_speedup_vs_eager"))),
            fmt_x(geomean(values(earlier, "per_call_speedup_vs_eager"))),
        ],
        [
            "geomean vs torch.compile, per call",
            fmt_x(geomean(values(this, "per_call_speedup_vs_compile"))),
            fmt_x(geomean(values(earlier, "per_call_speedup_vs_compile"))),
        ],
        [
            "faster than eager, device time",
            f"{sum(v > 1 for v in values(this, 'speedup_vs_eager'))}",
            f"{sum(v > 1 for v in values(earlier, 'speedup_vs_eager'))}",
        ],
        [
            "faster than torch.compile, device time",
            f"{sum(v > 1 for v in values(this, 'speedup_vs_compile'))}",
            f"{sum(v > 1 for v in values(earlier, 'speedup_vs_compile'))}",
        ],
    ]
    return "\n\n".join(
        [
            f"Ops specs in both runs: {len(common)}",
            table(
                ["spec", "vs eager, this", "vs eager, earlier", "vs compile, this", "vs compile, earlier"],
                body,
                markdown,
            ),
            table(["over the common specs", "this run", "earlier run"], summary, markdown),
        ]
    )


def describe(meta: Sequence[dict[str, Any]]) -> str:
    lines = []
    for m in meta:
        fp = m.get("fingerprint") or {}
        bw = m.get("copy_bandwidth_gbps")
        bw_text = (
            f"{min(bw):.0f}-{max(bw):.0f}"
            if isinstance(bw, list) and bw
            else f"{bw:.0f}"
            if isinstance(bw, (int, float))
            else "-"
        )
        lines.append(
            f"{m['file']}: {m.get('date')} {fp.get('gpu')} torch {fp.get('torch')} triton "
            f"{fp.get('triton')} cuda {fp.get('cuda')} budget {m.get('budget')} "
            f"workers {m.get('parallel_workers')} copy {bw_text} GB/s"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="search_bench.py result JSON files of one run")
    ap.add_argument("--markdown", action="store_true", help="print markdown tables")
    ap.add_argument("--compare", nargs="+", metavar="FILE", help="result files of an earlier run")
    ap.add_argument("--worst", type=int, default=5, help="how many of the lowest rows to name")
    ap.add_argument("--no-specs", action="store_true", help="leave out the per-spec table")
    args = ap.parse_args(argv)

    run = load(args.files)
    print(describe(run.meta), end="\n\n")
    if not args.no_specs:
        header = [
            "spec",
            "group",
            "evaluated",
            "correct",
            "vs eager",
            "vs compile",
            "per call vs eager",
            "per call vs compile",
            "of copy BW",
            "finalist re-timed",
        ]
        print(table(header, spec_rows(run), args.markdown), end="\n\n")

    groups = {g: [r for r in run.rows.values() if r.group == g] for g in (*GROUPS, "other")}
    columns = {g: rows for g, rows in groups.items() if rows}
    columns["all"] = list(run.rows.values())
    aggs = {g: aggregate(rows) for g, rows in columns.items()}
    measures = list(aggs["all"])
    body = [[m, *(aggs[g][m] for g in columns)] for m in measures]
    print(table(["measure", *columns], body, args.markdown), end="\n\n")

    best = [r for r in run.rows.values() if r.has_best]
    for key, label in (("speedup_vs_eager", "eager"), ("speedup_vs_compile", "torch.compile")):
        low = sorted(best, key=lambda r: r.num(key) or 0.0)[: args.worst]
        print(f"lowest vs {label} (device time): " + ", ".join(f"{r.spec} {fmt_x(r.num(key))}" for r in low))
    print()

    if args.compare:
        ref = load(args.compare)
        print(describe(ref.meta), end="\n\n")
        print(compare(run, ref, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
