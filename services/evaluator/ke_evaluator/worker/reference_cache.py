"""Reference cache of one worker: input sets and reference outputs reused across candidates.

The Judge derives the seeds of consecutive evaluations of one spec from a secret salt
(``judge/judge.py``), so several candidates of a spec in a row share their input sets. A worker
keeps, per (spec sha, seed, digest of the constructor arguments), a ``Bundle``: the
generated input sets (on the device), the eager reference outputs and the float64
references, in an LRU bounded by bytes.

What keeps the cache from weakening the protocol (README.md, "Reference cache"):

* originals never reach a candidate: every use clones them (``evaluation.py``);
* every cached tensor has a checksum taken when stored; a bundle changed since (an
  earlier job wrote into memory it does not own) is dropped at the start of a job, and
  a change during a job is the candidate's doing (``unchanged`` -> rejected);
* trial 0's reference is always recomputed after the candidate ran, so the candidate ->
  reference -> candidate order and the stale-memory check are as before; it is also
  compared with the cached output (a mismatch drops the bundle);
* with shared seeds, trial 1 (same buffers, new values), the extra shape sets and the
  timing sets come from a per-job secret seed and are never cached (and the error budget
  is also checked on trial 1): an answer stored by an earlier job cannot pass the checks
  that hang on one set.

Screens (``JobReferences(reads=...)``) and where the screen's reference lives: see
``SCREEN_SET``, ``keep_on_device`` and ``JobReferences.keep_on``.

Worker side: torch only.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelevolve import module_cast

from ..backends import DeviceBackend, for_torch_device
from . import loading, output_checks, random_replay
from .tolerance import compare_values

CacheKey = tuple[str, int, str]
CPU_DEFAULT_BYTES = 256 * 2**20
# The input set a screen reads (stages/screen.py): its eager output is the one worth keeping
# on the device between jobs. On an H200 a screen of a 4 GiB operator spent 1.4 s of its
# 2.2 s comparing with that output held on the host and checksumming it there
# (bench/results/tier_verdicts_h200_2026-11-28.json); on the device both are one pass at
# device bandwidth (a few ms for 4 GiB).
SCREEN_SET = "trial 0"
# Headroom over the job's own measured peak that a device-resident cached output must
# leave free (the next job of the spec needs that peak again), as the Judge's memory
# admission keeps a quarter to spare.
DEVICE_RESERVE_FACTOR = 1.25
# Words per piece of a checksum: its int64 temporaries stay a few MiB whatever the tensor
# (a whole 4 GiB input widened to int64 words was 8 GiB, twice).
CHECKSUM_CHUNK = 1 << 22


def tree_bytes(obj: Any) -> int:
    return sum(t.numel() * t.element_size() for t in output_checks.leaves(obj) if isinstance(t, torch.Tensor))


def _words(t: torch.Tensor) -> torch.Tensor:
    raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
    n = raw.numel()
    for dtype, size in ((torch.int64, 8), (torch.int32, 4), (torch.int16, 2)):
        if n % size == 0:
            return raw.view(dtype)
    return raw


def checksum(obj: Any) -> tuple[Any, ...]:
    """Order-independent integer checksum of every tensor's bytes (sum and sum of squares of
    its 64/32/16-bit words, wrapping): deterministic on any device, one pass, no host copy
    of the data. Non-tensor leaves are compared by ``repr``."""
    out: list[Any] = []
    for t in output_checks.leaves(obj):
        if isinstance(t, torch.Tensor):
            if t.numel() == 0:
                out.append((tuple(t.shape), 0, 0))
                continue
            words = _words(t)
            s1 = torch.zeros((), dtype=torch.int64, device=t.device)
            s2 = torch.zeros((), dtype=torch.int64, device=t.device)
            for i in range(0, words.numel(), CHECKSUM_CHUNK):
                w = words[i:i + CHECKSUM_CHUNK].to(torch.int64)
                s1 += w.sum()
                s2 += (w * w).sum()
            out.append((tuple(t.shape), int(s1), int(s2)))
        else:
            out.append(repr(t))
    return tuple(out)


def on_host(obj: Any) -> bool:
    """Whether any tensor of ``obj`` lives in host memory."""
    return any(isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in output_checks.leaves(obj))


def keep_on_device(nbytes: int, *, resident_bytes: int, budget_bytes: int, available_bytes: int,
                   reserve_bytes: int) -> bool:
    """Whether a cached output of ``nbytes`` may stay on the device between jobs: within the
    cache's byte budget (``budget_bytes``: its share of the device, ``resolve_limit``) beside
    the ``resident_bytes`` the cache already keeps there, and leaving ``reserve_bytes`` (the
    job's own peak, with headroom) of the ``available_bytes`` (free plus the allocator's
    unused blocks) for the next job. Anything else waits on the host, as before."""
    if nbytes <= 0:
        return False
    return resident_bytes + nbytes <= budget_bytes and nbytes + reserve_bytes <= available_bytes


def init_digest(init: list[Any]) -> str:
    """Digest of the constructor arguments: the reference model (and so its outputs) depends
    on them, and a spec may draw them at random."""
    h = hashlib.sha256()
    for x in output_checks.leaves(init):
        if isinstance(x, torch.Tensor):
            h.update(repr((tuple(x.shape), str(x.dtype))).encode())
            h.update(repr(checksum([x])).encode())
        else:
            h.update(repr(x).encode())
    return h.hexdigest()[:16]


def resolve_limit(requested: int | None, fraction: float, device: torch.device,
                  backend: DeviceBackend | None = None) -> int:
    """Byte cap: ``requested`` when given; else ``fraction`` of the device's free memory
    (a GPU) or a fixed CPU-sized default."""
    if requested is not None:
        return max(0, int(requested))
    backend = backend if backend is not None else for_torch_device(device)
    if backend.accelerated:
        try:
            free, _total = backend.mem_get_info(device)
            return int(free * max(0.0, fraction))
        except RuntimeError:
            return 0
    return CPU_DEFAULT_BYTES


def float64_reference(ref_model: torch.nn.Module, inputs: list[Any], device: torch.device,
                      seed: int | None = None, draws_on: torch.device | None = None,
                      notes: list[str] | None = None,
                      unlocked: Callable[[], AbstractContextManager[None]] | None = None) -> Any:
    """The reference in float64: on the evaluation device (a GPU's float64 units do in
    milliseconds what the host needs seconds for), on the host if the device cannot.
    ``seed``: the job's forward seed (``loading.seed_forward``), set before the call as it
    was before the eager reference's. ``draws_on``: the reference draws random numbers
    (training-mode dropout) and eager ran on this device: eager runs once more there,
    seeded, its draws recorded, and the float64 run replays them (``random_replay``: from
    one seed a GPU's float64 dropout keeps other elements than its float32 one, the host
    others again). A replay that does not line up leaves the float64 run seeded only, with
    a line in ``notes``. ``unlocked``: a context that lets the device lock go; a run on the
    host happens inside it, after its copies from the device were made (no device work in
    it): on an H100 with 8 workers a U-Net's float64 runs on the host took 43 s each, and
    every other job's timing phase waited for them (2026-11-28)."""
    draws = None
    if draws_on is not None:
        with torch.no_grad():
            ref_in = output_checks.clone_tree(output_checks.map_tree(inputs, lambda t: t.to(draws_on)))
            if seed is not None:
                loading.seed_forward(seed)
            _, draws = random_replay.record(lambda: ref_model(*ref_in))
            del ref_in

    def run(m64: torch.nn.Module, in64: list[Any]) -> Any:
        with torch.no_grad():
            if seed is not None:
                loading.seed_forward(seed)
            if draws is None:
                return m64(*in64)
            try:
                return random_replay.replay(lambda: m64(*in64), draws)
            except random_replay.ReplayMismatch as exc:
                if notes is not None:
                    notes.append(f"the float64 reference could not replay eager's random draws ({exc}): it drew "
                                 f"its own, and the float64 error budget is void where they matter")
            if seed is not None:
                loading.seed_forward(seed)
            return m64(*in64)

    def placed(where: torch.device) -> Any:
        in64 = output_checks.upcast64(output_checks.map_tree(inputs, lambda t: t.to(where)))
        # The reference itself, converted and restored (module_cast): a copy's lambda
        # attribute kept calling the original float32 submodules.
        with module_cast.converted(ref_model, where, torch.float64) as m64:
            # Replayed draws are read from the device during the run: only a run without
            # them is free of device work.
            if where.type != "cpu" or unlocked is None or draws is not None:
                return run(m64, in64)
            with unlocked():
                return run(m64, in64)

    try:
        return placed(device)
    except (RuntimeError, NotImplementedError):  # run() settles a replay that does not line up
        return placed(torch.device("cpu"))


@dataclass
class Entry:
    """One input set and what was computed from it, each with its checksum. ``inputs`` None:
    the set is not kept (too large to hold on the device between jobs) and is made again
    from its seed when used, checked against ``inputs_sum`` before anything cached for it
    is trusted."""

    inputs: list[Any] | None
    inputs_sum: tuple[Any, ...]
    ref: Any = None
    ref_aliases: bool = False
    ref_sum: tuple[Any, ...] | None = None
    ref64: Any = None
    ref64_sum: tuple[Any, ...] | None = None

    def nbytes(self) -> int:
        return tree_bytes(self.inputs) + tree_bytes(self.ref) + tree_bytes(self.ref64)

    def intact(self, host_ref64: bool = True) -> bool:
        """Every cached tensor's bytes as stored. ``host_ref64`` False: a float64 reference
        held on the host is left out (checked when it is read: ``JobReferences.float64``)."""
        if self.inputs is not None and checksum(self.inputs) != self.inputs_sum:
            return False
        if self.ref_sum is not None and checksum(self.ref) != self.ref_sum:
            return False
        if self.ref64_sum is None or (not host_ref64 and on_host(self.ref64)):
            return True
        return checksum(self.ref64) == self.ref64_sum

    def device_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in output_checks.leaves([self.inputs, self.ref, self.ref64])
                   if isinstance(t, torch.Tensor) and t.device.type != "cpu")


@dataclass
class Bundle:
    entries: dict[str, Entry] = field(default_factory=dict)
    extra_labels: list[str] | None = None  # None: the spec's extra sets not generated yet

    def nbytes(self) -> int:
        return sum(e.nbytes() for e in self.entries.values())

    def device_bytes(self) -> int:
        return sum(e.device_bytes() for e in self.entries.values())


class RefCache:
    """Bundles in least-recently-used order, evicted to stay under ``limit_bytes``."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._lru: OrderedDict[CacheKey, tuple[Bundle, int]] = OrderedDict()
        self.used_bytes = 0

    def __len__(self) -> int:
        return len(self._lru)

    def get(self, key: CacheKey) -> Bundle | None:
        hit = self._lru.get(key)
        if hit is None:
            return None
        self._lru.move_to_end(key)
        return hit[0]

    def device_bytes(self) -> int:
        """Bytes the cache keeps on the device (the rest waits on the host)."""
        return sum(b.device_bytes() for b, _ in self._lru.values())

    def drop(self, key: CacheKey) -> None:
        hit = self._lru.pop(key, None)
        if hit is not None:
            self.used_bytes -= hit[1]

    def drop_spec_except(self, key: CacheKey) -> None:
        """Drop the spec's bundles of other seeds: shared seeds only move forward."""
        for k in [k for k in self._lru if k[0] == key[0] and k != key]:
            self.drop(k)

    def put(self, key: CacheKey, bundle: Bundle) -> bool:
        """Store (or re-size) ``bundle``; evicts the least recently used others. False when
        it alone exceeds the cap (then it is not kept)."""
        self.drop(key)
        size = bundle.nbytes()
        if size > self.limit_bytes:
            return False
        while self._lru and self.used_bytes + size > self.limit_bytes:
            _, (_, old) = self._lru.popitem(last=False)
            self.used_bytes -= old
        self._lru[key] = (bundle, size)
        self.used_bytes += size
        return True


class BaselineTimes:
    """The eager baseline's timing summary (``timing.summarize``) per (spec sha, input
    shapes and dtypes, device), timed once per spec in a worker's session and read by the
    screen tier, which then times only the candidate. Full-tier jobs time the baseline
    again (interleaved with their candidate) and refresh the entry: a timing several
    minutes old is never what a full verdict's speedup rests on. A timing holds no value a
    candidate could replay; LRU-bounded by count (a few hundred bytes each)."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = max(0, limit)
        self._times: OrderedDict[tuple[str, str, str], dict[str, Any]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(spec_sha: str, inputs: Any, device: str) -> tuple[str, str, str]:
        shapes = [(tuple(t.shape), str(t.dtype)) if isinstance(t, torch.Tensor) else repr(t)
                  for t in output_checks.leaves(inputs)]
        return spec_sha, repr(shapes), device

    def __len__(self) -> int:
        return len(self._times)

    def get(self, key: tuple[str, str, str]) -> dict[str, Any] | None:
        hit = self._times.get(key)
        if hit is None:
            self.misses += 1
            return None
        self.hits += 1
        self._times.move_to_end(key)
        return dict(hit)

    def put(self, key: tuple[str, str, str], summary: dict[str, Any]) -> None:
        if self.limit == 0:
            return
        self._times[key] = dict(summary)
        self._times.move_to_end(key)
        while len(self._times) > self.limit:
            self._times.popitem(last=False)


class JobReferences:
    """One job's view of the cache: cached or generated inputs, cached or computed
    references, checksums verified before every use, and the counts for the evidence.
    With ``cache`` None it generates and computes everything (and keeps nothing)."""

    def __init__(self, cache: RefCache | None, key: CacheKey, shared: bool, regenerate_bytes: int | None = None,
                 reads: tuple[str, ...] | None = None) -> None:
        """``regenerate_bytes``: an input set of at least this size is not kept, only its
        checksum (made again from its seed when used); None keeps every set that fits.
        ``reads``: the labels the job reads (a screen: ``SCREEN_SET``); None: any.

        Which checksums a job recomputes (the checksum policy). A full job (``reads``
        None) verifies every cached tensor at its start and the set's own after each
        candidate call, as always. A screen verifies only what it reads, and a float64
        reference held on the host only when it reads it (outliers only), right before:
        on the host a checksum runs at memory speed on a few threads (an 8 GiB float64
        output: seconds, per screen). That still holds the line that matters, that no
        cached value a job uses can have changed since it was stored: a value is either
        verified after the candidate's last call and before its use (the screen's inputs,
        reference and, when read, float64 reference), or not used by this job; an entry a
        screen does not read is verified by the next job that does (a full job verifies
        all at its start) and the bundle dropped if it changed. What a screen gives up is
        only naming the culprit: a screened candidate that wrote into a set it does not
        read is not rejected for it; its bundle is dropped later, and its promotion is
        judged by the full protocol in a fresh worker, which has no cache to tamper with.
        Replaying the screen set's cached output is not stopped by a checksum anywhere:
        a screen is provisional for that reason (one input set), and the full protocol's
        fresh values (trial 1, per-job secret seed) catch it."""
        self.cache = cache
        self.key = key
        self.regenerate_bytes = regenerate_bytes
        self.reads = reads
        self.stats: dict[str, Any] = {"enabled": cache is not None}
        self._counts = {"input_sets_cached": 0, "input_sets_generated": 0, "input_sets_regenerated": 0,
                        "reference_outputs_cached": 0, "reference_outputs_computed": 0, "float64_cached": 0,
                        "float64_computed": 0}
        self.bundle: Bundle | None = None
        self._refused = 0  # sets or outputs left out: no room in the cache
        if cache is None:
            return
        if shared:
            cache.drop_spec_except(key)
        bundle = cache.get(key)
        if bundle is not None and not all(e.intact(host_ref64=reads is None) for label, e in bundle.entries.items()
                                          if reads is None or label in reads):
            cache.drop(key)  # written into by an earlier job: never trust it again
            self.stats["dropped"] = "a cached tensor changed since it was stored"
            bundle = None
        self.bundle = bundle if bundle is not None else Bundle()

    def _room(self, obj: Any) -> bool:
        """Whether ``obj`` still fits the cache's cap beside the bundle. What does not fit is
        not kept even for the rest of the job: a bundle larger than the cap is dropped at the
        end anyway, and holding every set of a 12 GB spec on the device until then is what
        ran workers out of memory. Such sets are regenerated from their seeds next time."""
        fits = (self.cache is not None and self.bundle is not None
                and self.bundle.nbytes() + tree_bytes(obj) <= self.cache.limit_bytes)
        self._refused += not fits
        return fits

    def _store(self, label: str, inputs: list[Any]) -> list[Any]:
        keep = self.regenerate_bytes is None or tree_bytes(inputs) < self.regenerate_bytes
        if self.bundle is not None and self._room(inputs if keep else None):
            try:
                self.bundle.entries[label] = Entry(inputs=inputs if keep else None, inputs_sum=checksum(inputs))
            except (RuntimeError, TypeError):
                pass  # a leaf we cannot checksum: not cached
        return inputs

    def _regenerated(self, label: str, entry: Entry, made: list[Any]) -> list[Any]:
        """A set made again from its seed: what was cached for it holds only if it is the
        very set it was computed from."""
        self._counts["input_sets_regenerated"] += 1
        try:
            same = checksum(made) == entry.inputs_sum
        except (RuntimeError, TypeError):
            same = False
        if not same:
            self.stats["dropped"] = f"{label}: made again from its seed, it differs from the cached set"
            self.invalidate()
        return made

    def inputs(self, label: str, make: Callable[[], list[Any]]) -> list[Any]:
        entry = self.bundle.entries.get(label) if self.bundle is not None else None
        if entry is not None and entry.inputs is not None:
            self._counts["input_sets_cached"] += 1
            return entry.inputs
        if entry is not None:
            return self._regenerated(label, entry, make())
        self._counts["input_sets_generated"] += 1
        return self._store(label, make())

    def extras(self, make: Callable[[], list[list[Any]]]) -> list[tuple[str, list[Any]]]:
        b = self.bundle
        if b is not None and b.extra_labels is not None and all(x in b.entries for x in b.extra_labels):
            if all(b.entries[x].inputs is not None for x in b.extra_labels):
                self._counts["input_sets_cached"] += len(b.extra_labels)
                return [(x, b.entries[x].inputs) for x in b.extra_labels]  # type: ignore[misc]
            sets = make()
            for x, s in zip(b.extra_labels, sets, strict=False):
                self._regenerated(x, b.entries[x], s)
            return list(zip(b.extra_labels, sets, strict=False))
        sets = make()
        labels = [f"extra shape set {j}" for j in range(len(sets))]
        self._counts["input_sets_generated"] += len(sets)
        for x, s in zip(labels, sets, strict=True):
            self._store(x, s)
        if b is not None:
            b.extra_labels = labels
        return list(zip(labels, sets, strict=True))

    def reference(self, label: str, compute: Callable[[], tuple[Any, bool]]) -> tuple[Any, bool]:
        """(reference output, whether it aliases its input), cached or computed now."""
        entry = self.bundle.entries.get(label) if self.bundle is not None else None
        if entry is not None and entry.ref_sum is not None:
            self._counts["reference_outputs_cached"] += 1
            return entry.ref, entry.ref_aliases
        ref, aliases = compute()
        self._counts["reference_outputs_computed"] += 1
        if entry is not None and self._room(ref):
            try:
                entry.ref, entry.ref_aliases, entry.ref_sum = ref, aliases, checksum(ref)
            except (RuntimeError, TypeError):
                pass
        return ref, aliases

    def check_recomputed(self, label: str, fresh: Any, aliases: bool, tolerance: dict[str, float] | None) -> None:
        """Trial 0: the reference ran again (after the candidate); compare with the cached
        output, or cache the fresh one. A mismatch beyond tolerance drops the bundle."""
        entry = self.bundle.entries.get(label) if self.bundle is not None else None
        if entry is None:
            return
        if entry.ref_sum is None:
            if not self._room(fresh):
                self.stats["trial0_reference"] = "computed (too large to cache)"
                return
            try:
                entry.ref, entry.ref_aliases, entry.ref_sum = fresh, aliases, checksum(fresh)
            except (RuntimeError, TypeError):
                pass
            self.stats["trial0_reference"] = "computed (now cached)"
            return
        if output_checks.bitwise_equal(entry.ref, fresh):
            self.stats["trial0_reference"] = "recomputed; equals the cached output bitwise"
        elif not output_checks.check_structure(fresh, entry.ref, [], strict_strides=False) \
                and compare_values(fresh, entry.ref, tolerance).ok:
            self.stats["trial0_reference"] = "recomputed; within tolerance of the cached output"
        else:
            self.stats["trial0_reference"] = "recomputed; differs from the cached output: cache dropped"
            self.invalidate()

    def float64(self, label: str, compute: Callable[[], Any]) -> Any:
        entry = self.bundle.entries.get(label) if self.bundle is not None else None
        if entry is not None and entry.ref64_sum is not None and self.reads is not None and on_host(entry.ref64) \
                and checksum(entry.ref64) != entry.ref64_sum:
            # A screen verifies a host-held float64 reference only now (see __init__).
            self.stats["dropped"] = f"{label}: the cached float64 reference changed since it was stored"
            self.invalidate()
            entry = None
        if entry is not None and entry.ref64_sum is not None:
            self._counts["float64_cached"] += 1
            return entry.ref64
        out = compute()
        self._counts["float64_computed"] += 1
        if entry is not None and self._room(out):
            try:
                entry.ref64, entry.ref64_sum = out, checksum(out)
            except (RuntimeError, TypeError):
                pass
        return out

    def unchanged(self, label: str) -> bool:
        """False when a cached tensor of ``label`` changed since it was stored (checked after
        the candidate ran and before its output is compared)."""
        entry = self.bundle.entries.get(label) if self.bundle is not None else None
        return entry is None or entry.intact(host_ref64=self.reads is None)

    def keep_on(self, label: str, fits: Callable[[int, int], bool], move: Callable[[torch.Tensor], torch.Tensor]
                ) -> str:
        """Move ``label``'s cached eager output from the host to the device (``move``: one
        tensor's copy there) when ``fits(nbytes, bytes the cache keeps on the device)``
        (``keep_on_device``); called at the end of a job, when its own tensors are gone.
        The copy is checksummed against the stored sum before it replaces the host one: a
        host value changed since it was stored never reaches the device (the bundle is
        dropped instead). Returns what happened, for the evidence ("" nothing to do)."""
        entry = self.bundle.entries.get(label) if self.bundle is not None else None
        if self.cache is None or entry is None or entry.ref_sum is None or not on_host(entry.ref):
            return ""
        nbytes = tree_bytes(entry.ref)
        if not fits(nbytes, self.cache.device_bytes()):
            return "on the host (does not fit the device budget)"
        moved = output_checks.map_tree(entry.ref, lambda t: move(t) if t.device.type == "cpu" else t)
        try:
            same = checksum(moved) == entry.ref_sum
        except (RuntimeError, TypeError):
            same = False
        if not same:
            self.stats["dropped"] = f"{label}: the cached reference changed on the host"
            self.invalidate()
            return "dropped (changed on the host)"
        entry.ref = moved
        return "moved to the device"

    def invalidate(self) -> None:
        if self.cache is not None:
            self.cache.drop(self.key)
        self.bundle = None

    def finish(self) -> dict[str, Any]:
        """Keep the bundle (everything in it was computed by us) and report."""
        c = self._counts
        if self.cache is not None and self.bundle is not None:
            kept = self.cache.put(self.key, self.bundle)
            if not kept or (self._refused and not self.bundle.entries):
                self.stats["kept"] = "no: larger than the cache"
            elif self._refused:
                self.stats["kept"] = f"partly: {self._refused} sets or outputs did not fit the cache"
        self.stats.update(c)
        cached_refs = c["reference_outputs_cached"] + c["float64_cached"]
        computed_refs = c["reference_outputs_computed"] + c["float64_computed"]
        self.stats["reference_outputs"] = ("cached" if cached_refs and not computed_refs else
                                           "partly cached" if cached_refs else
                                           "computed" if computed_refs else "none needed")
        if self.cache is not None:
            self.stats["bytes"] = self.cache.used_bytes
            self.stats["limit_bytes"] = self.cache.limit_bytes
            self.stats["entries"] = len(self.cache)
        return self.stats
