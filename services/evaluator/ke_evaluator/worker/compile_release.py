"""Let go of the device lock while Triton compiles: compilation is CPU work.

A candidate's first call (and every new shape specialisation after it) compiles its
kernels inside ``JITFunction.run``: a second or more of CPU time per kernel (MLIR passes,
``ptxas``) during which this worker puts nothing on the GPU. Holding the SHARED device
lock through it kept every other worker's timing phase (EXCLUSIVE) waiting; released,
one worker compiles on the CPU while another times on the GPU.

Triton calls ``knobs.runtime.jit_cache_hook`` just before it compiles a kernel that is not
in its in-memory cache and ``jit_post_compile_hook`` after it (triton >= 3.4). The
release drains the device first (``DeviceLock.drain``): work queued earlier must not run
inside another worker's timed sample. The post-compile hook takes the lock back before control
returns to the candidate, so no candidate code runs unlocked. An EXCLUSIVE holder (a
compile during timing warm-up) keeps its lock. A compile that raises leaves the lock
released; the job then ends, which releases it anyway.

Worker side: triton only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..device_lock import DeviceLock


class CompileRelease:
    """The two hooks, bound to one worker's lock. ``released`` counts compiles done unlocked."""

    def __init__(self, lock: DeviceLock) -> None:
        self.lock = lock
        self.released = 0
        self._mine = False  # this compile released the lock and must take it back
        self.paused = False  # a dry run (precompile.py): candidate code runs between compiles

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """No release while a dry run submits compiles to a pool: each submission returns at
        once and the candidate's code goes on, which must not run unlocked."""
        self.paused = True
        try:
            yield
        finally:
            self.paused = False

    def before(self, **_: Any) -> None:
        self._mine = self.lock.mode == "shared" and not self.paused
        if self._mine:
            self.lock.release()
            self.released += 1
        return None  # falsy: Triton goes on and compiles

    def after(self, **_: Any) -> None:
        if self._mine and self.lock.mode is None:
            self.lock.acquire("shared")
        self._mine = False
        return None


def install(release: CompileRelease) -> str:
    """Set Triton's compile hooks; returns what was done (for the sandbox report)."""
    try:
        from triton import knobs
    except ImportError:
        return "unavailable: triton.knobs missing (triton < 3.4): the lock is held while compiling"
    rt = knobs.runtime
    if not hasattr(rt, "jit_cache_hook") or not hasattr(rt, "jit_post_compile_hook"):
        return "unavailable: no jit compile hooks in this triton: the lock is held while compiling"
    rt.jit_cache_hook = release.before
    rt.jit_post_compile_hook = release.after
    return "released while Triton compiles"
