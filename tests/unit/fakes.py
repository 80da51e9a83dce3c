"""Test doubles for unit tests of service logic (never the only test of an adapter)."""

from __future__ import annotations

import ast
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelevolve.errors import InvalidSpecError
from kernelevolve.ports.synthesis import Proposal, ProposalRequest, Transformation
from kernelevolve.ports.verdict import SpecCheck, Timing, Verdict


def _check_spec(source: str) -> None:
    """What the doubles know of a spec: it parses and defines the three names."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InvalidSpecError(f"spec does not parse: line {exc.lineno}: {exc.msg}") from exc
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    missing = sorted({"Model", "get_inputs", "get_init_inputs"} - names)
    if missing:
        raise InvalidSpecError(f"spec lacks {', '.join(missing)}")


_MODULE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, *xs):\n        return xs[0]\n"


@dataclass
class FakeSynthesizer:
    """Proposes ``block`` variants; a source containing 'BAD' is judged incorrect by FakeJudge."""

    name: str = "fake"
    max_children: int = 3
    bad_seeds: int = 0
    max_block: int = 1 << 30
    calls: list[ProposalRequest] = field(default_factory=list)

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        _check_spec(request.spec_source)
        self.calls.append(request)
        tried = {t.params.get("block") for t in request.tried}
        base = int(request.parent.genome.get("block", "64")) if request.parent else 64
        out = []
        for i in range(self.max_children):
            block = str(base * 2 ** (i + 1))
            if block in tried or int(block) > self.max_block:
                continue
            bad = request.parent is None and len(self.calls) <= self.bad_seeds
            # Block and call are code, not only comments: every proposal differs from every
            # other (de-duplication compares code alone; tests of it use another double).
            src = f"# block={block}\n# {'BAD' if bad else 'OK'}\nBLOCK = {block}\nCALL = {len(self.calls)}\n{_MODULE}"
            out.append(Proposal(source=src, transformation=Transformation("block_size", {"block": block}),
                                genome={"block": block}))
            if len(out) == request.count:
                break
        return out


@dataclass
class FakeJudge:
    """Speedup grows with the block size written in the source; 'BAD' sources are incorrect."""

    evaluated: list[str] = field(default_factory=list)
    spec_ok: bool = True

    def validate_spec(self, spec_source: str, spec_name: str) -> SpecCheck:
        try:
            _check_spec(spec_source)
        except InvalidSpecError as exc:
            return SpecCheck(ok=False, reason=str(exc))
        return SpecCheck(ok=self.spec_ok, reason="" if self.spec_ok else "reference raised ValueError")

    def evaluate_many(self, jobs: Iterable[Sequence[Any]]) -> list[Verdict]:
        return [self.evaluate(*job) for job in jobs]

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, compile_baseline: bool = False, tier: str | None = None) -> Verdict:
        # A screening evaluator (the default, ``evaluator.screen``) names the tier; the
        # verdict says it, as the real judge's does (its numbers are the same here).
        self.evaluated.append(candidate_id)
        if "BAD" in candidate_source:
            return Verdict(status="incorrect", reason="max abs error 1.0 > atol", candidate_id=candidate_id)
        if "block=" not in candidate_source:
            return Verdict(status="compile_error", reason="candidate module raised on import",
                           candidate_id=candidate_id)
        block = int(candidate_source.split("block=")[1].split()[0])
        speed = block / 128.0
        v = Verdict(status="correct", reason="ok", candidate_id=candidate_id,
                    candidate_timing=Timing(median_ms=1.0 / speed), baseline_timing=Timing(median_ms=1.0),
                    speedup=speed)
        if compile_baseline:  # torch.compile is taken to halve the reference's time
            v.compile_baseline_timing = Timing(median_ms=0.5)
            v.speedup_vs_compile = speed / 2
            v.evidence["compile_baseline"] = "torch.compile (double)"
        v.tier = tier or "full"  # type: ignore[assignment]
        return v


class CountsInFlight:
    """Mixin for a judge double: each evaluation is held ``hold_s`` and counted while in
    flight; ``most`` is the most evaluations that ran at once."""

    hold_s = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = self.most = 0
        self.lock = threading.Lock()

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, **kwargs: Any) -> Verdict:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.hold_s)
        with self.lock:
            self.now -= 1
        return super().evaluate(spec_source, candidate_source, candidate_id, fresh_worker,  # type: ignore[misc]
                                **kwargs)


class JudgeValidator:
    """The gateway's spec validator answered in-process by a judge (no evaluator service):
    for tests that build single services by hand."""

    def __init__(self, judge: Any) -> None:
        self.judge = judge

    async def validate(self, spec: Any, timeout_s: float | None = None) -> Any:
        from ke_gateway.validator import Validation

        c = self.judge.validate_spec(spec.source, spec.name)
        return Validation(c.ok, c.reason)
