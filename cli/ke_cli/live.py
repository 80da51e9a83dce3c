"""Live terminal progress for long work: a ``rich`` progress bar with the best-so-far line,
the per-candidate lines scrolling above it. Only on a terminal; piped output keeps the plain
lines of ``ke_cli.console.Progress``, and ``--quiet`` / ``--json`` silence both."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ke_cli.console import Progress
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev


@dataclass
class LiveProgress(Progress):
    _bar: Any = field(default=None, repr=False)
    _console: Any = field(default=None, repr=False)
    _task: Any = field(default=None, repr=False)
    _now: dict[str, float] = field(default_factory=dict, repr=False)  # latest speedup per candidate

    def __post_init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self._console = Console(file=self.out)
        self._bar = RichProgress(TextColumn("[bold]evaluated"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[best]}"), console=self._console)
        self._task = self._bar.add_task("evaluated", total=self.budget, best="no correct candidate yet")
        self._bar.start()

    def line(self, text: str) -> None:
        if not self.quiet:
            self._console.print(text, markup=False, highlight=False, soft_wrap=True)

    def on_event(self, env: ev.Envelope) -> None:
        super().on_event(env)
        if env.WhichOneof("payload") == "candidate_retimed":  # the re-timing replaces the first timing
            r = env.candidate_retimed.result
            self._now[r.candidate_id] = r.speedup if r.status == pb.EVALUATION_STATUS_CORRECT else 0.0
            if r.candidate_id == self.best_id or self._now[r.candidate_id] > self.best:
                cid = max(self._now, key=lambda c: self._now[c])
                self.best, self.best_id = (self._now[cid], cid) if self._now[cid] > 0 else (0.0, "")
        elif env.WhichOneof("payload") == "evaluation_completed" and env.evaluation_completed.result.tier != "screen":
            r = env.evaluation_completed.result  # a screened speedup waits for its full re-check
            self._now[r.candidate_id] = r.speedup if r.status == pb.EVALUATION_STATUS_CORRECT else 0.0
        best = f"best {self.best:.3g}x ({self.best_id})" if self.best_id else "no correct candidate yet"
        self._bar.update(self._task, completed=min(self.evaluated, self.budget), best=best)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def make_progress(budget: int, quiet: bool = False) -> Progress:
    if not quiet and sys.stdout.isatty():
        return LiveProgress(budget=budget)
    return Progress(budget=budget, quiet=quiet)


@contextmanager
def working(message: str, quiet: bool = False) -> Iterator[None]:
    """A ``rich`` spinner with ``message`` while one long step runs (terminal only)."""
    if quiet or not sys.stdout.isatty():
        yield
        return
    from rich.console import Console

    with Console().status(message):
        yield
