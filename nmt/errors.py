"""User-facing errors: one line that names the file, line or key and what to do."""


class NMTError(Exception):
    """An error caused by the user's input; the CLI prints it as one line, no traceback."""
