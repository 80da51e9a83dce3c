"""The seed's ``impl`` choice of each heavy node (conv / matmul): its Triton kernel, or a
library call (cuDNN / cuBLAS through aten) with its epilogue in Triton.

The default is a heuristic, overridden per shape by a measured cache:

* **Heuristic.** A model with several convolutions starts with every convolution as a
  library call whose bias / batch norm / activation / residual / pool run as fused Triton
  epilogues (what Inductor does with its extern convolution kernels). Measured on an H100
  with every convolution in Triton: a 16-layer VGG-style CNN ran at 0.11x torch.compile, a
  residual basic block at 0.31x, an MBConv block at 0.54x; a budget-12 search evaluated 8
  candidates, all with every convolution in Triton, since moving them one knob at a time
  takes one step per convolution. A lone convolution that is the whole operator stays in
  Triton: it is the kernel the search is there to tune, and a candidate must keep Triton
  arithmetic of its own. Matmuls stay in Triton: nothing measured says otherwise yet.
* **Cache.** A JSON file keyed by (op signature, input shapes, dtype, device name) that a
  GPU micro-benchmark fills with the faster choice of each heavy node it timed (format in
  ``ImplCache``); an entry overrides the heuristic for that node.

Either way it is only the seed's choice: ``impl.<node>`` and the family-wide moves
(``impl_conv``, ``impl_matmul``) stay in the search space.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import ConfigError

from ..frontend.fx_meta import dtype_of, shape_of
from .library_impl import heavy_nodes

CACHE_VERSION = 1
# families whose nodes start as library calls when the model holds several of them
LIBRARY_WHEN_SEVERAL = frozenset({"conv"})


@dataclass(frozen=True)
class HeavySignature:
    """What a measurement of one heavy node is keyed by (besides the device)."""

    family: str  # conv / matmul
    op: str  # the call with its options: a module's repr, or a function's name and non-tensor arguments
    shapes: tuple[tuple[int, ...], ...]  # shapes of its tensor operands, in argument order
    dtype: str  # its output's dtype, as torch prints it ("float32")

    def key(self, device: str) -> str:
        return json.dumps([self.op, [list(s) for s in self.shapes], self.dtype, device.lower()])


def signature(node: torch.fx.Node, family: str, gm: torch.fx.GraphModule) -> HeavySignature:
    """The signature of a conv / matmul node: the same for every spec that calls the same
    op on the same shapes, so a measurement carries over between specs."""
    if node.op == "call_module":
        op = repr(gm.get_submodule(str(node.target)))
    else:
        name = getattr(node.target, "__name__", str(node.target))
        options = [repr(a) for a in node.args if not isinstance(a, torch.fx.Node)]
        options += [f"{k}={v!r}" for k, v in sorted(node.kwargs.items()) if not isinstance(v, torch.fx.Node)]
        op = f"{name}({', '.join(options)})"
    shapes = tuple(tuple(shape_of(n) or ()) for n in node.all_input_nodes)
    dtype = str(dtype_of(node) or "").replace("torch.", "")
    return HeavySignature(family, op, shapes, dtype)


class ImplCache:
    """Measured choices: ``{"version": 1, "entries": [{"op": ..., "shapes": [[...], ...],
    "dtype": "float32", "device": "NVIDIA H100 80GB HBM3", "choice": "library",
    "triton_ms": 0.41, "library_ms": 0.12}, ...]}``. ``choice`` decides (``triton`` or
    ``library``); the timings are the evidence. Devices compare case-insensitively; the
    device is the hardware the synthesizer lowers for (the session's hardware kind, or
    the name the micro-benchmark recorded: a cache written on one kind is read for it)."""

    def __init__(self, entries: Mapping[str, dict[str, Any]] | None = None) -> None:
        self._entries: dict[str, dict[str, Any]] = dict(entries or {})

    @classmethod
    def load(cls, path: str | Path) -> ImplCache:
        """The cache at ``path``; a missing file is an empty cache, a malformed one an error."""
        p = Path(path)
        if not p.is_file():
            return cls()
        try:
            doc = json.loads(p.read_text())
            if doc.get("version") != CACHE_VERSION:
                raise ValueError(f"version {doc.get('version')!r}, expected {CACHE_VERSION}")
            entries = {}
            for e in doc["entries"]:
                sig = HeavySignature("", str(e["op"]), tuple(tuple(int(d) for d in s) for s in e["shapes"]),
                                     str(e["dtype"]))
                if e["choice"] not in ("triton", "library"):
                    raise ValueError(f"choice {e['choice']!r}")
                entries[sig.key(str(e["device"]))] = dict(e)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"impl cache {p}: {exc}") from exc
        return cls(entries)

    def lookup(self, sig: HeavySignature, device: str) -> str | None:
        entry = self._entries.get(sig.key(device))
        return None if entry is None else str(entry["choice"])

    def record(self, sig: HeavySignature, device: str, triton_ms: float, library_ms: float) -> str:
        """Store a measurement (the faster choice wins; a tie keeps Triton) and return the choice."""
        choice = "library" if library_ms < triton_ms else "triton"
        self._entries[sig.key(device)] = {"op": sig.op, "shapes": [list(s) for s in sig.shapes], "dtype": sig.dtype,
                                          "device": device, "choice": choice, "triton_ms": triton_ms,
                                          "library_ms": library_ms}
        return choice

    def save(self, path: str | Path) -> None:
        doc = {"version": CACHE_VERSION, "entries": [self._entries[k] for k in sorted(self._entries)]}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(doc, indent=1) + "\n")


class ImplPolicy:
    """The seed's ``impl`` choice per heavy node (see the module docstring)."""

    def __init__(self, cache: ImplCache | None = None,
                 library_when_several: frozenset[str] = LIBRARY_WHEN_SEVERAL) -> None:
        self.cache = cache or ImplCache()
        # the families the heuristic sends to the library in a model holding several of them
        # (empty: every heavy node without a measurement starts in Triton)
        self.library_when_several = library_when_several
        # graph -> device -> defaults (graphs are the synthesizer's cached captures)
        self._memo: weakref.WeakKeyDictionary[torch.fx.GraphModule, dict[str, dict[str, str]]] = \
            weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def for_graph(self, gm: torch.fx.GraphModule, pshape: Callable[[str], tuple[int, ...]],
                  device: str) -> dict[str, str]:
        """``defaults`` of every conv / matmul of ``gm``, once per graph and device: finding
        them walks the whole graph (50 ms of a 0.09 s plan of an 824-node ResNet-50 graph,
        and a lowering plans several times)."""
        with self._lock:
            memo = self._memo.setdefault(gm, {})
            if device not in memo:
                memo[device] = self.defaults(heavy_nodes(gm, pshape), gm, device)
            return dict(memo[device])

    def defaults(self, heavy: Mapping[str, tuple[str, torch.fx.Node]], gm: torch.fx.GraphModule,
                 device: str) -> dict[str, str]:
        """Genome key ``impl.<node>`` -> ``triton`` / ``library`` for every heavy node
        (``library_impl.heavy_nodes``)."""
        count = Counter(family for family, _ in heavy.values())
        out: dict[str, str] = {}
        for key, (family, node) in heavy.items():
            measured = self.cache.lookup(signature(node, family, gm), device)
            if measured is not None:
                out[key] = measured
            else:
                several = family in self.library_when_several and count[family] >= 2
                out[key] = "library" if several else "triton"
        return out
