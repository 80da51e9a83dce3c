"""The live progress bar: the best-so-far line follows the events, --quiet prints nothing."""

from __future__ import annotations

import io

from ke_cli.console import Progress
from ke_cli.live import LiveProgress, make_progress
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev


def _evaluated(cid: str, speedup: float, status: int = pb.EVALUATION_STATUS_CORRECT) -> ev.Envelope:
    env = ev.Envelope()
    env.evaluation_completed.result.candidate_id = cid
    env.evaluation_completed.result.status = status
    env.evaluation_completed.result.speedup = speedup
    return env


def test_live_bar_tracks_best_so_far() -> None:
    out = io.StringIO()
    p = LiveProgress(budget=3, out=out)
    p.on_event(_evaluated("r1-1", 1.5))
    p.on_event(_evaluated("r1-2", 0.0, pb.EVALUATION_STATUS_INCORRECT))
    p.on_event(_evaluated("r2-1", 2.25))
    task = p._bar.tasks[0]
    assert task.completed == 3 and task.total == 3 and task.fields["best"] == "best 2.25x (r2-1)"
    retimed = ev.Envelope()
    retimed.candidate_retimed.result.candidate_id = "r2-1"
    retimed.candidate_retimed.result.status = pb.EVALUATION_STATUS_CORRECT
    retimed.candidate_retimed.result.speedup = 1.2
    p.on_event(retimed)  # the finalist's second timing is slower: r1-1 is best again
    assert p._bar.tasks[0].fields["best"] == "best 1.5x (r1-1)"
    p.close()
    text = out.getvalue()
    assert "r1-2" in text and "incorrect" in text and "best 2.25x (r2-1)" in text


def test_a_screened_speedup_is_never_shown_as_best_until_its_full_recheck() -> None:
    for p in (LiveProgress(budget=2, out=io.StringIO()), Progress(budget=2, out=io.StringIO())):
        p.on_event(_evaluated("r1-1", 1.5))
        lucky = _evaluated("r1-2", 9.0)
        lucky.evaluation_completed.result.tier = "screen"
        p.on_event(lucky)
        assert (p.best, p.best_id) == (1.5, "r1-1")
        rechecked = ev.Envelope()
        rechecked.candidate_retimed.result.candidate_id = "r1-2"
        rechecked.candidate_retimed.result.status = pb.EVALUATION_STATUS_CORRECT
        rechecked.candidate_retimed.result.speedup = 2.0
        p.on_event(rechecked)
        assert (p.best, p.best_id) == (2.0, "r1-2")
        p.close()
        assert "9.00x (screened)" in p.out.getvalue()  # type: ignore[attr-defined]


def test_quiet_and_piped_output_use_plain_lines() -> None:
    quiet = make_progress(3, quiet=True)
    assert type(quiet) is Progress and quiet.quiet
    assert type(make_progress(3)) is Progress  # pytest's stdout is not a terminal
