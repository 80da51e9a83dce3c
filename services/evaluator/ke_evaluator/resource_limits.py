"""Telling "ran out of memory inside our limits" apart from "the spec is broken".

A reference that fails to allocate inside the worker's own limits (RLIMIT_AS on the CPU,
the device's memory on CUDA) is a resource verdict: the spec is valid, this evaluator is
too small for it (``kernelevolve.errors.ResourceLimitError``). Any other exception of
the reference means the spec is at fault (``InvalidSpecError``).

Standard library only: used by the worker (where the exception is raised) and by the
judge (where a worker that died of it is read).
"""

from __future__ import annotations

import re

# Messages of allocation failures: torch's CPU allocator ("DefaultCPUAllocator: can't
# allocate memory: you tried to allocate 2147483648 bytes"), the CUDA caching allocator
# ("CUDA out of memory. Tried to allocate 2.00 GiB"), Python's MemoryError.
_PATTERNS = re.compile(r"can't allocate|cannot allocate memory|out of memory|MemoryError|OutOfMemoryError",
                       re.IGNORECASE)
_BYTES = re.compile(r"allocate (?:memory: you tried to allocate )?(\d+) bytes", re.IGNORECASE)
_SIZED = re.compile(r"tried to allocate ([\d.]+) ?([KMGT]i?B)", re.IGNORECASE)
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def is_memory_error(exc: BaseException) -> bool:
    """MemoryError, torch.OutOfMemoryError (by name: no torch import here) or a
    RuntimeError whose message is an allocator's failure."""
    names = {c.__name__ for c in type(exc).__mro__}
    if names & {"MemoryError", "OutOfMemoryError"}:
        return True
    return isinstance(exc, RuntimeError) and bool(_PATTERNS.search(str(exc)))


def looks_like_memory_failure(text: str) -> bool:
    """A dead worker's description (exit status and log tail) names an allocation failure
    or the out-of-memory killer's SIGKILL."""
    return bool(_PATTERNS.search(text)) or "SIGKILL" in text


def requested_bytes(message: str) -> int | None:
    """The size of the allocation that failed, when the message says it."""
    m = _BYTES.search(message)
    if m:
        return int(m.group(1))
    m = _SIZED.search(message)
    if m:
        return int(float(m.group(1)) * _UNITS[m.group(2)[0].upper()])
    return None


def gib(n: int | float) -> str:
    return f"{n / 2**30:.3g} GiB"


def describe(what: str, message: str, limit_bytes: int | None, limit_name: str, remedy: str) -> str:
    """One line: what failed, how much it asked for, what the limit is, what to do."""
    need = requested_bytes(message)
    asked = f"an allocation of {gib(need)} failed" if need else "an allocation failed"
    limit = f"the limit is {gib(limit_bytes)} of {limit_name}" if limit_bytes else f"the limit is the {limit_name}"
    first = message.strip().splitlines()[0][:200] if message.strip() else ""
    return (f"resource limit: {what} ran out of memory ({asked}; {limit}); the spec is not at fault: "
            f"{remedy} [{first}]")
