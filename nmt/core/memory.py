"""This process's memory as the operating system counts it (resident set size)."""

from __future__ import annotations

import ctypes
import os
import sys

try:
    import resource
except ImportError:  # pragma: no cover - not POSIX (Windows): no getrusage
    resource = None


def rss_mib() -> float | None:
    """The resident set size now, in MiB: /proc/self/statm on Linux; None where the
    system does not say (the peak, `peak_rss_mib`, is known on every POSIX system)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            resident = int(handle.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float | None:
    """The largest resident set size this process has had, in MiB (getrusage's
    ru_maxrss counts KiB on Linux and bytes on macOS); None where there is no getrusage."""
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def release_free_memory() -> bool:
    """Hand the allocator's free pages back to the system (glibc's malloc_trim(0)): a
    process whose tensors change shape every step leaves freed blocks scattered through
    its heaps, which RSS keeps counting until they are trimmed. False where there is no
    glibc. Measured: docs/experiments/2026-12-03-precision.md ("The allocator")."""
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    return bool(_LIBC) and bool(_LIBC.malloc_trim(0))


_LIBC = None
