"""The evaluator service judges up to ``parallel_workers`` candidates at once (typed config)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from ke_evaluator.service import EvaluatorService
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.bus.subjects import Subjects
from kernelevolve.config import load_settings
from kernelevolve.ports.verdict import Verdict
from kernelevolve.spec import make_spec
from kernelevolve.store import MemoryStore
from tests.unit.fakes import FakeJudge

SPEC = make_spec("toy", "import torch\nclass Model(torch.nn.Module):\n    pass\n"
                        "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n")


class CountingJudge(FakeJudge):
    """Blocks a little per call and records how many calls overlapped."""

    def __init__(self) -> None:
        super().__init__()
        self._guard = threading.Lock()
        self.running = 0
        self.most = 0

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, tier: str | None = None) -> Verdict:
        with self._guard:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.1)
        with self._guard:
            self.running -= 1
        return super().evaluate(spec_source, candidate_source, candidate_id, fresh_worker)


@pytest.mark.parametrize("parallel", [1, 2, 3])
async def test_service_judges_up_to_parallel_candidates_at_once(parallel: int) -> None:
    judge = CountingJudge()
    service = EvaluatorService(MemoryBus(), MemoryStore(), Subjects("ke"), judge, "cpu", parallel=parallel)
    verdicts = await asyncio.gather(*(service.evaluate(SPEC, f"block=128 #{i}", f"c{i}") for i in range(6)))
    assert [v.candidate_id for v in verdicts] == [f"c{i}" for i in range(6)]
    assert judge.most == parallel
    assert service.parallel == parallel


def test_parallel_workers_is_typed_config() -> None:
    assert load_settings(env={}).evaluator.parallel_workers == 1
    assert load_settings(env={"KE_EVALUATOR_PARALLEL_WORKERS": "3"}).evaluator.parallel_workers == 3
