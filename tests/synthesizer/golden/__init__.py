"""Golden kernels: the offline synthesizer's generated source for every example spec
(``examples/ops`` and ``examples/styles``), its seed and one single-knob variant per knob,
checked into ``tests/synthesizer/golden/kernels/<suite>/<spec>/``: ``seed.py.txt`` is the
default genome's module in full, ``<knob key>=<value>.diff`` the unified diff from the seed
to that variant (full variant files were 118 MB for about 2,900 lowerings; seeds plus
diffs are about 12 MB). A change to the synthesizer that changes generated code shows up
as a reviewable diff of these files; a pure refactor shows none.

Regenerate after an intended change (and review the diff before committing):

    python -m tests.synthesizer.golden --update

``python -m tests.synthesizer.golden`` (no flag) only compares and prints the first
differences; ``--spec NAME`` restricts either to one spec.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.space import MIXED

ROOT = Path(__file__).resolve().parents[3]
GOLDEN_DIR = Path(__file__).resolve().parent / "kernels"
SUITES = {"ops": ROOT / "examples" / "ops", "styles": ROOT / "examples" / "styles"}
# not ``.py``: the files are generated output, not project code for linters and the
# duplicate finder to read
SEED = "seed.py.txt"
SUFFIX = ".diff"
REGENERATE = "python -m tests.synthesizer.golden --update"
_UNSAFE = re.compile(r"[^A-Za-z0-9._=-]")


@dataclass(frozen=True)
class Spec:
    suite: str  # "ops" or "styles"
    name: str

    @property
    def source(self) -> str:
        return (SUITES[self.suite] / f"{self.name}.py").read_text()

    @property
    def folder(self) -> Path:
        return GOLDEN_DIR / self.suite / self.name


def specs() -> list[Spec]:
    """Every example spec, in a fixed order."""
    return [Spec(suite, p.stem) for suite, d in SUITES.items() for p in sorted(d.glob("*.py"))]


def file_name(key: str, value: str) -> str:
    """A filesystem-safe file name of one variant (``g0.BLOCK_SIZE=256``): characters other
    than letters, digits, ``._=-`` become ``_``."""
    return _UNSAFE.sub("_", f"{key}={value}") + SUFFIX


def variants(synth: OfflineSynthesizer, spec: Spec) -> list[tuple[str, dict[str, str]]]:
    """(file name, genome) of the seed (default genome) and of one variant per knob: the
    knob at its first choice other than the default, every other knob at its default."""
    src = spec.source
    out: list[tuple[str, dict[str, str]]] = [(SEED, {})]
    if not synth.space(src, spec.name):
        return out
    _, full, _ = synth.lower(synth.captured(src, spec.name), {})
    for key, choices in synth.space(src, spec.name):
        default = full.get(key, choices[0])
        # a family-wide move's "mixed" is a state, never a choice (space.MIXED)
        other = next((c for c in choices if c not in (default, MIXED)), None)
        if other is not None:
            out.append((file_name(key, other), {key: other}))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):  # two keys sanitised to one name: never silently overwrite
        raise ValueError(f"{spec.name}: golden file names collide: {sorted(names)}")
    return out


def generate(synth: OfflineSynthesizer, spec: Spec) -> Iterator[tuple[str, str]]:
    """(file name, file text) of ``spec``'s seed (the module) and variants (their diffs
    from the seed)."""
    captured = synth.captured(spec.source, spec.name)
    seed = ""
    for name, genome in variants(synth, spec):
        source, _, _ = synth.lower(captured, genome)
        if name == SEED:
            seed = source
            yield name, source
        else:
            yield name, variant_diff(seed, source, name)


def variant_diff(seed: str, source: str, name: str) -> str:
    """The unified diff (3 lines of context) from the seed's module to a variant's."""
    lines = difflib.unified_diff(seed.splitlines(keepends=True), source.splitlines(keepends=True),
                                 SEED, name.removesuffix(SUFFIX) + ".py")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")


def apply_diff(seed: str, diff: str) -> str:
    """The variant's module: ``diff`` (as ``variant_diff`` wrote it) applied to ``seed``."""
    old = seed.splitlines(keepends=True)
    out: list[str] = []
    at = 0
    lines = diff.splitlines(keepends=True)[2:]  # after the ---/+++ header
    for i, line in enumerate(lines):
        m = _HUNK.match(line)
        if m:
            start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
            out += old[at:start]
            at = start
            continue
        if line.startswith("\\"):  # "\ No newline at end of file" belongs to the line before
            continue
        text = line[1:]
        if i + 1 < len(lines) and lines[i + 1].startswith("\\"):
            text = text.removesuffix("\n")
        if line[0] != "+":
            at += 1
        if line[0] != "-":
            out.append(text)
    return "".join(out + old[at:])


def compare(spec: Spec, files: list[tuple[str, str]], context: int = 3, limit: int = 60) -> list[str]:
    """One readable report per generated file that differs from the checked-in one (a
    unified diff of the module, its first ``limit`` lines, and how to regenerate); empty
    when all match."""
    reports: list[str] = []
    expected_seed = (spec.folder / SEED).read_text() if (spec.folder / SEED).exists() else None
    seed = files[0][1]
    for name, text in files:
        path = spec.folder / name
        where = str(path.relative_to(ROOT))
        if expected_seed is None or not path.exists():
            reports.append(f"{where}: missing golden file (regenerate: {REGENERATE})")
            continue
        if name == SEED:
            expected, actual = expected_seed, text
        else:
            if path.read_text() == text:
                continue
            # compare modules, not diffs: the report shows the code that changed
            expected, actual = apply_diff(expected_seed, path.read_text()), apply_diff(seed, text)
        if expected == actual:
            continue
        diff = list(difflib.unified_diff(expected.splitlines(), actual.splitlines(), f"{where} (golden)",
                                         "generated now", n=context, lineterm=""))
        more = f"\n... ({len(diff) - limit} more diff lines)" if len(diff) > limit else ""
        reports.append("\n".join(diff[:limit]) + more)
    if reports:
        reports.append(f"If this change is intended, regenerate with `{REGENERATE}` and commit the reviewed diff.")
    return reports


def write(spec: Spec, files: list[tuple[str, str]]) -> None:
    """Replace ``spec``'s golden folder by ``files``."""
    spec.folder.mkdir(parents=True, exist_ok=True)
    keep = {name for name, _ in files}
    for old in spec.folder.iterdir():
        if old.name not in keep:
            old.unlink()
    for name, text in files:
        (spec.folder / name).write_text(text)
