"""Readable terminal output for the CLI (progress lines and the final summary)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TextIO

from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev

CPU_NOTE = ("Timings were taken on the CPU with Triton's interpreter: they check correctness and "
            "say nothing about GPU speed. Run on a CUDA GPU for real timings.")


def status_name(status: int) -> str:
    return pb.EvaluationStatus.Name(status).removeprefix("EVALUATION_STATUS_").lower()


@dataclass
class Progress:
    budget: int
    out: TextIO = field(default_factory=lambda: sys.stdout)
    quiet: bool = False
    generated: int = 0
    evaluated: int = 0
    best: float = 0.0
    best_id: str = ""
    interpreted: bool = False
    first: dict[str, float] = field(default_factory=dict)

    def line(self, text: str) -> None:
        if not self.quiet:
            self.out.write(text + "\n")
            self.out.flush()

    def close(self) -> None:
        """End any live display (see ke_cli.live); nothing to do for plain lines."""

    def on_event(self, env: ev.Envelope) -> None:
        kind = env.WhichOneof("payload")
        if kind == "candidate_generated":
            self.generated += 1
            c = env.candidate_generated.candidate
            params = ", ".join(f"{k}={v}" for k, v in sorted(c.transformation.params.items()))
            parent = c.parent_id or "reference"
            self.line(f"  generated  {c.candidate_id:<10} from {parent:<10} {c.transformation.name}({params})"
                      f"   [{self.generated} generated]")
        elif kind == "evaluation_completed":
            self.evaluated += 1
            r = env.evaluation_completed.result
            self.interpreted = self.interpreted or r.interpreted
            status = status_name(r.status)
            self.first[r.candidate_id] = r.speedup
            # A screened verdict is provisional: never the best until its full re-check.
            screened = r.tier == "screen"
            if r.status == pb.EVALUATION_STATUS_CORRECT and r.speedup > self.best and not screened:
                self.best, self.best_id = r.speedup, r.candidate_id
            detail = (f"{r.speedup:.2f}x" + (" (screened)" if screened else "")
                      if r.status == pb.EVALUATION_STATUS_CORRECT else r.reason[:80])
            best = f"best {self.best:.2f}x ({self.best_id})" if self.best_id else "no correct candidate yet"
            self.line(f"  evaluated  {r.candidate_id:<10} {status:<13} {detail:<40} "
                      f"[{self.evaluated}/{self.budget}; {best}]")
        elif kind == "retime_requested":
            cid = env.retime_requested.candidate.candidate_id
            self.line(f"  re-timing  {cid:<10} full protocol, in a fresh worker")
        elif kind == "candidate_retimed":
            r = env.candidate_retimed.result
            was = self.first.get(r.candidate_id, 0.0)
            if r.status == pb.EVALUATION_STATUS_CORRECT and r.speedup > self.best:
                self.best, self.best_id = r.speedup, r.candidate_id
            now = f"{r.speedup:.2f}x" if r.status == pb.EVALUATION_STATUS_CORRECT else status_name(r.status)
            self.line(f"  re-timed   {r.candidate_id:<10} {now} (first {was:.2f}x)")
        elif kind == "skill_distilled":
            self.line(f"  skill      {env.skill_distilled.skill.title}")
        elif kind == "session_failed":
            self.line(f"  failed     {env.session_failed.reason}")
