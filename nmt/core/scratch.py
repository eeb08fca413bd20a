"""Temporary files and folders that belong to a live process, the sweep that removes those
whose process died, and the one-step swap of a folder (docs/data.md, "Safe to kill").

A scratch path is `.NAME.tmp-TOKEN` beside the NAME it will become. Its owner first
creates `.NAME.tmp-TOKEN.owner` and holds a flock on it for as long as the path lives; it
removes the path before the owner file. A flock disappears with its process however the
process ends (SIGKILL included), and unlike a pid it cannot be inherited by a stranger
that reuses the number, so "the owner file can be locked" means "the owner is dead", and
a scratch path without an owner file was never or is no longer owned. `sweep` removes what
dead owners left and returns what live ones still hold.

No liveness check races a writer starting up: a sweep deletes a dead owner's file (and its
path) only while it holds that file's flock itself, and a writer, once it holds its flock,
checks that its file is still the one linked at its name; one swept in between (created,
not yet locked) is given up for a fresh name. `replace_file` writes one file this way.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

OWNER = ".owner"


@contextmanager
def scratch(target: Path, folder: bool = True) -> Iterator[Path]:
    """A fresh path beside `target` (an empty folder, or a file name when not `folder`),
    owned by this process until the block ends; removed then, whatever happened, unless
    the block renamed it (into `target`'s place)."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, path, owner = _own(target)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        if folder:
            path.mkdir()
        yield path
    finally:
        remove(path)
        owner.unlink(missing_ok=True)
        os.close(fd)


def _starting(owner: Path) -> None:
    """Called between creating an owner file and locking it (a test widens that window)."""


def _own(target: Path) -> tuple[int, Path, Path]:
    """A new scratch name beside `target` and the fd holding the flock of its owner file,
    that file still linked at its name (a sweep may have taken it before the flock)."""
    while True:
        path = target.with_name(f".{target.name}.tmp-{secrets.token_hex(4)}")
        owner = path.with_name(path.name + OWNER)
        try:
            fd = os.open(owner, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        try:
            _starting(owner)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _linked(fd, owner):
                return fd, path, owner
        except BaseException:
            os.close(fd)
            owner.unlink(missing_ok=True)
            raise
        os.close(fd)  # swept while unlocked: its name may be gone or another's


def _linked(fd: int, name: Path) -> bool:
    """Whether the open file `fd` is the one linked at `name`."""
    try:
        there = os.stat(name, follow_symlinks=False)
    except OSError:
        return False
    here = os.fstat(fd)
    return (here.st_ino, here.st_dev) == (there.st_ino, there.st_dev)


def replace_file(path: Path, write: Any) -> None:
    """Write `path` whole or not at all: `write(handle)` fills a scratch file beside it
    (binary), which is fsynced and renamed over `path`. A writer killed part-way leaves the
    previous file, and a scratch file that the next `replace_file` of `path` sweeps."""
    path = Path(path)
    sweep(path.parent, glob.escape(path.name))
    with scratch(path, folder=False) as tmp:
        with open(tmp, "xb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


def remove(path: Path) -> None:
    """Delete a file or folder tree if it is there (a symlink itself, not its target)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            shutil.rmtree(path, ignore_errors=True)


def _probe(owner: Path) -> tuple[str, int | None]:
    """("alive", None) while a live process holds the flock of `owner`; ("dead", fd) with
    `fd` holding that flock, the file still linked at `owner`, for the caller to delete
    and close; ("gone", None) when no file is there (or it changed meanwhile)."""
    try:
        fd = os.open(owner, os.O_RDWR)
    except OSError:
        return "gone", None
    if fcntl is None:  # pragma: no cover - without flocks nothing is known to be dead
        os.close(fd)
        return "alive", None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return "alive", None
    if _linked(fd, owner):
        return "dead", fd
    os.close(fd)  # releases the lock this process took
    return "gone", None


def sweep(parent: Path, name: str = "*", dry_run: bool = False) -> tuple[list[Path], list[Path]]:
    """Remove the scratch paths of `name` (a glob) in `parent` whose owner is gone, and their
    owner files, each while holding its owner file's flock (so no writer can be starting on
    it); returns (the paths removed, or with `dry_run` those it would remove, changing
    nothing; the scratch paths a live process still owns)."""
    parent = Path(parent)
    if not parent.is_dir():
        return [], []
    dead, alive = [], []
    for path in sorted(parent.glob(f".{name}.tmp-*")):
        owned = path.name.endswith(OWNER)
        owner = path if owned else path.with_name(path.name + OWNER)
        if owned and os.path.lexists(path.with_name(path.name[:-len(OWNER)])):
            continue  # taken with its path
        state, fd = _probe(owner)
        if state == "alive":
            alive += [] if owned else [path]
            continue
        if owned and state == "gone":
            continue  # removed meanwhile by its owner or another sweep
        try:
            dead.append(path)
            if not dry_run:
                remove(path)  # the path first, its owner file after (as its owner does)
                if fd is not None:
                    owner.unlink(missing_ok=True)
        finally:
            if fd is not None:
                os.close(fd)
    return dead, alive


def link_or_copy(src: Path, dst: Path) -> None:
    """`dst` as a hard link to `src` (the same bytes, no copy: files here are never changed
    in place, only replaced), or a copy where links cannot be made (another file system)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _exchange_function():
    """libc's atomic exchange of two paths: Linux's renameat2(RENAME_EXCHANGE), macOS's
    renamex_np(RENAME_SWAP); None where there is neither."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    except OSError:  # pragma: no cover
        return None
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        at_fdcwd, rename_exchange = -100, 2
        return lambda a, b: libc.renameat2(at_fdcwd, a, at_fdcwd, b, rename_exchange)
    if sys.platform == "darwin" and hasattr(libc, "renamex_np"):  # pragma: no cover
        return lambda a, b: libc.renamex_np(a, b, 2)  # RENAME_SWAP
    return None


_EXCHANGE = _exchange_function()


def exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (each name then holds the other's content);
    False where the system or the file system cannot, and nothing was changed."""
    if _EXCHANGE is None:
        return False
    if _EXCHANGE(os.fsencode(a), os.fsencode(b)) == 0:
        return True
    return False


def swap_in(new: Path, target: Path) -> None:
    """Put the folder `new` at `target` so that at every instant `target` holds the old
    folder or the new one, whole: by one exchange (the old folder is left at `new`, for its
    owner to remove), or a rename where there was none. Where no exchange is possible, two
    renames; a process killed between them leaves the old folder at `.NAME.old-TOKEN`,
    which `restore` puts back."""
    if not os.path.lexists(target):
        new.rename(target)
        return
    if exchange(new, target):
        return
    aside = target.with_name(f".{target.name}.old-{secrets.token_hex(4)}")
    target.rename(aside)
    try:
        new.rename(target)
    except BaseException:
        aside.rename(target)  # the old folder back
        raise
    aside.rename(new)  # the old folder, for the caller's scratch to remove


def restore(target: Path) -> None:
    """Put back the old folder that a two-rename `swap_in` killed half-way left aside."""
    if os.path.lexists(target):
        for aside in target.parent.glob(f".{target.name}.old-*"):
            remove(aside)
        return
    asides = sorted(target.parent.glob(f".{target.name}.old-*"))
    if asides:
        asides[0].rename(target)


def die_with_parent(parent: int) -> None:
    """Make this (worker) process end when `parent` does, even by SIGKILL: Linux's
    PR_SET_PDEATHSIG where there is one, and everywhere a thread that watches the parent's
    pid (a worker re-parented to another process has lost its parent)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
        except (OSError, AttributeError):  # pragma: no cover
            pass
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()
