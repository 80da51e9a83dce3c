"""Kernel families are plug-ins: the registry is the only place that lists them, a
synthesizer built without one lowers its ops as library calls, and a family plugged in
from outside the package is recognised, tuned and launched like the built-in ones."""

from __future__ import annotations

from typing import Any

import torch.fx

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.emit.lower_pointwise import PointwiseEmitter
from ke_synthesizer.offline.families import FAMILIES
from ke_synthesizer.offline.families.family import Emitted, KernelFamily, LaunchArgs, Recognised
from ke_synthesizer.offline.families.pool.kernel_pool import PoolFamily
from ke_synthesizer.offline.frontend.ops import NormOp
from ke_synthesizer.offline.plan.plan import Group, Plan, PlanContext
from ke_synthesizer.offline.space import GROUP_KNOBS
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import example_source

CUMSUM_SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.cumsum(x * 2.0, dim=1) + 1.0


def get_inputs():
    return [torch.randn(8, 33)]


def get_init_inputs():
    return []
'''


class LibraryScanFamily(KernelFamily):
    """A stand-in family: claims cumsum nodes before the row family does and launches
    them through a host function (no Triton kernel)."""

    kind = "libscan"
    knobs = {"flavour": ("plain", "spicy")}

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        if op is None or op.op != "cumsum":
            return None
        return op, {"dim": op.args["dim"]}

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        name = f"launch_libscan_{group.key}"
        flavour = self.value(genome, group, "flavour")
        launcher = f"def {name}(x):\n    # flavour: {flavour}\n    return torch.cumsum(x, dim={group.info['dim']})\n"
        return "", launcher, name

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        op = group.ops[group.members[0]]
        args: list[Any] = [op.args["input"]]
        return args, [group.members[0]]


def test_the_registry_lists_each_kind_once_with_its_knobs() -> None:
    kinds = [f.kind for f in FAMILIES]
    assert len(kinds) == len(set(kinds))
    assert set(GROUP_KNOBS) == set(kinds)
    assert all(f.knobs and all(choices for choices in f.knobs.values()) for f in FAMILIES)


def test_without_the_pool_family_pools_are_library_calls() -> None:
    src = example_source("maxpool2d_relu")
    request = ProposalRequest(spec_source=src, spec_name="maxpool2d_relu", count=1)
    (with_pool,) = OfflineSynthesizer().propose(request)
    (without,) = OfflineSynthesizer(families=[f for f in FAMILIES if not isinstance(f, PoolFamily)]).propose(request)
    assert "launch_pool_" in with_pool.source and not with_pool.fallback_nodes
    assert "launch_pool_" not in without.source and len(without.fallback_nodes) == 1


def test_a_plugged_in_family_is_recognised_tuned_and_launched() -> None:
    synth = OfflineSynthesizer(families=(LibraryScanFamily(), *FAMILIES))
    (seed,) = synth.propose(ProposalRequest(spec_source=CUMSUM_SPEC, spec_name="scan", count=1))
    assert "launch_libscan_" in seed.source and "# flavour: plain" in seed.source
    assert any(k.endswith(".flavour") for k in seed.genome)
    space = dict(synth.space(CUMSUM_SPEC, "scan"))
    (key,) = [k for k in space if k.endswith(".flavour")]
    assert space[key] == ["plain", "spicy"]
    source, full, _ = synth.lower(synth._capture(CUMSUM_SPEC, "scan"), {key: "spicy"})
    assert "# flavour: spicy" in source and full[key] == "spicy"
    (result,) = run_in_subprocess([{"id": "scan", "spec_source": CUMSUM_SPEC, "candidate_source": seed.source,
                                    "seeds": [1]}])
    assert result["ok"], result
