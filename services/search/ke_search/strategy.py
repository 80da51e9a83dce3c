"""Strategies decide which node to expand next (the ``kernelevolve.ports.strategy``
port), each registered here under a name of ``STRATEGY_NAMES``.

The search service asks afresh for every decision and keeps no strategy object between
calls, so every strategy is a pure function of the node list and the exhausted set:
whatever state a strategy needs (an island's members, a beam's turn) is derived from
the tree itself. No strategy returns an exhausted node or a node that is not correct
(``ROOT`` is fine while it is not exhausted), and each returns None when nothing can be
expanded, so the search always ends."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ke_search.priors import NO_PRIORS, SkillPriors
from kernelevolve.ports.strategy import ROOT, Strategy, check_strategy_name
from kernelevolve.v1 import common_pb2 as pb

_ID = re.compile(r"^r(\d+)-(\d+)$")


def is_correct(n: pb.Node) -> bool:
    return n.evaluated and n.status == pb.EVALUATION_STATUS_CORRECT


def rank(n: pb.Node) -> tuple[float, int, str]:
    """Fitter first; among equals the shallower, then the id (the order the service, the
    strategies and the tuning stage share)."""
    return (n.fitness, -n.depth, n.node_id)


def _expandable(nodes: Sequence[pb.Node], exhausted: set[str]) -> list[pb.Node]:
    return [n for n in nodes if is_correct(n) and n.node_id not in exhausted]


def _creation_order(nodes: Sequence[pb.Node]) -> list[pb.Node]:
    """Nodes in the order they were asked for. Candidate ids are ``r<request>-<n>`` (the
    synthesizer derives them from the request number, which only grows); ids of another
    form keep their place in the list, after those."""
    def key(item: tuple[int, pb.Node]) -> tuple[int, int, int]:
        pos, n = item
        m = _ID.match(n.node_id)
        return (0, int(m.group(1)), int(m.group(2))) if m else (1, pos, 0)

    return [n for _, n in sorted(enumerate(nodes), key=key)]


def _children(nodes: Sequence[pb.Node]) -> dict[str, list[pb.Node]]:
    """Children of every node (``ROOT`` included) in creation order, in flight or not."""
    kids: dict[str, list[pb.Node]] = {}
    for n in _creation_order(nodes):
        kids.setdefault(n.parent_id, []).append(n)
    return kids


def _seeds_or_none(exhausted: set[str]) -> str | None:
    return ROOT if ROOT not in exhausted else None


class Greedy:
    """Always expand the fittest correct node; fall back to the root (new seeds)
    while no node is correct. A node the synthesizer has exhausted is skipped."""

    name = "greedy"

    def select_parent(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> str | None:
        correct = _expandable(nodes, exhausted)
        if correct:
            return max(correct, key=rank).node_id
        return _seeds_or_none(exhausted)


class OneShot:
    """Independent samples only: expand the root until the synthesizer runs out of seeds,
    never a child."""

    name = "one-shot"

    def select_parent(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> str | None:
        return _seeds_or_none(exhausted)


class Linear:
    """A chain: expand the most recently evaluated correct node, so each step builds on the
    last success; when that one is exhausted, the latest before it; seeds while none is
    correct."""

    name = "linear"

    def select_parent(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> str | None:
        latest = _expandable(_creation_order(nodes), exhausted)
        if latest:
            return latest[-1].node_id
        return _seeds_or_none(exhausted)


class Beam:
    """Beam of width k: seed k candidates from the root, then keep expanding the k fittest
    correct nodes of the frontier in turn, the least expanded member first (ties: the
    fitter), which is a round robin over the beam derived from the tree alone."""

    name = "beam"

    def __init__(self, width: int = 4) -> None:
        if width < 1:
            raise ValueError("beam width must be at least 1")
        self.width = width

    def select_parent(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> str | None:
        kids = _children(nodes)
        seeds = [n for n in kids.get(ROOT, []) if is_correct(n) or not n.evaluated]
        if len(seeds) < self.width and ROOT not in exhausted:
            return ROOT
        beam = sorted(_expandable(nodes, exhausted), key=rank, reverse=True)[:self.width]
        if not beam:
            return _seeds_or_none(exhausted)
        order = {n.node_id: i for i, n in enumerate(beam)}
        return min(beam, key=lambda n: (len(kids.get(n.node_id, [])), order[n.node_id])).node_id


class MCTS:
    """Monte Carlo tree search over the search tree with UCB1.

    A node's value is the best fitness in its subtree, normalised to 0..1 between the
    least and the most fit correct node of the tree; its visits are the size of its subtree (nodes in flight count, so
    concurrent requests spread out). From the root, descend to the child with the highest
    ``value + c * sqrt(ln(visits(parent)) / visits(child))`` until a node may take a new
    child: progressive widening lets a node have at most ``ceil(k * visits ** alpha)``
    children, so the synthesizer's transformation space is opened gradually and the root
    gets new seeds only as the tree under the existing ones grows."""

    name = "mcts"

    def __init__(self, c: float = 1.4, k: float = 1.0, alpha: float = 0.5, priors: SkillPriors = NO_PRIORS,
                 prior_weight: float = 1.0) -> None:
        self.c, self.k, self.alpha = c, k, alpha
        # Skills add prior_weight * bonus / visits to a child's score (ke_search.priors).
        self.priors, self.prior_weight = priors, prior_weight

    def select_parent(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> str | None:
        kids = _children(nodes)
        fits = [n.fitness for n in nodes if is_correct(n)]
        low, high = min(fits, default=0.0), max(fits, default=0.0)
        size: dict[str, int] = {}
        best: dict[str, float] = {}
        alive: dict[str, bool] = {}

        def can_expand(nid: str, node: pb.Node | None) -> bool:
            return nid not in exhausted and (nid == ROOT or (node is not None and is_correct(node)))

        def visit(nid: str, node: pb.Node | None) -> None:  # subtree sums, iteratively (deep chains)
            stack: list[tuple[str, pb.Node | None, bool]] = [(nid, node, False)]
            while stack:
                cur, cur_node, done = stack.pop()
                if not done:
                    stack.append((cur, cur_node, True))
                    stack.extend((ch.node_id, ch, False) for ch in kids.get(cur, []))
                    continue
                children = kids.get(cur, [])
                size[cur] = 1 + sum(size[ch.node_id] for ch in children)
                own = cur_node.fitness if cur_node is not None and is_correct(cur_node) else 0.0
                best[cur] = max([own] + [best[ch.node_id] for ch in children])
                alive[cur] = can_expand(cur, cur_node) or any(alive[ch.node_id] for ch in children)

        visit(ROOT, None)
        if not alive[ROOT]:
            return None
        nid = ROOT
        node: pb.Node | None = None
        while True:
            children = kids.get(nid, [])
            widen = len(children) < math.ceil(self.k * size[nid] ** self.alpha)
            living = [ch for ch in children if alive[ch.node_id]]
            if can_expand(nid, node) and (widen or not living):
                return nid
            # ``alive`` guarantees a living child here.
            log_n = math.log(size[nid])

            def ucb(ch: pb.Node, log_n: float = log_n) -> float:
                value = (best[ch.node_id] - low) / (high - low) if high > low and best[ch.node_id] > 0 else 0.0
                prior = self.prior_weight * self.priors.bonus(ch.transformation) / size[ch.node_id]
                return value + self.c * math.sqrt(log_n / size[ch.node_id]) + prior

            node = max(living, key=lambda ch: (ucb(ch), -living.index(ch)))
            nid = node.node_id


class Islands:
    """Evolutionary islands: each seed from the root founds an island (the i-th seed goes
    to island i mod N) and every node belongs to the island of its top ancestor. The
    evaluated count picks whose turn it is (count mod N); that island expands one of its
    own nodes, so islands evolve in isolation between migrations. Inside an island,
    MAP-Elites: the population is split into niches by transformation family (the
    transformation's name), each niche keeps its elite, and the niche elite expanded the
    least goes next (ties: the fitter), so one family cannot crowd out the others.

    Every M evaluations is a migration step: island i's turn expands the fittest
    *re-timed* node of island i-1 instead, carrying that elite's lineage forward; a
    first timing may be luck, so only an elite confirmed in a fresh worker migrates (the
    search service re-times every island's elite, ``elites_to_retime``; until it has,
    the island keeps its turn). An island with nothing left to expand asks for a new
    seed, or, once the root is exhausted, yields its turn to the next island that has one."""

    name = "islands"

    def __init__(self, islands: int = 4, migrate_every: int = 8, priors: SkillPriors = NO_PRIORS) -> None:
        if islands < 1 or migrate_every < 1:
            raise ValueError("islands and migrate_every must be at least 1")
        self.islands, self.migrate_every = islands, migrate_every
        self.priors = priors

    def _rank(self, n: pb.Node) -> tuple[float, float, int, str]:
        """Fitter first; among equals the one skills back (ke_search.priors), then rank's order."""
        fitness, depth, nid = rank(n)
        return (fitness, self.priors.bonus(n.transformation), depth, nid)

    def island_of(self, nodes: Sequence[pb.Node]) -> dict[str, int]:
        """The island of every node, derived from the tree alone."""
        by_id = {n.node_id: n for n in nodes}
        seeds = [n for n in _creation_order(nodes) if n.parent_id not in by_id]
        found = {n.node_id: i % self.islands for i, n in enumerate(seeds)}
        out: dict[str, int] = {}
        for n in nodes:
            chain, cur = [], n
            while cur.node_id not in out and cur.node_id not in found:
                chain.append(cur.node_id)
                cur = by_id[cur.parent_id]
            isl = out.get(cur.node_id, found.get(cur.node_id, 0))
            out[cur.node_id] = isl
            for nid in chain:
                out[nid] = isl
        return out

    def turn(self, nodes: Sequence[pb.Node]) -> tuple[int, int]:
        """(island whose turn it is, island whose node it expands): the same island, except
        at a migration step, where it is the island before it."""
        t = sum(1 for n in nodes if n.evaluated)
        island = t % self.islands
        migrating = t > 0 and t % self.migrate_every == 0 and self.islands > 1
        return island, (island - 1) % self.islands if migrating else island

    def _populations(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> dict[int, list[pb.Node]]:
        island = self.island_of(nodes)
        pops: dict[int, list[pb.Node]] = {}
        for n in _expandable(nodes, exhausted):
            pops.setdefault(island[n.node_id], []).append(n)
        return pops

    def _niche_pick(self, pop: list[pb.Node], kids: dict[str, int]) -> pb.Node:
        elites: dict[str, pb.Node] = {}
        for n in pop:
            family = n.transformation.name
            if family not in elites or self._rank(n) > self._rank(elites[family]):
                elites[family] = n
        ranked = sorted(elites.values(), key=self._rank, reverse=True)
        order = {n.node_id: i for i, n in enumerate(ranked)}
        return min(ranked, key=lambda n: (kids.get(n.node_id, 0), order[n.node_id]))

    def elites_to_retime(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> list[str]:
        """Each island's fittest expandable node not re-timed yet: the would-be migrants."""
        if self.islands < 2:
            return []
        pops = self._populations(nodes, exhausted)
        elites = (max(pop, key=rank) for _, pop in sorted(pops.items()))
        return [n.node_id for n in elites if not n.retimed]

    def select_parent(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> str | None:
        seeds = sum(1 for n in nodes if n.parent_id == ROOT)
        if seeds < self.islands and ROOT not in exhausted:
            return ROOT  # draft phase: found every island first
        own, source = self.turn(nodes)
        pops = self._populations(nodes, exhausted)
        if source != own:
            migrants = [n for n in pops.get(source, []) if n.retimed]
            if migrants:
                return max(migrants, key=rank).node_id
            source = own  # no confirmed elite to migrate yet: the island keeps its turn
        kids: dict[str, int] = {}  # children per node; no creation order needed here
        for n in nodes:
            kids[n.parent_id] = kids.get(n.parent_id, 0) + 1
        if source in pops:
            return self._niche_pick(pops[source], kids).node_id
        if ROOT not in exhausted:
            return ROOT
        for step in range(1, self.islands):
            other = (source + step) % self.islands
            if other in pops:
                return self._niche_pick(pops[other], kids).node_id
        return None


STRATEGIES: dict[str, type[Strategy]] = {
    "one-shot": OneShot,
    "linear": Linear,
    "greedy": Greedy,
    "beam": Beam,
    "mcts": MCTS,
    "islands": Islands,
}


def make_strategy(name: str, priors: SkillPriors = NO_PRIORS) -> Strategy:
    """The strategy ``name``; ``priors`` reach the strategies that use skills (mcts, islands)."""
    cls = STRATEGIES[check_strategy_name(name)]
    if priors and cls in (MCTS, Islands):
        return cls(priors=priors)  # type: ignore[call-arg]
    return cls()
