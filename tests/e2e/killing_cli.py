"""The real ``kernelevolve`` command, SIGKILLing itself at a named point of a session, so
that resume tests kill it at the same place every time:

    python -m tests.e2e.killing_cli POINT N optimize SPEC ...

POINT ``proposal``: inside the synthesizer's N-th proposal (earlier candidates exist).
POINT ``evaluation``: inside the N-th evaluation, after the judge answered and before the
report is stored (N-1 evaluations completed; the N-th is in flight).
POINT ``retime``: inside the N-th re-timing of a finalist.
POINT ``outbox``: after the search committed its N-th batch of requests to its state and
before publishing them (only a resume publishes them; no redelivery does).

The process dies as a SIGKILL kills it: no handler runs, nothing is flushed or closed.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def _die() -> None:
    sys.stderr.write("killing_cli: SIGKILL\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


class _Countdown:
    def __init__(self, n: int) -> None:
        self.left = n

    def tick(self) -> None:
        self.left -= 1
        if self.left == 0:
            _die()


def _install(point: str, n: int) -> None:
    count = _Countdown(n)
    if point == "proposal":
        import dataclasses

        from ke_synthesizer import app

        kind_of = app.synthesizer_kind  # the service builds its synthesizer from the registry's kind

        def killing_kind(settings: Any) -> Any:
            kind = kind_of(settings)

            def make(settings: Any, knowledge: Any, bus: Any = None) -> Any:
                real = kind.make(settings, knowledge, bus)
                propose = real.propose

                def killing_propose(request: Any) -> Any:
                    count.tick()
                    return propose(request)

                real.propose = killing_propose
                return real

            return dataclasses.replace(kind, make=make)

        app.synthesizer_kind = killing_kind  # type: ignore[assignment]
    elif point in ("evaluation", "retime"):
        from ke_evaluator.service import EvaluatorService

        evaluate = EvaluatorService.evaluate

        async def killing_evaluate(self: Any, spec: Any, source: str, cid: str, fresh_worker: bool = False,
                                   **options: Any) -> Any:
            verdict = await evaluate(self, spec, source, cid, fresh_worker, **options)
            if fresh_worker == (point == "retime"):
                count.tick()
            return verdict

        EvaluatorService.evaluate = killing_evaluate  # type: ignore[method-assign]
    elif point == "outbox":
        from ke_search.service import SearchService

        publish = SearchService._publish_outbox

        async def killing_publish(self: Any, session: Any, st: Any, nodes: Any, revision: int) -> None:
            if st.outbox_requests:
                count.tick()
            await publish(self, session, st, nodes, revision)

        SearchService._publish_outbox = killing_publish  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown kill point {point}")


def main() -> None:
    point, n, argv = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    _install(point, n)
    from ke_cli.main import main as cli_main

    cli_main(argv)


if __name__ == "__main__":
    main()
