"""User-facing errors: one line that names the file, line or key and what to do."""


class NMTError(Exception):
    """An error caused by the user's input; the CLI prints it as one line, no traceback."""


def one_line(exc: BaseException, limit: int = 120) -> str:
    """The first line of an exception's message (or its type), cut to `limit` characters:
    the part of a library's error worth showing inside our one-line message."""
    text = str(exc)
    return text.splitlines()[0][:limit] if text.strip() else type(exc).__name__
