"""Advisory file locks (`fcntl.flock`) shared by the caches and the run directory, and
`StopRequest`, which turns a training's SIGINT/SIGTERM into a flag it checks, and
`signals_held`, which delivers them after a step that must not be cut.

A flock belongs to the open file, so it disappears with the process that holds
it: a crash or `kill -9` never leaves a stale lock behind. The lock files are
never deleted (deleting them would let two processes lock two different files).
Locks are re-entrant within one thread: `nmt train` holds the run lock around
training and the final evaluation, and `train()` may take it again inside. Another
thread of the same process waits as another process would (a flock is per process, so
a thread lock per path stands in front of it).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from nmt.core.errors import Interrupted, NMTError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking
    fcntl = None

_GUARD = threading.Lock()  # guards _THREADS
_THREADS: dict[str, threading.RLock] = {}  # resolved path -> the thread lock in front of it
_HELD: set[str] = set()  # resolved paths this process holds (its thread lock says which thread)


@contextmanager
def file_lock(path: Path | str, busy: str | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the `with` block.

    Waits for another holder, unless `busy` is given: then it raises
    `NMTError(busy.format(pid=...))` at once. The holder writes its pid into the file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = str(path.resolve())
    with _GUARD:
        thread_lock = _THREADS.setdefault(key, threading.RLock())
    if not thread_lock.acquire(blocking=busy is None):  # another thread of ours holds it
        raise NMTError(busy.format(pid=os.getpid()))
    try:
        if key in _HELD:  # re-entrant: this thread holds it already, the outer block frees it
            yield
            return
        with _flock(path, busy):
            _HELD.add(key)
            try:
                yield
            finally:
                _HELD.discard(key)
    finally:
        thread_lock.release()


@contextmanager
def _flock(path: Path, busy: str | None) -> Iterator[None]:
    """The flock itself, held by this process (file_lock stands the thread lock before it)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if busy is None else fcntl.LOCK_NB))
            except BlockingIOError:
                raise NMTError(busy.format(pid=_holder(fd))) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the file releases the flock


def _holder(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode().strip() or "?"
    except OSError:
        return "?"


def run_lock(run_dir: Path | str) -> AbstractContextManager[None]:
    """Hold `<run_dir>/.lock` for a training run's lifetime; a second run refuses at once."""
    return file_lock(Path(run_dir) / ".lock",
                     busy=f"{run_dir} is in use by another `nmt train` (pid {{pid}}); wait for "
                          "it to finish or pick another name with --set name=...")


STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))  # SIGHUP: not on Windows


class StopRequest:
    """Turns SIGINT/SIGTERM/SIGHUP into a flag the loop checks between steps."""

    def __init__(self):
        self.signal, self.signum = None, signal.SIGINT

    def __enter__(self):
        self.old = {s: signal.signal(s, self._handle) for s in STOP_SIGNALS}
        if Interrupted.pending is not None:  # a stop raised earlier that something swallowed
            self._handle(Interrupted.pending.signum, None)
            Interrupted.pending = None
        return self

    def _handle(self, signum, frame):
        self.signal, self.signum = signal.Signals(signum).name, signum

    def __exit__(self, *exc):
        for s, handler in self.old.items():
            signal.signal(s, handler)


@contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP that arrive inside are delivered on leaving, so a step that
    must not be cut in two (a worker process's launch: cut, the child reads half its start-up
    data and dies with a traceback) finishes first. Outside the main thread, where handlers
    cannot be set, it holds nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stop = StopRequest().__enter__()
    try:
        yield
    finally:
        stop.__exit__()
        if stop.signal:
            signal.raise_signal(stop.signum)

