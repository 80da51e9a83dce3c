"""The worker's own sandbox: network, file system, resource limits, thread counts.

``isolate_network``, ``isolate_filesystem``, ``apply_rlimits`` and ``set_cpu_budget`` run
inside the worker before any candidate code (the scrubbed environment it starts with is
built by the parent: ``judge/worker_environment.py``). Stdlib only (the GPU machine has
only torch/triton/numpy).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import socket

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000


def isolate_network() -> str:
    """Cut the worker off the network. Returns the mode achieved (for the verdict evidence).

    ``unshare(CLONE_NEWNET)`` puts the process in an empty network namespace (loopback
    down): nothing can connect anywhere. It needs CAP_SYS_ADMIN (root) or, failing that,
    a user namespace. When neither works, ``socket.socket`` is replaced by a stub that
    raises; weaker (native code could still open sockets) but ctypes is banned statically.
    """
    libc_name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
        if libc.unshare(CLONE_NEWNET) == 0:
            return "netns"
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
            return "userns+netns"
    except (OSError, AttributeError):
        pass
    _block_sockets()
    return "socket-blocked"


def _block_sockets() -> None:
    class _NoSocket(socket.socket):
        def __init__(self, *args: object, **kwargs: object) -> None:
            raise PermissionError("network access is disabled in the evaluation sandbox")

    socket.socket = _NoSocket  # type: ignore[misc]

    def _refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError("network access is disabled in the evaluation sandbox")

    socket.create_connection = _refuse  # type: ignore[assignment]
    socket.getaddrinfo = _refuse  # type: ignore[assignment]


def apply_rlimits(*, address_space_bytes: int | None, file_size_bytes: int | None) -> dict[str, str]:
    """Memory and file-size limits. RLIMIT_AS is skipped on CUDA (the driver maps huge
    virtual ranges). RLIMIT_NPROC is not used: it counts the user's processes machine-wide
    and is ignored for root; thread/process creation is policed statically and at runtime."""
    applied: dict[str, str] = {}
    for name, limit, value in (
        ("address_space", resource.RLIMIT_AS, address_space_bytes),
        ("file_size", resource.RLIMIT_FSIZE, file_size_bytes),
    ):
        if value is None:
            continue
        try:
            _, hard = resource.getrlimit(limit)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(limit, (value, hard))
            applied[name] = str(value)
        except (ValueError, OSError) as exc:
            applied[name] = f"not applied: {exc}"
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfault must not write a core file
    except (ValueError, OSError):
        pass
    return applied


def set_cpu_budget(seconds: float) -> None:
    """Soft RLIMIT_CPU = CPU used so far + budget, so a reused worker gets a fresh budget per
    job. A backstop behind the parent's wall-clock timeouts (SIGXCPU ends the worker)."""
    try:
        used = resource.getrusage(resource.RUSAGE_SELF)
        so_far = int(used.ru_utime + used.ru_stime) + 1
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        soft = so_far + max(1, int(seconds))
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError):
        pass


def thread_count() -> int:
    """OS threads of this process (Python threads plus native pools)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x20, 0x1000, 0x4000, 0x40000
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 0x400, 0x800, 0x200000
_OPT_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC, "noatime": _MS_NOATIME,
              "nodiratime": _MS_NODIRATIME, "relatime": _MS_RELATIME}
# Kernel/virtual file systems: left as they are (devices must stay openable for CUDA).
_SKIP_PREFIXES = ("/proc", "/sys", "/dev")


def _mounts() -> list[tuple[str, int]]:
    """(mount point, per-mount flags) from /proc/self/mountinfo."""
    out: list[tuple[str, int]] = []
    with open("/proc/self/mountinfo", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 6:
                continue
            mp = parts[4].replace("\\040", " ")
            flags = 0
            for opt in parts[5].split(","):
                flags |= _OPT_FLAGS.get(opt, 0)
            out.append((mp, flags))
    return out


def isolate_filesystem(writable: list[str]) -> str:
    """Make every file system read-only for this process except ``writable`` directories.

    A private mount namespace (``unshare(CLONE_NEWNS)``, needs root) is a copy of the
    parent's mounts: remounting in it changes nothing outside the worker. The writable
    directories are bind-mounted onto themselves first so that they stay writable when
    the file system holding them becomes read-only. /proc, /sys and /dev are left alone.
    Returns the mode achieved, for the verdict evidence.
    """
    libc_name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
        libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
        if libc.unshare(CLONE_NEWNS) != 0:
            return "not isolated (no mount namespace)"
        if libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
            return "not isolated (cannot make mounts private)"
        keep = [os.path.realpath(w) for w in writable]
        for w in keep:
            if libc.mount(w.encode(), w.encode(), None, _MS_BIND | _MS_REC, None) != 0:
                return f"not isolated (cannot bind {os.path.basename(w)})"
        failed = 0
        for mp, flags in _mounts():
            if mp.startswith(_SKIP_PREFIXES) or any(mp == w or mp.startswith(w + "/") for w in keep):
                continue
            if libc.mount(None, mp.encode(), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | flags, None) != 0:
                failed += 1
        return "read-only except scratch" + (f" ({failed} mounts left writable)" if failed else "")
    except (OSError, AttributeError) as exc:
        return f"not isolated ({type(exc).__name__})"
