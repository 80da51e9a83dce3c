"""OfflineSynthesizer: the compiler-style CandidateSynthesizer (no model calls).

Seed proposals lower the reference with default choices (then single-knob variants);
child proposals apply one not-yet-tried transformation to the parent's genome.
Deterministic: any sampling uses an RNG seeded from a digest of the request.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
from collections import OrderedDict
from collections.abc import Sequence

import torch

from kernelevolve.errors import InvalidSpecError, LoweringError, SynthesisError
from kernelevolve.ports.knowledge import KnowledgeReader
from kernelevolve.ports.synthesis import Proposal, ProposalRequest, Transformation

from .codegen import assemble
from .emit import cuda_graph
from .emit.precision import CONTRACTS, DEFAULT_CONTRACT
from .families import FAMILIES
from .families.family import KernelFamily
from .families.impl_policy import ImplPolicy
from .frontend.capture import capture
from .frontend.captured import CapturedSpec
from .frontend.fx_meta import FLOAT_DTYPES, dtype_of
from .graph import build_plan
from .library_candidate import WHOLE_FORWARD, library_candidate_source
from .plan.plan import GroupFailure, Plan
from .plan.plan_outputs import group_outputs
from .skills import skill_gains
from .space import Knob, apply_edge, complete_genome, knobs, skill_weighted
from .tune import describe, launch_knobs, sweep, taken, transformation

log = logging.getLogger(__name__)
# integer-valued results a row kernel stores itself (its fp32 accumulator converted on the
# store into the int64 output): indices, and count_nonzero's count (exact in fp32 up to 2^24
# elements a row)
INDEX_VALUED = frozenset({"argmax", "argmin", "count_nonzero"})

class OfflineSynthesizer:
    """Lowers a spec's captured graph to Triton; see README.md in this package."""

    name = "offline"

    def __init__(self, cache_size: int = 32, families: Sequence[KernelFamily] = FAMILIES,
                 knowledge: KnowledgeReader | None = None, policy: ImplPolicy | None = None) -> None:
        # Skills order child transformations (ke_synthesizer.offline.skills); None: unordered.
        self.knowledge = knowledge
        # the kernel families it lowers to, in recognition order (families.FAMILIES);
        # tests plug in fewer or extra ones
        self._families = tuple(families)
        self._by_kind: dict[str, KernelFamily] = {f.kind: f for f in self._families}
        self._cache: OrderedDict[tuple[str, str, str], CapturedSpec] = OrderedDict()
        self._cache_size = cache_size
        # the seed's impl choice per conv / matmul (heuristic + measured cache: impl_policy.py)
        self.policy = policy or ImplPolicy()
        self._lock = threading.Lock()

    # ---- front end -------------------------------------------------------------
    def _capture(self, source: str, name: str, genome: dict[str, str] | None = None) -> CapturedSpec:
        """The captured graph for a genome: the ``attention`` knob picks whether plain-op
        attention chains are rewritten into one flash-attention call."""
        attention = (genome or {}).get("attention", "flash")
        key = (hashlib.sha256(source.encode()).hexdigest(), name, attention)
        with self._lock:  # the service may call propose from several threads
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        spec = capture(source, name, attention=attention)
        with self._lock:
            self._cache[key] = spec
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return spec

    def captured(self, source: str, name: str) -> CapturedSpec:
        """The captured graph the default genome lowers (for tools that account for it)."""
        return self._capture(source, name)

    # ---- lowering --------------------------------------------------------------
    def _plan(self, spec: CapturedSpec, genome: dict[str, str], forced: set[str], device: str = "cpu",
              precision: str = DEFAULT_CONTRACT) -> Plan:
        spec = self._capture(spec.source, spec.name, genome)  # graph variant of the genome
        for _ in range(len(spec.gm.graph.nodes) + 1):
            plan = build_plan(spec, genome, forced_fallback=forced, families=self._families, policy=self.policy,
                              device=device, precision=precision)
            offered = {k.key for k in knobs(plan, genome, self._by_kind) if k.name == "impl"}
            planned = {n.name for n in plan.fallback}
            refused = {k: "triton" for k, node in plan.impl_knobs.items() if node in planned and k not in offered}
            if refused:
                # a library choice (the genome's or the seed policy's) this plan does not offer:
                # no Triton kernel of the candidate's own would be left next to it
                genome = {**genome, **refused}
                continue
            bad = {m.name for g in plan.groups if not self._by_kind[g.kind].tuple_outputs
                   and not self._by_kind[g.kind].any_dtype_outputs for m in group_outputs(plan, g)
                   if dtype_of(m) not in FLOAT_DTYPES + (torch.bool,) and g.ops[m].op not in INDEX_VALUED}
            bad |= plan.replan
            if not bad:
                return plan
            forced = forced | bad
        return plan

    def lower(self, spec: CapturedSpec, genome: dict[str, str],
              device: str = "cpu", precision: str = DEFAULT_CONTRACT) -> tuple[str, dict[str, str], tuple[str, ...]]:
        """Generate (source, completed genome, fallback node names) for a genome; ``device``
        is the hardware kind the seed policy looks measurements up for, ``precision`` the
        request's precision contract (``emit.precision``: which ``tl.dot`` precisions each
        group may take)."""
        if spec.library_reason:
            return library_candidate_source(spec, spec.library_reason), {}, (WHOLE_FORWARD,)
        try:
            return self._lower(spec, genome, device, precision)
        except SynthesisError as exc:
            if spec.tracer == "symbolic":
                raise
            # a specialised graph with an op codegen cannot spell: still a correct candidate
            log.warning("%s: specialised graph not emitted (%s); library-call candidate", spec.name, exc)
            return library_candidate_source(spec, str(exc)), {}, (WHOLE_FORWARD,)

    def _lower(self, spec: CapturedSpec, genome: dict[str, str],
               device: str, precision: str) -> tuple[str, dict[str, str], tuple[str, ...]]:
        forced: set[str] = set()
        for _ in range(len(spec.gm.graph.nodes) + 1):
            plan = self._plan(spec, genome, forced, device, precision)
            full = complete_genome(plan, genome, self._by_kind)
            moved = _expand_moves(knobs(plan, full, self._by_kind), genome)
            if moved is not None:
                # a genome written by hand naming a family-wide move: set its members, plan again
                genome = moved
                continue
            try:
                src = assemble(plan, full, self._by_kind, _title(spec))
            except GroupFailure as exc:
                split = _split_epilogue(plan, exc.group, full)
                if split is not None:
                    # a conv / matmul / pool whose fused epilogue failed: the epilogue becomes a
                    # kernel of its own first, so one bad op does not send the heavy op and
                    # every op after it to the library (where no Triton kernel may be left)
                    log.info("group %s of %s not lowered (%s); epilogue %s split off", exc.group, spec.name,
                             exc, split)
                    genome = {**genome, split: "separate"}
                    continue
                log.info("group %s of %s not lowered (%s); using library calls", exc.group, spec.name, exc)
                forced |= exc.members
                continue
            except (LoweringError, ValueError) as exc:
                raise SynthesisError(f"{spec.name}: cannot emit the forward: {exc}") from exc
            return src, full, tuple(n.name for n in plan.fallback)
        raise SynthesisError(f"{spec.name}: lowering did not converge")

    def space(self, spec_source: str, spec_name: str = "spec", genome: dict[str, str] | None = None,
              device: str = "cpu", precision: str = DEFAULT_CONTRACT) -> list[tuple[str, list[str]]]:
        """The transformation space at a genome (default genome when None): one entry per
        knob, (genome key, choices). Group keys depend on the fusion choice."""
        spec = self._capture(spec_source, spec_name)
        if spec.library_reason:
            return []  # the reference forward: nothing to transform
        plan = self._plan(spec, genome or {}, set(), device, precision)
        full = complete_genome(plan, genome or {}, self._by_kind)
        return [(k.key, list(k.choices)) for k in knobs(plan, full, self._by_kind)]

    # ---- proposals -------------------------------------------------------------
    def propose(self, request: ProposalRequest) -> list[Proposal]:
        if request.precision not in CONTRACTS:
            raise SynthesisError(f"unknown precision contract {request.precision!r} (one of {', '.join(CONTRACTS)})")
        spec = self._capture(request.spec_source, request.spec_name)
        count = max(0, request.count)
        if count == 0:
            return []
        rng = random.Random(_digest(request))
        if request.parent is None:
            return self._seeds(spec, request, count, rng)
        if request.tune:
            return self._tuned(spec, request, count)
        return self._children(spec, request, count, rng)

    def _proposal(self, spec: CapturedSpec, genome: dict[str, str], t: Transformation,
                  desc: str, device: str, precision: str) -> tuple[Proposal, dict[str, str]]:
        src, full, fb = self.lower(spec, genome, device, precision)
        if fb == (WHOLE_FORWARD,):
            desc = f"library call of the whole reference forward (not captured: {spec.library_reason or 'see source'})"
        return Proposal(source=src, transformation=t, genome=full, fallback_nodes=fb, description=desc), full

    def _seeds(self, spec: CapturedSpec, request: ProposalRequest, count: int, rng: random.Random) -> list[Proposal]:
        device = request.hardware_kind
        contract = request.precision
        first, base = self._proposal(spec, {}, Transformation("seed", {"variant": "default"}),
                                     "default lowering: greedy fusion, default tiles", device, contract)
        tried = {(t.name, tuple(sorted(t.params.items()))) for t in request.tried}
        # Seeds already taken from the root (e.g. all judged incorrect) are not offered again.
        out = [] if ("seed", (("variant", "default"),)) in tried else [first]
        seen = {_key(base)}
        space, edges = _edges(self, spec, base, device, contract)
        rng.shuffle(edges)
        if self.knowledge is not None:  # seeds found the islands: skill-backed variants first
            edges = skill_weighted(edges, skill_gains(self.knowledge, request.spec_source, request.hardware_kind))
        # The default lowering replayed as one CUDA graph is the first variant wherever the knob
        # is offered: a launch-bound forward (whole models, recurrent layers) loses to the
        # library on launches, not arithmetic (4.19x per call from the replay over 18 whole
        # models on an H100, bench/RESULTS.md), and a random draw among a large model's
        # hundred edges would seldom reach it within a budget of 32.
        edges.sort(key=lambda e: (e[0].key, e[1]) != (cuda_graph.KNOB, "on"))
        for knob, value in edges:
            if len(out) >= count:
                break
            variant = {"variant": f"{knob.key}={value}"}
            if ("seed", tuple(sorted(variant.items()))) in tried:
                continue
            child = apply_edge(space, base, knob, value)
            prop, full = self._proposal(spec, child, Transformation("seed", variant),
                                        f"seed variant: {knob.key}={value}", device, contract)
            if _key(full) in seen:
                continue
            seen.add(_key(full))
            out.append(prop)
        return out

    def _children(self, spec: CapturedSpec, request: ProposalRequest, count: int, rng: random.Random) -> list[Proposal]:
        parent = request.parent
        assert parent is not None
        if spec.library_reason:
            return []
        device = request.hardware_kind
        contract = request.precision
        base = complete_genome(self._plan(spec, dict(parent.genome), set(), device, contract), dict(parent.genome),
                               self._by_kind)
        tried = {(t.name, tuple(sorted(t.params.items()))) for t in request.tried}
        space, edges = _edges(self, spec, base, device, contract)
        edges = [(k, v) for k, v in edges if (k.name, _params_key(k, v)) not in tried]
        rng.shuffle(edges)
        if self.knowledge is not None:
            edges = skill_weighted(edges, skill_gains(self.knowledge, request.spec_source, request.hardware_kind))
        out: list[Proposal] = []
        seen = {_key(base)}
        for knob, value in edges:
            if len(out) >= count:
                break
            child = apply_edge(space, base, knob, value)
            t = Transformation(knob.name, _params(knob, value))
            moved = f" ({len(knob.sets)} nodes at once)" if knob.sets else ""
            prop, full = self._proposal(spec, child, t, f"{knob.key}: {base.get(knob.key)} -> {value}{moved}", device,
                                        contract)
            if _key(full) in seen:
                continue
            seen.add(_key(full))
            out.append(prop)
        return out

    def _tuned(self, spec: CapturedSpec, request: ProposalRequest, count: int) -> list[Proposal]:
        """Launch-config neighbours of the parent (``tune.py``): same genome but for launch
        knobs, each a configuration not tried from it; [] when it has none left."""
        parent = request.parent
        assert parent is not None
        if spec.library_reason or not parent.genome:
            return []  # the library-call candidate, or a kernel with no lowering choices to vary
        device = request.hardware_kind
        contract = request.precision
        base = complete_genome(self._plan(spec, dict(parent.genome), set(), device, contract), dict(parent.genome),
                               self._by_kind)
        space, _ = _edges(self, spec, base, device, contract)
        done = taken(request.tried)
        out: list[Proposal] = []
        seen = {_key(base)}
        refused = 0
        gains = None if self.knowledge is None else skill_gains(self.knowledge, request.spec_source,
                                                                request.hardware_kind)
        for changes in sweep(launch_knobs(space), base, gains):
            if len(out) >= count or refused > _TUNE_REFUSALS + count:
                break
            if frozenset(changes.items()) in done:
                continue
            child = {**base, **changes}
            prop, full = self._proposal(spec, child, transformation(changes), describe(base, changes), device,
                                        contract)
            if full != child or _key(full) in seen:
                # the plan would not keep this configuration as asked (a cap or an availability
                # that depends on another knob moved something else): not a launch-only neighbour
                refused += 1
                continue
            seen.add(_key(full))
            out.append(prop)
        return out


# Lowerings a tuning request may spend on configurations the plan does not keep as asked.
_TUNE_REFUSALS = 16


def _edges(synth: OfflineSynthesizer, spec: CapturedSpec, genome: dict[str, str],
           device: str, precision: str = DEFAULT_CONTRACT) -> tuple[list[Knob], list[tuple[Knob, str]]]:
    """The knobs at ``genome`` and the edges out of it (a move's ``mixed`` is no edge)."""
    if spec.library_reason:
        return [], []  # the library-call candidate: no knob to turn
    space = knobs(synth._plan(spec, genome, set(), device, precision), genome, synth._by_kind)
    return space, [(k, v) for k in space for v in k.targets if v != genome.get(k.key, k.default)]


def _split_epilogue(plan: Plan, group: str, genome: dict[str, str]) -> str | None:
    """The ``epilogue.<anchor>`` key of failed group ``group`` when its epilogue is fused
    there and can be split off (the group has members after its anchor), else None."""
    for g in plan.groups:
        if g.key == group and len(g.members) > 1:
            key = f"epilogue.{g.members[0].name}"
            if key in plan.fusion_knobs and genome.get(key, "fused") == "fused":
                return key
    return None


def _expand_moves(space: list[Knob], genome: dict[str, str]) -> dict[str, str] | None:
    """``genome`` with the members of every family-wide move it names, and none of whose
    members it names, set to that move's value; None when there is none. A genome that
    names members too (a completed genome, edited by hand per node) is read by its members:
    the move's value there is derived, and may be stale."""
    out = dict(genome)
    for move in space:
        value = genome.get(move.key)
        if move.sets and value in move.targets and not any(k in genome for k in move.sets):
            out.update({k: value for k in move.sets})  # type: ignore[misc]
    return None if out == genome else out


def _params(knob: Knob, value: str) -> dict[str, str]:
    return {"group": knob.group, "value": value} if knob.group else {"value": value}


def _params_key(knob: Knob, value: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(_params(knob, value).items()))


def _key(genome: dict[str, str]) -> str:
    return json.dumps(genome, sort_keys=True)


def _digest(request: ProposalRequest) -> int:
    h = hashlib.sha256()
    h.update(request.spec_source.encode())
    h.update(request.spec_name.encode())
    h.update(str(request.count).encode())
    h.update(request.hardware_kind.encode())
    if request.parent is not None:
        h.update(_key(dict(request.parent.genome)).encode())
    for t in request.tried:
        h.update(json.dumps([t.name, sorted(t.params.items())]).encode())
    return int.from_bytes(h.digest()[:8], "big")


__all__ = ["OfflineSynthesizer", "InvalidSpecError"]


def _title(spec: CapturedSpec) -> str:
    title = f"Triton lowering of {spec.name}."
    if spec.specialized_shapes:
        if spec.tracer == "aten":
            title += ("\n\nCaptured at the dispatcher level (Python control flow unrolled, library modules "
                      "decomposed).")
        shapes = ", ".join(str(list(s)) for s in spec.specialized_shapes)
        title += (f"\n\nSpecialised for input shapes {shapes}: the reference's forward uses its inputs' sizes as "
                  "Python values,\nso this candidate is exact for these shapes only.")
    return title
