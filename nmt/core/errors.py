"""User-facing errors: one line that names the file, line or key and what to do."""

from __future__ import annotations


class NMTError(Exception):
    """An error caused by the user's input; the CLI prints it as one line, no traceback."""


class Interrupted(KeyboardInterrupt):
    """A command stopped by a signal (SIGINT, SIGTERM, SIGHUP), raised where Ctrl-C's
    KeyboardInterrupt would be, so the same cleanup runs; the CLI prints `message` (one
    line) and exits with 128 + the signal's number, as shells report it."""

    last: Interrupted | None = None  # the latest, for a caller whose framework drops it
    # Raised by the command line's handler and not yet seen by it: code that swallows
    # exceptions (a C extension's import, say) leaves it here for the next StopRequest.
    pending: Interrupted | None = None

    def __init__(self, signum: int, message: str | None = None):
        super().__init__(message)
        self.signum, self.message = signum, message
        Interrupted.last = self


def one_line(exc: BaseException, limit: int = 120) -> str:
    """The first line of an exception's message that holds text (else its type), cut to
    `limit` characters: the part of a library's error worth showing inside our one-line
    message."""
    line = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    return line[:limit] if line else type(exc).__name__
