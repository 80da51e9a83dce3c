"""Learning benchmark: do distilled skills make later searches reach a good kernel sooner?

Sessions of the product's own services run in this process (``ke_cli.inprocess``) with
a knowledge service on a knowledge folder:

1. training: one session per spec of the training half, all on one folder, which
   collects the skills those sessions distil (only from CI-separated GPU timings);
2. evaluation: each spec of the other half twice, with a fresh empty folder and with a
   copy of the trained folder (a copy per spec, so evaluation sessions do not teach
   each other).

Per evaluation spec it reports the candidates each run needed to reach 95 % of the
better of the two final speedups (a run that never does counts budget + 1, flagged),
and overall the ratio of those counts (target: 2x fewer with skills).

    python bench/learning.py --out DIR [--budget 32] [--specs all|sample:K|a,b,...] [--strategy mcts]
                             [--device cuda|cpu] [--embedder minilm|hash]

Writes DIR/learning.json (date, device and versions, per-spec rows, summary) and prints a
short table. On CPU candidates run in Triton's interpreter, whose timings teach nothing:
no skill is distilled, and the result says so.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import re
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bench_source, example_names, example_path, fingerprint, write_json  # noqa: E402

TARGET = 0.95
_ID = re.compile(r"^r(\d+)-(\d+)$")


def evaluation_order(node_ids: list[str]) -> list[str]:
    """Candidate ids in the order they were asked for (``r<request>-<n>``)."""
    def key(nid: str) -> tuple[int, int, str]:
        m = _ID.match(nid)
        return (int(m.group(1)), int(m.group(2)), "") if m else (1 << 30, 0, nid)

    return sorted(node_ids, key=key)


def candidates_to_reach(speedups: list[float], target: float) -> int | None:
    """1-based count of candidates after which the best speedup so far reaches ``target``;
    None when it never does (or there is no positive target)."""
    if target <= 0:
        return None
    best = 0.0
    for i, s in enumerate(speedups, 1):
        best = max(best, s)
        if best >= target:
            return i
    return None


def compare(without: list[float], with_skills: list[float], budget: int) -> dict[str, Any]:
    """One evaluation spec's row: both runs measured against the same bar."""
    final = max(max(without, default=0.0), max(with_skills, default=0.0))
    target = TARGET * final
    n_without, n_with = candidates_to_reach(without, target), candidates_to_reach(with_skills, target)
    return {"final_speedup": final, "target_speedup": target,
            "without": {"speedups": without, "candidates_to_target": n_without or budget + 1,
                        "reached": n_without is not None},
            "with_skills": {"speedups": with_skills, "candidates_to_target": n_with or budget + 1,
                            "reached": n_with is not None}}


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    done = [r for r in rows if "without" in r]
    if not done:
        return {"specs": 0}
    a = sum(r["without"]["candidates_to_target"] for r in done)
    b = sum(r["with_skills"]["candidates_to_target"] for r in done)
    ratios = [r["without"]["candidates_to_target"] / r["with_skills"]["candidates_to_target"] for r in done]
    return {"specs": len(done), "candidates_without": a, "candidates_with_skills": b,
            "ratio_of_totals": a / b if b else math.nan,
            "geomean_ratio": math.exp(sum(math.log(x) for x in ratios) / len(ratios)),
            "target_ratio": 2.0}


def count_skills(folder: Path, embedder: str) -> int:
    from ke_knowledge.base import KnowledgeBase
    from kernelevolve.config import KnowledgeSettings
    from kernelevolve.vector import QdrantIndex, embedder_from_settings

    async def go() -> int:
        index = QdrantIndex(path=folder, shared=True)
        kb = KnowledgeBase(index, embedder_from_settings(KnowledgeSettings(embedder=embedder)), "kernelevolve",
                           seed_docs=[])
        await kb.start()  # no seed: only creates the collection if the folder has none
        try:
            return len(await kb.list_skills(include_retired=True))
        finally:
            await index.close()

    return asyncio.run(go())


def split(names: list[str]) -> tuple[list[str], list[str]]:
    """Alternate specs (sorted by name) between training and evaluation: both halves span
    the same op families as far as the names' order mixes them."""
    names = sorted(names)
    return names[0::2], names[1::2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "bench/results")))
    ap.add_argument("--budget", type=int, default=32)
    ap.add_argument("--specs", default="all", help="comma-separated example names, or all (split in halves)")
    ap.add_argument("--strategy", default="mcts", help="search strategy of every session (mcts uses skills)")
    ap.add_argument("--device", default="", help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--embedder", default="minilm", help="knowledge embedder: minilm or hash")
    ap.add_argument("--parallel", type=int, default=1, help="candidates in flight (and judge workers)")
    args = ap.parse_args()

    import torch

    from ke_cli.inprocess import run_session_sync
    from ke_evaluator.judge import EvalOptions, Judge, TimingOptions
    from ke_synthesizer.offline import OfflineSynthesizer
    from kernelevolve.config import Settings

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    hardware = "nvidia" if device == "cuda" else "cpu"
    names = example_names(args.specs)
    train, held_out = split(names)
    work = args.out / "learning-knowledge"
    shutil.rmtree(work, ignore_errors=True)
    trained = work / "trained"
    base = Settings()
    settings = replace(base, knowledge=replace(base.knowledge, embedder=args.embedder))
    opts = EvalOptions(device=device, correctness_trials=3 if device == "cuda" else 1,
                       timing=TimingOptions(max_trials=50 if device == "cuda" else 3, input_sets=2 if device == "cuda"
                                            else 1),
                       profile_library_time=False, parallel_workers=args.parallel)
    started = time.perf_counter()

    sources: dict[str, str] = {}  # per spec, sized once (a held-out spec runs twice)

    def session(name: str, folder: Path, synth: Any, judge: Any) -> list[float]:
        if name not in sources:
            sources[name] = bench_source(example_path(name).read_text(), device)[0]
        res = run_session_sync(sources[name], name, synthesizer=synth, judge=judge,
                               budget=args.budget, strategy=args.strategy, max_inflight=args.parallel,
                               hardware_kind=hardware, settings=settings, knowledge_path=str(folder))
        by_id = {c.node.node_id: c for c in res.candidates}
        return [by_id[n].node.fitness if by_id[n].verdict.status == "correct" else 0.0
                for n in evaluation_order(list(by_id))]

    training: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    skills = 0

    def result(*, complete: bool) -> dict[str, Any]:
        note = ("" if skills or not complete else
                "no skills were distilled during training (skills come only from CI-separated "
                "timings on real hardware; on CPU the Triton interpreter's timings teach nothing), so both "
                "evaluation runs searched without skills")
        return {"date": time.strftime("%Y-%m-%d"), "device": device, "fingerprint": fingerprint(),
                "budget": args.budget, "strategy": args.strategy, "embedder": args.embedder, "complete": complete,
                "train_specs": train, "eval_specs": held_out, "skills_distilled": skills, "training": training,
                "rows": rows, "summary": summarize(rows), "note": note, "seconds": time.perf_counter() - started}

    # Written after every session, so a run cut short by its time slot keeps what it measured.
    with Judge(opts) as judge:
        synth = OfflineSynthesizer()
        for name in train:
            try:
                speedups = session(name, trained, synth, judge)
                training.append({"spec": name, "candidates": len(speedups), "best": max(speedups, default=0.0)})
            except Exception as exc:  # noqa: BLE001 - one spec's failure is a row, not the end of the run
                training.append({"spec": name, "error": f"{type(exc).__name__}: {exc}"})
            print(f"train {name}: {training[-1]}", flush=True)
            write_json(args.out / "learning.json", result(complete=False))
        skills = count_skills(trained, args.embedder) if trained.exists() else 0
        for name in held_out:
            try:
                empty, copy = work / f"empty-{name}", work / f"trained-{name}"
                if trained.exists():
                    shutil.copytree(trained, copy)
                without = session(name, empty, synth, judge)
                with_skills = session(name, copy, synth, judge)
                rows.append({"spec": name, **compare(without, with_skills, args.budget)})
            except Exception as exc:  # noqa: BLE001
                rows.append({"spec": name, "error": f"{type(exc).__name__}: {exc}"})
            print(f"eval {name}: {rows[-1]}", flush=True)
            write_json(args.out / "learning.json", result(complete=False))
    final = result(complete=True)
    note = final["note"]
    write_json(args.out / "learning.json", final)
    s = final["summary"]
    print(f"{device}: {skills} skill(s) from {len(train)} training spec(s); "
          f"candidates to {TARGET:.0%} of final: without {s.get('candidates_without')}, "
          f"with skills {s.get('candidates_with_skills')} (ratio {s.get('ratio_of_totals', float('nan')):.2f}, "
          f"target 2.0)")
    if note:
        print(note)


if __name__ == "__main__":
    main()
