"""The `nmt` command line: parse, load config, call one function.

Errors caused by input print as one line (`nmt: error: ...`) with exit code 2;
`--debug` shows the traceback instead. Each command module registers its
commands on `app` once, when it is imported here.
"""

from __future__ import annotations

import signal
import sys

import typer

from nmt.cli import align, core, explore, lab, serve, share  # noqa: F401  (register commands)
from nmt.cli.app import STATE, app
from nmt.core.errors import Interrupted, NMTError

__all__ = ["app", "main"]


def _stop(signum, frame) -> None:
    """SIGTERM and SIGHUP, as Ctrl-C: the exception unwinds every command's cleanup (and
    stays pending until it does, in case something on the way swallows it)."""
    Interrupted.pending = Interrupted(signum)
    raise Interrupted.pending


def main() -> None:
    """Console entry point: one-line errors unless --debug. SIGTERM and SIGHUP stop a
    command as Ctrl-C does (its temporary files removed, its workers stopped), with one line
    and the status a shell gives a signal's death (128 + its number)."""
    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), _stop)
    Interrupted.last = Interrupted.pending = None  # this command's, not an earlier one's
    try:
        # typer.Exit and Ctrl-C inside a command come back as the exit code (130: Ctrl-C)
        code = app(standalone_mode=False)
    except NMTError as exc:
        if STATE["debug"]:
            raise
        typer.echo(f"nmt: error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:  # a path that cannot be read or written (a file for a folder, ...)
        if STATE["debug"]:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"nmt: error: {where}{exc.strerror or exc}; check the path", err=True)
        sys.exit(2)
    except KeyboardInterrupt as exc:
        Interrupted.pending = None
        Interrupted.last = exc if isinstance(exc, Interrupted) else Interrupted.last
        code = 130
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(1)
    except typer.TyperException as exc:  # usage errors (typer's own click copy, not `click`)
        if not hasattr(exc, "format_message"):
            raise
        # one line, like every other input error: "Invalid value for '--beam': 0 is not ..."
        message = " ".join(exc.format_message().split())
        typer.echo(f"nmt: error: {message} (see `{_command(exc)} --help`)", err=True)
        sys.exit(exc.exit_code)
    if code == 130:
        stop = Interrupted.last
        if stop is not None:
            code = 128 + stop.signum
            name = signal.Signals(stop.signum).name
            typer.echo(f"nmt: {stop.message or f'stopped by {name}'}", err=True)
        else:
            typer.echo("nmt: interrupted", err=True)
    if isinstance(code, int) and code:
        sys.exit(code)


def _command(exc: Exception) -> str:
    """`nmt align`, whatever the program was called (python -m nmt, a test runner...)."""
    ctx, names = getattr(exc, "ctx", None), []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.info_name)
        ctx = ctx.parent
    return " ".join(["nmt", *names])
