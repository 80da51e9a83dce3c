"""The real ``kernelevolve`` command with its synthesizer replaced, for end-to-end tests
that need a behaviour the shipped synthesizer does not produce on demand:

    python -m tests.e2e.injected_cli MODE optimize SPEC ...

MODE ``synth-fails``: every request fails permanently, as an unusable spec makes it fail.
MODE ``stall``: the one candidate never returns from ``forward``, so its evaluation never
answers (within the run timeout the test sets) and the session stalls.
MODE ``bad-init``: every candidate fails the same way while being constructed.
"""

from __future__ import annotations

import sys

from ke_synthesizer import registry
from kernelevolve.errors import InvalidSpecError
from kernelevolve.ports.synthesis import Proposal, ProposalRequest, Transformation

HANGING = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        while True:
            pass
'''


BAD_INIT = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, *args):
        super(Model, self).__init__()

    def forward(self, *inputs):
        return inputs[0]
'''


class BadInitSynthesizer:
    name = "bad-init"

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        if request.parent is not None:
            return []
        # Variants differ in code, not only in a comment: twins would be de-duplicated.
        return [Proposal(source=BAD_INIT + f"VARIANT = {i}\n", transformation=Transformation("seed", {"i": str(i)}))
                for i in range(request.count)]


class FailingSynthesizer:
    name = "failing"

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        raise InvalidSpecError("Model has no __init__ to mirror")


class StallingSynthesizer:
    name = "stalling"

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        if request.parent is not None:
            return []
        return [Proposal(source=HANGING, transformation=Transformation("hang", {}))]


def main() -> None:
    mode, argv = sys.argv[1], sys.argv[2:]
    synth = {"synth-fails": FailingSynthesizer, "stall": StallingSynthesizer, "bad-init": BadInitSynthesizer}[mode]()
    # plugged in through the registry, as any synthesizer kind is: the default kind's entry
    # builds this one (the command line stays the shipped one's)
    registry.SYNTHESIZERS["offline"] = registry.SynthesizerKind(make=lambda settings, knowledge, bus: synth)
    from ke_cli.main import main as cli_main

    cli_main(argv)


if __name__ == "__main__":
    main()
