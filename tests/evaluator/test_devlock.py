"""The device reader/writer lock (device_lock.py) across processes: shared with shared,
exclusive alone, writers not starved by readers, released when its holder dies."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ke_evaluator.device_lock import DeviceLock, create_files

# A holder process: takes the lock in the given mode, says "held", releases on any input
# line, says "released". Blocks (without saying "held") while the lock is taken.
_HOLDER = """
import sys
from ke_evaluator.device_lock import DeviceLock
lock = DeviceLock(sys.argv[1], on_wait=lambda mode: print("waiting", flush=True))
lock.acquire(sys.argv[2])
print("held", flush=True)
sys.stdin.readline()
lock.release()
print("released", flush=True)
"""


class Holder:
    def __init__(self, directory: str, mode: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _HOLDER, directory, mode], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def expect(self, word: str) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        assert line == word, f"expected {word!r}, got {line!r}"

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        self.expect("released")
        self.proc.wait(timeout=10)


@pytest.fixture
def lock_dir(tmp_path) -> str:  # noqa: ANN001
    return create_files(str(tmp_path))


def can_take(directory: str, mode: str) -> bool:
    probe = DeviceLock(directory)
    try:
        return probe.try_acquire(mode)  # type: ignore[arg-type]
    finally:
        probe.close()


@contextmanager
def holding(directory: str, mode: str) -> Iterator[Holder]:
    h = Holder(directory, mode)
    try:
        h.expect("held")
        yield h
    finally:
        if h.proc.poll() is None:
            h.proc.kill()
            h.proc.wait(timeout=10)


def test_exclusive_excludes_shared_and_shared_admits_shared(lock_dir: str) -> None:
    me = DeviceLock(lock_dir)
    with holding(lock_dir, "exclusive") as writer:
        assert not me.try_acquire("shared")
        assert not me.try_acquire("exclusive")
        writer.release()
    assert me.try_acquire("shared")
    with holding(lock_dir, "shared") as reader:  # a second reader gets in beside us
        assert not can_take(lock_dir, "exclusive")
        reader.release()
    me.release()
    assert me.try_acquire("exclusive")
    me.close()


def test_waiting_writer_holds_off_new_readers(lock_dir: str) -> None:
    with holding(lock_dir, "shared") as reader:
        writer = Holder(lock_dir, "exclusive")
        writer.expect("waiting")  # blocked by the reader, holding the gate
        assert not can_take(lock_dir, "shared")  # a new reader may not overtake it
        reader.release()
        writer.expect("held")
        assert not can_take(lock_dir, "shared")
        writer.release()
    assert can_take(lock_dir, "shared")


def test_lock_dies_with_its_holder_and_waits_are_counted(lock_dir: str) -> None:
    waits: list[str] = []
    me = DeviceLock(lock_dir, on_wait=waits.append)
    with holding(lock_dir, "exclusive") as writer:
        writer.proc.kill()  # killed on timeout: the kernel drops its lock
        writer.proc.wait(timeout=10)
        me.acquire("exclusive")
    assert me.mode == "exclusive"
    me.release()
    assert len(me.held) == 1 and me.held[0][0] == "exclusive" and me.held[0][1] <= me.held[0][2]
    assert set(me.waited) == {"exclusive"}
    me.close()


def test_reader_steps_aside_for_a_waiting_writer(lock_dir: str) -> None:
    import threading

    me = DeviceLock(lock_dir)
    me.acquire("shared")
    assert not me.writer_waiting()
    assert me.step_aside() == 0.0 and me.mode == "shared" and me.held == []  # nobody waits: kept
    writer = Holder(lock_dir, "exclusive")
    try:
        writer.expect("waiting")
        assert me.writer_waiting()
        stepped = threading.Thread(target=me.step_aside)
        stepped.start()
        writer.expect("held")  # it got in while our check phase was between two steps
        assert stepped.is_alive()  # and we queue behind it
        writer.release()
        stepped.join(timeout=10)
        assert not stepped.is_alive() and me.mode == "shared"
        assert [m for m, _, _ in me.held] == ["shared"] and me.waited["shared"] > 0
    finally:
        if writer.proc.poll() is None:
            writer.proc.kill()
            writer.proc.wait(timeout=10)
    me.close()


def test_compile_hooks_release_shared_and_keep_exclusive(lock_dir: str) -> None:
    from ke_evaluator.worker.compile_release import CompileRelease, install

    me = DeviceLock(lock_dir)
    release = CompileRelease(me)
    me.acquire("shared")
    assert release.before(key="k") is None  # falsy: Triton compiles
    assert me.mode is None and can_take(lock_dir, "exclusive")  # another worker may time now
    release.after(key="k")
    assert me.mode == "shared" and release.released == 1
    me.acquire("exclusive")  # a compile during timing warm-up keeps the device
    release.before()
    assert me.mode == "exclusive" and not can_take(lock_dir, "shared")
    release.after()
    assert me.mode == "exclusive" and release.released == 1
    me.release()
    me.acquire("shared")
    release.before()  # a compile that raises never calls after(): the next one starts clean
    me.acquire("exclusive")
    release.before()
    release.after()
    assert me.mode == "exclusive"
    me.close()

    from triton import knobs

    saved = (knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook)
    try:
        assert install(release) == "released while Triton compiles"
        assert knobs.runtime.jit_cache_hook == release.before
        assert knobs.runtime.jit_post_compile_hook == release.after
    finally:
        knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook = saved


def test_every_release_drains_first(lock_dir: str) -> None:
    """Work a holder queued finishes before anyone else may time: the drain runs on every
    release (plain, mode switch, step aside), and a failing drain still lets the lock go."""
    import threading

    drained: list[str | None] = []
    me = DeviceLock(lock_dir)
    me.drain = lambda: drained.append(me.mode)
    me.acquire("shared")
    me.acquire("exclusive")  # a mode switch releases first
    me.release()
    me.release()  # nothing held: nothing to drain
    assert drained == ["shared", "exclusive"]
    me.acquire("shared")
    writer = Holder(lock_dir, "exclusive")
    try:
        writer.expect("waiting")
        stepped = threading.Thread(target=me.step_aside)
        stepped.start()
        writer.expect("held")
        writer.release()
        stepped.join(timeout=10)
    finally:
        if writer.proc.poll() is None:
            writer.proc.kill()
            writer.proc.wait(timeout=10)
    assert drained == ["shared", "exclusive", "shared"] and me.mode == "shared"

    def broken() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    me.drain = broken
    me.release()
    assert me.mode is None and can_take(lock_dir, "exclusive")
    me.close()


def test_a_dry_run_keeps_the_lock_while_candidate_code_runs(lock_dir: str) -> None:
    """precompile.py's dry run: compiles submitted to a pool return at once and candidate
    code goes on, so the per-compile release is paused; the lock is let go only around the
    wait for the pool (``Evaluator._unlocked``), and is SHARED again after."""
    from ke_evaluator.worker.compile_release import CompileRelease

    me = DeviceLock(lock_dir)
    release = CompileRelease(me)
    me.acquire("shared")
    with release.pause():
        assert release.before(key="k") is None  # Triton compiles (submits) ...
        assert me.mode == "shared" and not can_take(lock_dir, "exclusive")  # ... and the lock stays
        release.after(key="k")  # the pool's finalisation: nothing to take back
        assert me.mode == "shared"
    assert release.released == 0
    assert release.before(key="k2") is None  # after the dry run, compiles release as before
    assert me.mode is None
    release.after(key="k2")
    assert me.mode == "shared" and release.released == 1
    me.close()
