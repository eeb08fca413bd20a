"""The FastAPI app of `nmt serve`: the JSON API, the page, and the limits around them.

- Runs are fixed at start (`nmt.serve.runs.load_runs`); requests name them by index or
  name. No request field is a path: nothing a client sends reads or writes files.
- Input: pydantic models with constraints (strict types, no unknown fields) give 422
  naming the field; a sentence over MAX_WORDS / MAX_CHARS / MAX_PIECES gives 413 naming
  the limit; a body over MAX_BODY bytes gives 413 before it is parsed.
- Decodes: at most `max_concurrent` at once (each in a worker thread); a request beyond
  them waits up to `queue_timeout` seconds, and at most `max_waiting` requests wait; past
  either, 503. Requests of every kind: at most `Limits.max_requests` in flight; past it,
  503 from `Guard`. These are the limits that bind: uvicorn is given none of its own (its
  503 is plain text, without Retry-After or X-Request-ID). Nothing queues without bound.
- Errors: every response carries an X-Request-ID; an unexpected exception gives 500 with
  that id, and its traceback goes to the server's log (logger "nmt.serve") under the id.
"""

from __future__ import annotations

import ipaddress
import re
import time
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect

from nmt.core.errors import NMTError
from nmt.data.symmetrize import SYMMETRIZATIONS
from nmt.serve import runs as R
from nmt.serve.guard import (
    MAX_BODY,
    ApiError,
    Busy,
    Guard,
    InFlight,
    error_body,
    validation_body,
)
from nmt.serve.page import render_page
from nmt.serve.runs import MAX_BEAM, MAX_CHARS, MAX_PIECES, MAX_WORDS, Served
from nmt.serve.schemas import (
    AlignRequest,
    AlignResponse,
    RunInfo,
    RunsResponse,
    TranslateRequest,
    TranslateResponse,
)

SYMMETRIZE = SYMMETRIZATIONS


@dataclass(frozen=True)
class Limits:
    """How many decodes run at once, how many requests may wait and for how long, and how
    many requests of any kind may be in flight."""

    max_concurrent: int = 2
    max_waiting: int = 8
    queue_timeout: float = 10.0  # seconds a request waits for a decode slot
    max_light: int = 32  # requests in flight besides the decodes and their queue (the page,
    # /healthz, /api/runs, bodies being read, quick refusals)
    decode_delay: float = 0.0  # testing only: each decode holds its slot this much longer

    @property
    def max_requests(self) -> int:
        """Requests in flight at once, of every kind; the next one gets 503 (Guard)."""
        return self.max_concurrent + self.max_waiting + self.max_light


# ------------------------------------------------------------------------------ slots


class Slots:
    """At most `max_concurrent` decodes at once; a request waits for a slot up to
    `queue_timeout` seconds, and while `max_waiting` requests wait, the next gets 503."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.busy = self.waiting = 0
        self._sem: anyio.Semaphore | None = None

    @asynccontextmanager
    async def hold(self):
        if self._sem is None:  # made inside the event loop
            self._sem = anyio.Semaphore(self.limits.max_concurrent)
        lim = self.limits
        if self._sem.value == 0 and self.waiting >= lim.max_waiting:
            raise Busy(f"server busy: {lim.max_concurrent} decodes running and "
                       f"{self.waiting} requests waiting (the limit); retry shortly")
        try:  # a free slot is taken at once, whatever the timeout (0: never wait)
            self._sem.acquire_nowait()
            acquired = True
        except anyio.WouldBlock:
            acquired = False
        if not acquired and lim.queue_timeout > 0:
            self.waiting += 1
            try:
                with anyio.move_on_after(lim.queue_timeout):
                    await self._sem.acquire()
                    acquired = True
            finally:
                self.waiting -= 1
        if not acquired:
            raise Busy(f"server busy: no decode slot free within {lim.queue_timeout:g} s "
                       f"({lim.max_concurrent} at once); retry shortly")
        self.busy += 1
        try:
            yield
        finally:
            self.busy -= 1
            self._sem.release()

    async def run(self, fn: Callable, *args, gone: Callable | None = None):
        """`fn(*args)` in a worker thread, inside a slot. The thread is never abandoned:
        the slot is released only when the decode has really finished. `gone()`: whether
        the client has hung up, asked once the slot is taken; if so the decode does not
        start and the slot is free at once. An NMTError (the input's fault, as on the
        command line) is a 422."""
        async with self.hold():
            if self.limits.decode_delay:
                await run_in_threadpool(time.sleep, self.limits.decode_delay)
            if gone is not None and await gone():
                raise ClientDisconnect()
            try:
                return await run_in_threadpool(fn, *args)
            except NMTError as exc:
                raise ApiError(422, str(exc), "body") from None


ERRORS = {413: {"description": "a sentence or the body over its limit"},
          422: {"description": "a field missing, of the wrong type or out of range"},
          503: {"description": "every decode slot busy past the wait"}}


# ------------------------------------------------------------------------------ the app


class RunSet:
    """The runs served, named by index or name; a name that is not one is a 422 (404)."""

    def __init__(self, served: list[Served]):
        self.served, self.by_name = list(served), {s.name: s for s in served}

    def pick(self, refs: list[int | str] | None) -> list[Served]:
        """The runs `refs` names, each once, in the order first named; more references
        than runs served is a 422 (one request decodes each run at most once)."""
        if refs is None:
            return list(self.served)
        if len(refs) > len(self.served):
            raise ApiError(422, f"runs: {len(refs)} references, but {len(self.served)} runs "
                           "are served; name each run at most once", "runs")
        out = []
        for k, ref in enumerate(refs):
            run = self.by_name.get(ref) if isinstance(ref, str) else (
                self.served[ref] if 0 <= ref < len(self.served) else None)
            if run is None:  # the value sent is not echoed (docs/serve.md)
                raise ApiError(422, f"runs: item {k} names no run; the runs are "
                               f"{', '.join(f'{s.index} ({s.name})' for s in self.served)}",
                               "runs")
            if all(run.index != kept.index for kept in out):
                out.append(run)
        return out

    def one(self, run: str) -> Served:
        """A run by its exact name or its index in ASCII digits (not "²", "١" or 4,000
        digits); anything else is a 404 naming the runs there are."""
        found = self.by_name.get(run)
        if found is None and re.fullmatch(r"[0-9]{1,9}", run) and int(run) < len(self.served):
            found = self.served[int(run)]
        if found is None:
            raise ApiError(404, f"no run {run!r}; the runs are " + ", ".join(
                f"{s.index} ({s.name})" for s in self.served), "run")
        return found


def check_length(field: str, text: str, runs: list[Served]) -> None:
    """413 naming the field and the limits when `text` is over one of them."""
    for run in runs or [None]:
        why = R.too_long(field, text, run.model if run else None)
        if why:
            raise ApiError(413, why, field, max_words=MAX_WORDS, max_chars=MAX_CHARS,
                           max_pieces=MAX_PIECES)


def host_patterns(hosts: list[str]) -> list[str]:
    """The Host names for Starlette's TrustedHostMiddleware. It compares the Host header's
    host as sent, and an IPv6 address arrives in brackets (`Host: [::1]:8000`, RFC 3986's
    IP-literal): each IPv6 address in `hosts` (bracketed or not) is listed bracketed, in
    its canonical form (RFC 5952's, the one browsers send)."""
    out = []
    for name in hosts:
        try:
            address = ipaddress.IPv6Address(name.removeprefix("[").removesuffix("]"))
        except ValueError:
            out.append(name)
        else:
            out.append(f"[{address.compressed}]")
    return out


def create_app(served: list[Served], limits: Limits = Limits(),
               hosts: list[str] | None = None) -> FastAPI:
    """The app over runs loaded once (`nmt.serve.runs.load_runs`). `hosts`: the Host
    headers answered (Starlette's TrustedHostMiddleware; `nmt serve` passes its address,
    localhost and --allow-host), so a page on another site cannot reach the server through
    DNS rebinding; None answers any (in-process use)."""

    app = FastAPI(title="nmt serve", version="1",
                  description="A live attention playground: translate and align with the runs "
                              "given at start. Attention is not explanation: the matrices "
                              "show where each model looked, not why it translated as it did.")
    if hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=host_patterns(hosts))
    in_flight = InFlight(limits.max_requests)
    app.add_middleware(Guard, in_flight=in_flight, max_body=MAX_BODY)  # last: outermost

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException):
        if exc.status_code == 400 and not isinstance(exc, ApiError):  # a body JSON can't read
            exc = ApiError(422, "body: not JSON this server reads (nested too deep, or a "
                           "number too long?); send the documented fields", "body")
        headers = {**(exc.headers or {}),  # Allow on a 405
                   **({"Retry-After": "1"} if exc.status_code == 503 else {})}
        return JSONResponse(error_body(exc), status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return JSONResponse(validation_body(exc), status_code=422)

    runs, slots = RunSet(served), Slots(limits)
    _info_routes(app, runs, slots, limits, render_page(), in_flight)
    _work_routes(app, runs, slots)
    return app


def _info_routes(app: FastAPI, runs: RunSet, slots: Slots, limits: Limits, page: str,
                 in_flight: InFlight) -> None:
    """The page, /healthz and the runs served."""

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index():
        return HTMLResponse(page, headers={"Content-Security-Policy": (
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
            "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")})

    @app.get("/healthz", summary="liveness: ok, how busy the decode slots are, and the "
                                  "requests in flight (this one included)")
    async def healthz():
        return {"status": "ok", "runs": len(runs.served), "busy": slots.busy,
                "waiting": slots.waiting, "requests": in_flight.count}

    @app.get("/api/runs", response_model=RunsResponse, summary="the runs served")
    async def list_runs():
        return {"runs": [s.info() for s in runs.served],
                "limits": {"max_words": MAX_WORDS, "max_chars": MAX_CHARS,
                           "max_pieces": MAX_PIECES, "max_beam": MAX_BEAM,
                           "max_concurrent": limits.max_concurrent,
                           "queue_timeout": limits.queue_timeout}}

    @app.get("/api/runs/{run}", response_model=RunInfo, summary="one run, by index or name",
             responses={404: {"description": "no such run"}})
    async def one_run(run: str):
        return runs.one(run).info()


def _work_routes(app: FastAPI, runs: RunSet, slots: Slots) -> None:
    """/api/translate and /api/align: decodes, in the bounded slots."""

    @app.post("/api/translate", response_model=TranslateResponse, responses=ERRORS,
              summary="each run's n-best translations, with word links")
    async def translate(req: TranslateRequest, request: Request):
        asked = runs.pick(req.runs)
        check_length("source", req.source, asked)

        def work():
            return [R.translate(run, req.source, req.beam, req.n_best) for run in asked]

        return {"source": req.source,
                "runs": await slots.run(work, gone=request.is_disconnected)}

    @app.post("/api/align", response_model=AlignResponse, responses=ERRORS,
              summary="each run's word alignment: forced on a target, or free")
    async def align(req: AlignRequest, request: Request):
        asked = runs.pick(req.runs)
        check_length("source", req.source, asked)
        if req.target is not None:
            check_length("target", req.target, asked)
        if req.symmetrize and not any(r.reverse for r in asked):
            raise ApiError(422, "symmetrize: no run has a reverse run; start the server with "
                           "--reverse RUN (one per run)", "symmetrize")

        def work():
            results = [R.align(run, req.source, req.target, req.method,  # translate's beam
                               req.beam or max(run.model.cfg.decode.beam, req.n_best),
                               req.symmetrize) for run in asked]
            explorer = (R.explorer_data(results, req.source, req.target is not None,
                                        "nmt serve") if req.views else None)
            return [a.as_dict() for a in results], explorer

        results, explorer = await slots.run(work, gone=request.is_disconnected)
        return {"source": req.source, "target": req.target,
                "mode": "free" if req.target is None else "forced", "method": req.method,
                "symmetrize": req.symmetrize, "runs": results, "explorer": explorer}
