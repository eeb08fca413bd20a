"""`nmt serve` (registered on the main app): the live attention playground (docs/serve.md)."""

from __future__ import annotations

import copy
import socket
from pathlib import Path
from typing import Annotated

import typer

from nmt.cli.app import Engine, EngineOpt, QuantizeOpt, app
from nmt.core.errors import NMTError

ALL_INTERFACES = ("0.0.0.0", "::", "[::]", "")


@app.command()
def serve(
    runs: Annotated[list[Path], typer.Argument(
        help="run directories, loaded once at start; clients name them by index or name")],
    host: Annotated[str, typer.Option(help="address to listen on (0.0.0.0: every "
                                           "interface; the API has no authentication)")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port (0: any free one)")] = 8000,
    reverse: Annotated[list[Path] | None, typer.Option(
        help="the k-th RUN's other direction (once per RUN, in order): adds the reverse "
             "and symmetrised panels")] = None,
    threads: Annotated[int, typer.Option(min=0, help="torch threads (0: torch's default)")] = 0,
    engine: EngineOpt = Engine.pytorch,
    quantize: QuantizeOpt = None,
    allow_host: Annotated[list[str] | None, typer.Option(
        help="a Host name clients may use besides the address and localhost (repeat; "
             "'*.example.org' for subdomains, '*' for any)")] = None,
    max_concurrent: Annotated[int, typer.Option(min=1, hidden=True,
                                                help="decodes at once")] = 2,
    max_waiting: Annotated[int, typer.Option(min=0, hidden=True,
                                             help="requests waiting for a decode slot")] = 8,
    queue_timeout: Annotated[float, typer.Option(min=0.0, hidden=True,
                                                 help="seconds a request waits for a slot (0: none; a free slot is taken)")
                             ] = 10.0,
    decode_delay: Annotated[float, typer.Option(min=0.0, hidden=True,
                                                help="testing: hold each slot this long")
                            ] = 0.0,
) -> None:
    """A live attention playground: a page and a JSON API (/docs) over the runs given."""
    from nmt.serve import require  # start-up: `nmt --help` imports no torch

    require()
    import torch  # start-up: `nmt --help` imports no torch
    import uvicorn  # optional extra: pip install -e '.[serve]'

    from nmt.serve.app import Limits, create_app  # start-up: `nmt --help` imports no torch
    from nmt.serve.runs import load_runs  # start-up: `nmt --help` imports no torch

    torch.set_num_threads(threads or torch.get_num_threads())
    served = load_runs(list(runs), list(reverse or []), engine.value, quantize and quantize.value,
                       say=lambda line: typer.echo(line, err=True))
    limits = Limits(max_concurrent=max_concurrent, max_waiting=max_waiting,
                    queue_timeout=queue_timeout, decode_delay=decode_delay)
    application = create_app(served, limits, allowed_hosts(host, allow_host or []))
    if host in ALL_INTERFACES:
        typer.echo(f"nmt serve: warning: listening on every interface ({host or '0.0.0.0'}): "
                   "anyone who can reach this machine can use the models; there is no "
                   "authentication", err=True)
    port, shown = listening_port(host, port), (f"[{host}]" if ":" in host else host)
    names = ", ".join(f"{s.index} {s.name}" for s in served)
    typer.echo(f"nmt serve: {len(served)} runs ({names}) at http://{shown}:{port}/ "
               "(API docs: /docs); Ctrl-C stops", err=True)
    # the server's log: uvicorn's, plus nmt.serve's (failed requests' tracebacks, by id)
    log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    log_config["loggers"]["nmt.serve"] = {"handlers": ["default"], "level": "INFO",
                                          "propagate": False}
    # No limit_concurrency: uvicorn's own 503 is plain text without Retry-After or
    # X-Request-ID; the app's limits (Limits.max_requests and the decode slots) bind and
    # answer JSON (docs/serve.md, "Limits and errors"). Idle connections close after 5 s.
    uvicorn.run(application, host=host, port=port, log_level="info", log_config=log_config,
                timeout_keep_alive=5, limit_concurrency=None)


def listening_port(host: str, port: int) -> int:
    """`port` (a free one for 0) once `host` was seen to listen on it: a port in use is one
    line before the banner, not uvicorn's error after it."""
    address = host.removeprefix("[").removesuffix("]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError as exc:
            raise NMTError(f"--host {host} --port {port}: cannot listen there "
                           f"({exc.strerror or exc}); pick another --port (0: any free one)"
                           ) from None
        return probe.getsockname()[1]


def allowed_hosts(host: str, extra: list[str]) -> list[str]:
    """The Host names answered: the address, localhost and --allow-host's names, each
    checked against Starlette's rule ('*' alone, or '*.' at the front)."""
    for name in extra:
        if "*" in name[1:] or (name.startswith("*") and name != "*"
                               and not name.startswith("*.")):
            raise NMTError(f"--allow-host {name!r}: a wildcard is '*' or '*.domain'")
    return [host.strip("[]") or "0.0.0.0", "localhost", "127.0.0.1", "::1", *extra]
