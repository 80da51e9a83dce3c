"""Noise-aware fitness: a speedup with the interval its timings allow, and comparisons
that only call one node better than another when the intervals are separated.

The evaluator reports each timing's 95 % confidence interval of the median. The
speedup's interval is the baseline's interval over the candidate's (the slowest
baseline over the fastest candidate is the high end). A child that beats its parent
only inside that noise is not promoted: strategies see it with its parent's fitness,
so they keep expanding the parent (the shallower of equals)."""

from __future__ import annotations

from collections.abc import Sequence

from kernelevolve.v1 import common_pb2 as pb


def _correct(n: pb.Node) -> bool:
    return n.evaluated and n.status == pb.EVALUATION_STATUS_CORRECT and not n.duplicate_of


def fitness_of(result: pb.EvaluationResult, baseline: str) -> tuple[float, float, float, str]:
    """(fitness, low, high, note) of a result: the speedup over the chosen baseline, 0 when
    not correct. ``compile`` falls back to eager when the evaluator did not time
    torch.compile (CPU, not enabled, or it failed); the note says so."""
    if result.status != pb.EVALUATION_STATUS_CORRECT:
        return 0.0, 0.0, 0.0, ""
    eager, note = result.speedup, ""
    fitness = eager
    if baseline == "compile":
        if result.speedup_vs_compile > 0:
            fitness = result.speedup_vs_compile
        else:
            why = result.compile_baseline_note or "the evaluator did not time torch.compile"
            note = f"compile baseline unavailable ({why}): fitness is the speedup over eager"
    b, c = result.baseline_timing, result.candidate_timing
    if eager > 0 and b.ci_low_ms > 0 and b.ci_high_ms > 0 and c.ci_low_ms > 0 and c.ci_high_ms > 0:
        scale = fitness / eager  # the compile interval is not reported: keep the eager one's width
        low = min(fitness, b.ci_low_ms / c.ci_high_ms * scale)
        high = max(fitness, b.ci_high_ms / c.ci_low_ms * scale)
        return fitness, low, high, note
    return fitness, fitness, fitness, note


def better(a: pb.Node, b: pb.Node) -> bool:
    """``a`` is better than ``b`` beyond the timing noise: their intervals do not overlap."""
    a_low = a.fitness_low or a.fitness
    b_high = b.fitness_high or b.fitness
    return a_low > b_high


def promoted(nodes: Sequence[pb.Node]) -> list[pb.Node]:
    """The nodes as strategies should see them: a correct child's fitness is capped at its
    parent's unless it is CI-separated above the parent (copies; the tree is untouched)."""
    by_id = {n.node_id: n for n in nodes}
    out: dict[str, pb.Node] = {}

    def effective(n: pb.Node) -> pb.Node:
        stack = [n]
        while stack:  # parents before children, iteratively (deep chains)
            cur = stack[-1]
            parent = by_id.get(cur.parent_id)
            if parent is not None and parent.node_id not in out and parent.node_id != cur.node_id:
                stack.append(parent)
                continue
            stack.pop()
            if cur.node_id in out:
                continue
            copy = pb.Node()
            copy.CopyFrom(cur)
            eff_parent = out.get(cur.parent_id)
            if (eff_parent is not None and _correct(cur) and _correct(eff_parent)
                    and copy.fitness > eff_parent.fitness and not better(cur, by_id[cur.parent_id])):
                copy.fitness = eff_parent.fitness
            out[cur.node_id] = copy
        return out[n.node_id]

    return [effective(n) for n in nodes]


def since_improvement(nodes: Sequence[pb.Node], evaluated_order: Sequence[str]) -> int:
    """Evaluations since the session's incumbent last improved beyond the noise (all of
    them while no candidate is correct)."""
    by_id = {n.node_id: n for n in nodes}
    incumbent: pb.Node | None = None
    last = -1
    for i, nid in enumerate(evaluated_order):
        n = by_id.get(nid)
        if n is None or not _correct(n):
            continue
        if incumbent is None or better(n, incumbent):
            incumbent, last = n, i
    return len(evaluated_order) - 1 - last
