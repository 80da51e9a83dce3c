"""One kernel per distinct generated body.

Every family names its kernels, launcher, plan function and plan cache after the group
(``kernel_name``: ``<prefix>_<ops>_<gid>``; the launcher is ``launch_<name>``, the plan
cache ``_plans_<name>``) and its launcher's error messages after the group key
(``'g11: ...'``). A model with repeated layers (a residual network's blocks, an unrolled
recurrent layer's time steps) therefore generated one copy of the same kernel per layer:
a 100-layer residual network's seed held 630 ``@triton.jit`` functions and a bidirectional
LSTM 12,304, and Triton compiles each one separately (five such models ran past the
evaluator's 120 s compile phase before a single timing).

``share`` keeps the first group's source of every distinct body (kernel and launcher
source identical once the group's name and key are blanked and the kernel's locals, named
after graph nodes, numbered in order of appearance) and points every later
group with that body at the first group's launcher. The kept names are those of first
use in group order, so generated code stays deterministic, and a module with no repeated
body is unchanged. Sharing a launcher shares its plan cache: its key (input shapes,
strides, ``is_cuda`` where the plan reads it) already covers everything a plan is
computed from, since the plan function is the same code for every group that shares it
and the genome's constants are literals in that code.

Then, kernel by kernel: a ``@triton.jit`` function already emitted, up to its name and
locals, is emitted once and the launchers that call it call the first copy (two row
groups differ in their second pass but share their first; ``_welford_combine``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = "\x00name\x00"  # never occurs in generated source
_KEY = "\x00key\x00"
_LOCAL = re.compile(r"\bv_[A-Za-z0-9_]+\b")  # a kernel's value of a graph node
_JIT = re.compile(r"^(?=@triton\.jit$)", re.MULTILINE)
_DEF = re.compile(r"@triton\.jit\ndef (\w+)\(")


@dataclass(frozen=True)
class Generated:
    """One group's generated code: its key (``g<k>``), kernel source, launcher source and
    launcher name (``launch_<name>``)."""

    key: str
    kernel: str
    launcher: str
    launcher_name: str


@dataclass(frozen=True)
class Shared:
    """The module's distinct kernels and launchers, and the launcher each group calls."""

    kernels: list[str]
    launchers: list[str]
    launcher_of: dict[str, str]  # group key -> launcher name


def _renamed(text: str, name: str, placeholder: str) -> str:
    """``text`` with the identifier ``name`` (also as a part of ``_plans_<name>``,
    ``<name>_single``, ...) replaced; matched where no letter or digit precedes and no
    digit follows, so ``conv_conv_1`` is not found in ``conv_conv_10``."""
    return re.sub(r"(?<![A-Za-z0-9])" + re.escape(name) + r"(?![0-9])", placeholder, text)


def _numbered_locals(text: str) -> str:
    """Kernel locals are named after the graph's nodes (``v_addmm_1``): numbered in order of
    first appearance, two texts compare equal exactly when one is a renaming of the other."""
    order: dict[str, str] = {}
    return _LOCAL.sub(lambda m: order.setdefault(m.group(0), f"\x00v{len(order)}\x00"), text)


def _body(g: Generated) -> str:
    """The group's kernel and launcher source with its own name and key blanked."""
    name = g.launcher_name.removeprefix("launch_")
    text = _renamed(g.kernel + "\n\x01\n" + g.launcher, name, _NAME)
    return _numbered_locals(text.replace(f"'{g.key}:", f"'{_KEY}:"))


def share(generated: list[Generated]) -> Shared:
    """Each distinct body once, under its first group's names (``generated`` in group
    order); a family whose launcher is not ``launch_<kernel name>`` simply shares nothing."""
    first: dict[str, Generated] = {}
    launcher_of: dict[str, str] = {}
    kept: list[Generated] = []
    for g in generated:
        owner = first.setdefault(_body(g), g)
        if owner is g:
            kept.append(g)
        launcher_of[g.key] = owner.launcher_name
    kernels, launchers = _distinct_kernels(kept)
    return Shared(kernels, launchers, launcher_of)


def _distinct_kernels(kept: list[Generated]) -> tuple[list[str], list[str]]:
    """Groups whose launchers differ may still hold the same kernel (two row groups whose
    split-reduction first pass is the same code, a helper such as ``_welford_combine`` that
    each row group defines again): every ``@triton.jit`` block already emitted, up to its
    name and locals, is dropped and the group's launcher calls the first one. Text other
    than kernels is kept as it is; a kernel source left empty is dropped."""
    first: dict[str, str] = {}  # kernel body -> the name it is emitted under
    kernels: list[str] = []
    launchers: list[str] = []
    for g in kept:
        blocks: list[str] = []
        launcher = g.launcher
        for block in _JIT.split(g.kernel):
            m = _DEF.match(block)
            if m is None:  # not a kernel
                blocks.append(block)
                continue
            name = m.group(1)
            body = _numbered_locals(_renamed(block.strip(), name, _NAME))
            if body not in first:
                first[body] = name
                blocks.append(block)
            elif first[body] != name:  # the same kernel under another group's name
                owner = first[body]
                launcher = re.sub(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", owner, launcher)
        text = "".join(blocks)
        if text.strip():
            kernels.append(text)
        launchers.append(launcher)
    return kernels, launchers


def count_kernels(source: str) -> int:
    """``@triton.jit`` functions defined in a generated module (each is compiled apart)."""
    return len(re.findall(r"^@triton\.jit$", source, re.MULTILINE))
