"""Repeated steps of the forward as a Python loop.

The dispatcher-level trace unrolls a recurrent layer's time loop: per step the forward
reads the step's input projection, launches the hidden projection and the gates, and
passes the new state to the next step, ``T`` copies of the same statements. With shared
kernels (``kernel_sharing``) the copies launch the same launchers, so the forward's
source is the only thing left that grows with ``T`` (43,000 lines for a 4-layer
bidirectional LSTM at T = 32). ``roll`` finds runs of at least ``MIN_STEPS`` consecutive
blocks of statements that are the same code up to the names of forward locals, and whose
data flow is a loop's:

- a name the block defines is a loop local (the first step's name is used in the loop);
- a name read before the block defines it at the same place is *carried*: the first step
  reads a value from before the run (assigned to the local before the loop), later steps
  the previous step's value;
- a name every step reads is loop-invariant;
- a name that step ``i`` reads and that was bound before the run as ``B[c + i]`` (the
  ``unbind`` of all steps' input projections) is read as ``B[c + _step]`` in the loop
  (and its ``unbind`` item line dropped when nothing else reads it);
- an integer literal is the same in every step, or ``c + i`` (``c - i``) in step ``i``:
  a hand-written loop over time steps reads ``x[:, t]``, which the shape-specialised
  trace writes ``x[(slice(None, None, None), 3)]``; the loop writes ``(c + _step)``. Only
  in a run that carries a state (a recurrence): consecutive items of one tuple
  (``t_chunk[0]``, ``t_chunk[1]``, ...) stay as they are.

Values of the last step read after the run are aliased after the loop; values of every
step (the per-step outputs a later ``stack`` collects) are appended to a list in the
loop, and a later statement naming them all in order reads ``*list`` instead. Anything
else (a step reading an older step's value, a middle step's value read alone) leaves the
run unrolled: the rolled forward computes exactly what the unrolled one does, statement
for statement, and every launch is still ``kernel[grid](...)`` inside its launcher.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_STEPS = 3  # shorter runs stay unrolled: a loop saves nothing there
MAX_BLOCK = 64  # statements per step searched for
_TOKEN = re.compile(r"\bt_\w+\b")
# an integer literal: not part of a name, a float, an exponent or a string ('3' of
# ``self._modules['3']`` names a submodule: the strings alternative matches it whole)
_NUMBER = re.compile(r"'[^']*'|\"[^\"]*\"|(?<![\w.\x00])(?<![eE][-+])(\d+)(?![\w.])")
_ITEM = re.compile(r"^(t_\w+) = (t_\w+)\[(\d+)\]$")


@dataclass(frozen=True)
class _Line:
    code: str
    template: str
    defs: tuple[str, ...]
    reads: tuple[str, ...]  # every token after the assignment, in order, repeats kept
    numbers: tuple[int, ...] = ()  # the integer literals after the assignment, in order


def _parse(code: str) -> _Line:
    lhs, sep, rhs = code.partition(" = ")
    if not sep or "\n" in code or not all(_TOKEN.fullmatch(p.strip()) for p in lhs.split(",")):
        return _Line(code, "\x01" + code, (), tuple(_TOKEN.findall(code)))  # never rolled
    rhs_t = _TOKEN.sub("\x00", rhs)
    template = _TOKEN.sub("\x00", lhs) + " = " + _NUMBER.sub(lambda m: "\x02" if m.group(1) else m.group(0), rhs_t)
    return _Line(code, template, tuple(p.strip() for p in lhs.split(",")), tuple(_TOKEN.findall(rhs)),
                 tuple(int(m.group(1)) for m in _NUMBER.finditer(rhs_t) if m.group(1)))


@dataclass
class _Run:
    start: int
    size: int  # statements per step
    steps: int
    init: dict[str, str]  # loop local -> value before the run (carried values)
    indexed: dict[tuple[int, int], tuple[str, int, int]]  # (line, read) -> (base, offset, +-1)
    carried: dict[tuple[int, int], str]  # (line, read) -> the loop local it reads
    numbers: dict[tuple[int, int], tuple[int, int]]  # (line, literal) -> (first step's value, +-1) or (value, 0)


def roll(codes: list[str]) -> list[str]:
    """The forward's statements with every loop-shaped run of repeated steps as a loop."""
    codes = list(codes)
    lines = [_parse(c) for c in codes]
    defined_at = {d: i for i, ln in enumerate(lines) for d in ln.defs}
    items = {m.group(1): (m.group(2), int(m.group(3))) for c in codes if (m := _ITEM.match(c))}
    rolled: list[tuple[int, int, list[str]]] = []  # (first statement, statements replaced, loop)
    i = 0
    while i < len(lines):
        run, covered = _find(lines, i, defined_at, items)
        if run is None:
            i += max(1, covered)
            continue
        rolled.append((i, run.size * run.steps, _emit(lines, run, len(rolled), codes)))
        i = run.start + run.size * run.steps
        lines[i:] = [_parse(c) for c in codes[i:]]  # _emit may have rewritten later statements
    if not rolled:
        return codes
    out: list[str] = []
    pos = 0
    for start, count, loop in rolled:
        out += codes[pos:start] + loop
        pos = start + count
    out += codes[pos:]
    return _drop_unread_items(out)


def _find(lines: list[_Line], s: int, defined_at: dict[str, int],
          items: dict[str, tuple[str, int]]) -> tuple[_Run | None, int]:
    """The longest loop-shaped run starting at statement ``s``, and how many statements
    repeated runs starting there cover (skipped when none has a loop's data flow: the
    same steps seen from a later statement would fail the same way, and trying each one
    costs time quadratic in the steps)."""
    best: _Run | None = None
    covered = 0
    for size in range(1, MAX_BLOCK + 1):
        steps = 1
        while s + (steps + 1) * size <= len(lines) and all(
                lines[s + steps * size + j].template == lines[s + j].template for j in range(size)):
            steps += 1
        if steps < MIN_STEPS:
            continue
        covered = max(covered, size * steps)
        run = _dataflow(lines, s, size, steps, defined_at, items)
        if run is not None and (best is None or size * steps > best.size * best.steps):
            best = run
    return best, covered


def _dataflow(lines: list[_Line], s: int, size: int, steps: int, defined_at: dict[str, int],
              items: dict[str, tuple[str, int]]) -> _Run | None:
    """The run's loop form, or None when its data flow is not a loop's."""
    # position (line in step, def index) of every name the run defines, per step
    pos: dict[str, tuple[int, int, int]] = {}
    for k in range(steps):
        for j in range(size):
            for q, d in enumerate(lines[s + k * size + j].defs):
                pos[d] = (k, j, q)
    init: dict[str, str] = {}
    indexed: dict[tuple[int, int], tuple[str, int, int]] = {}
    carried: dict[tuple[int, int], str] = {}
    numbers: dict[tuple[int, int], tuple[int, int]] = {}
    for j in range(size):
        first = lines[s + j]
        if any(len(lines[s + k * size + j].defs) != len(first.defs) or
               len(lines[s + k * size + j].reads) != len(first.reads) for k in range(steps)):
            return None
        for q, v0 in enumerate(first.numbers):
            values = [lines[s + k * size + j].numbers[q] for k in range(steps)]
            sign = next((d for d in (0, 1, -1) if all(v == v0 + d * k for k, v in enumerate(values))), None)
            if sign is None:
                return None
            numbers[(j, q)] = (v0, sign)
        for r, name0 in enumerate(first.reads):
            names = [lines[s + k * size + j].reads[r] for k in range(steps)]
            where = [pos.get(nm) for nm in names]
            if all(w is not None and w[0] == k and w[1] < j for k, w in enumerate(where)) and \
                    len({w[1:] for w in where if w is not None}) == 1:
                continue  # a local of the same step, defined on an earlier line
            if where[0] is None and all(w is not None and w[0] == k - 1 and w[1] >= j
                                        for k, w in enumerate(where) if k > 0) \
                    and len({w[1:] for w in where[1:] if w is not None}) == 1:
                local = lines[s + where[1][1]].defs[where[1][2]]  # type: ignore[index]
                if init.setdefault(local, name0) != name0:
                    return None
                carried[(j, r)] = local
                continue  # carried from the previous step
            if all(w is None for w in where) and len(set(names)) == 1:
                continue  # loop-invariant
            if all(w is None for w in where) and all(nm in items for nm in names):
                base, off = items[names[0]]
                for sign in (1, -1):  # a reverse direction reads the steps backwards
                    if all(items[nm] == (base, off + sign * k) for k, nm in enumerate(names)) \
                            and defined_at.get(base, -1) < s:
                        indexed[(j, r)] = (base, off, sign)
                        break
                else:
                    return None
                continue
            return None
    if not carried and any(sign for _, sign in numbers.values()):
        return None  # literals that count the steps but no state carried: items of one tuple, not a recurrence
    return _Run(s, size, steps, init, indexed, carried, numbers)


def _emit(lines: list[_Line], run: _Run, n_loop: int, codes: list[str]) -> list[str]:
    """The run as a loop; statements after it that list every step's value are rewritten
    in ``codes`` to read the loop's list."""
    s, size, steps = run.start, run.size, run.steps
    end = s + size * steps
    step = f"_step{n_loop}" if n_loop else "_step"  # loops follow each other: one name each is clearer
    later = [_TOKEN.findall(c) for c in codes[end:]]
    read_later = {t for toks in later for t in toks}
    out = [f"# {size * steps} statements: {steps} steps of the same {size} statements, as a loop"]
    for local, value in run.init.items():
        out.append(f"{local} = {value}")
    # per position: every step's def read after the run -> a list; the last step's -> an alias
    lists: dict[tuple[int, int], str] = {}
    aliases: list[str] = []
    for j in range(size):
        for q, d0 in enumerate(lines[s + j].defs):
            per_step = [lines[s + k * size + j].defs[q] for k in range(steps)]
            if any(d in read_later for d in per_step[:-1]):
                lists[(j, q)] = f"{d0}_steps"
                out.append(f"{d0}_steps = []")
            if per_step[-1] in read_later and per_step[-1] != d0:
                aliases.append(f"{per_step[-1]} = {d0}")
    out.append(f"for {step} in range({steps}):")
    for j in range(size):
        ln = lines[s + j]
        names = list(ln.defs)
        for r, name0 in enumerate(ln.reads):
            if (j, r) in run.indexed:
                base, off, sign = run.indexed[(j, r)]
                names.append(f"{base}[{off} - {step}]" if sign < 0 else f"{base}[{step} + {off}]" if off
                             else f"{base}[{step}]")
            else:
                names.append(run.carried.get((j, r), name0))
        pieces = ln.template.split("\x00")
        code = pieces[0] + "".join(nm + piece for nm, piece in zip(names, pieces[1:], strict=True))
        chunks = code.split("\x02")
        literals = [_literal(*run.numbers[(j, q)], step) for q in range(len(ln.numbers))]
        out.append("    " + chunks[0] + "".join(lit + c for lit, c in zip(literals, chunks[1:], strict=True)))
        for q, d0 in enumerate(ln.defs):
            if (j, q) in lists:
                out.append(f"    {lists[(j, q)]}.append({d0})")
    out += aliases
    # later statements that name every step's value in order read the list instead
    for (j, q), lst in lists.items():
        per_step = [lines[s + k * size + j].defs[q] for k in range(steps)]
        seq = ", ".join(per_step)
        whole = re.compile(r"(?<!\w)" + re.escape(seq) + r"(?!\w)")  # not the start of t_mul_41 for t_mul_4
        fixed = False
        for c in range(end, len(codes)):
            if whole.search(codes[c]):
                codes[c] = whole.sub(f"*{lst}", codes[c])
                fixed = True
        if not fixed or any(re.search(rf"\b{d}\b", codes[c]) for d in per_step[:-1] for c in range(end, len(codes))):
            out.append(f"{seq} = {lst}")  # read one by one
    return out


def _literal(first: int, sign: int, step: str) -> str:
    """An integer literal of the loop body: the same in every step, or the step's own."""
    if sign == 0:
        return str(first)
    if sign > 0:
        return f"({step} + {first})" if first else step
    return f"({first} - {step})"


def _drop_unread_items(codes: list[str]) -> list[str]:
    """``X = B[i]`` lines whose ``X`` nothing reads any more (the loop reads ``B[...]``)."""
    reads: dict[str, int] = {}
    for c in codes:
        lhs, sep, rhs = c.partition(" = ")
        for t in _TOKEN.findall(rhs if sep else c):
            reads[t] = reads.get(t, 0) + 1
    return [c for c in codes if not ((m := _ITEM.match(c)) and m.group(1) not in reads)]
