"""The FastAPI app of `nmt serve`: the JSON API, the page, and the limits around them.

- Runs are fixed at start (`nmt.serve.runs.load_runs`); requests name them by index or
  name. No request field is a path: nothing a client sends reads or writes files.
- Input: pydantic models with constraints (strict types, no unknown fields) give 422
  naming the field; a sentence over MAX_WORDS / MAX_CHARS / MAX_PIECES gives 413 naming
  the limit; a body over MAX_BODY bytes gives 413 before it is parsed.
- Decodes: at most `max_concurrent` at once (each in a worker thread); a request beyond
  them waits up to `queue_timeout` seconds, and at most `max_waiting` requests wait; past
  either, 503. Nothing queues without bound.
- Errors: every response carries an X-Request-ID; an unexpected exception gives 500 with
  that id, and its traceback goes to the server's log (logger "nmt.serve") under the id.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
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

log = logging.getLogger("nmt.serve")
MAX_BODY = 64 * 1024  # bytes of a request body
SYMMETRIZE = SYMMETRIZATIONS


@dataclass(frozen=True)
class Limits:
    """How many decodes run at once, how many requests may wait and for how long."""

    max_concurrent: int = 2
    max_waiting: int = 8
    queue_timeout: float = 10.0  # seconds a request waits for a decode slot
    decode_delay: float = 0.0  # testing only: each decode holds its slot this much longer


# ------------------------------------------------------------------------------ errors


class ApiError(HTTPException):
    """An error answered as JSON {"detail", "field", ...}: the request's fault (4xx) or a
    full server (503)."""

    def __init__(self, status: int, detail: str, field: str | None = None, **extra):
        super().__init__(status_code=status, detail=detail)
        self.field, self.extra = field, extra


class Busy(ApiError):
    def __init__(self, detail: str):
        super().__init__(503, detail, retry_after=1)


def error_body(exc: HTTPException) -> dict:
    """Every error's shape: {"detail": str, "field": str | null, ...extra}."""
    if isinstance(exc, ApiError):
        return {"detail": exc.detail, "field": exc.field, **exc.extra}
    return {"detail": str(exc.detail), "field": None}


def validation_body(exc: RequestValidationError) -> dict:
    """422 naming each field: `source: String should have at least 1 character`; the
    request's values are not echoed back."""
    errors = []
    for e in exc.errors():
        loc = [str(x) for x in e.get("loc", ()) if x != "body"]
        if e.get("type") == "json_invalid":
            field, message = "body", f"invalid JSON ({e.get('ctx', {}).get('error', 'decode error')})"
        else:
            field, message = ".".join(loc) or "body", e.get("msg", "invalid")
        errors.append({"field": field, "message": message, "type": e.get("type")})
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors) or "invalid request"
    return {"detail": detail, "field": errors[0]["field"] if errors else "body", "errors": errors}


class Guard:
    """Outermost ASGI middleware: a request id per request (X-Request-ID), a cap on the
    body's size, X-Frame-Options: DENY on every response, one JSON shape for every error
    (a plain-text error from below, such as the Host check's, is rewritten as
    {"detail", "field": null}), and a 500 with the id, never a traceback, when something
    fails; the traceback is logged with the id."""

    def __init__(self, app, max_body: int = MAX_BODY):
        self.app, self.max_body = app, max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = uuid.uuid4().hex[:12]
        scope.setdefault("state", {})["request_id"] = rid
        started, received, plain, text = False, 0, None, b""

        async def send_with_id(message):
            nonlocal started, plain, text
            if message["type"] == "http.response.start":
                started = True
                kind = dict(message.get("headers", [])).get(b"content-type", b"")
                if message["status"] >= 400 and not kind.startswith(b"application/json"):
                    plain = message  # rewritten as JSON once its text is in
                    return
                message = {**message, "headers": [*message.get("headers", []),
                                                   (b"x-request-id", rid.encode()),
                                                   (b"x-frame-options", b"DENY")]}
            elif plain is not None and message["type"] == "http.response.body":
                text += message.get("body", b"")
                if not message.get("more_body"):
                    start, plain = plain, None
                    kept = [(k, v) for k, v in start.get("headers", [])  # Allow, say
                            if k.lower() not in (b"content-type", b"content-length")]
                    await self.respond(send_with_id, start["status"], {
                        "detail": text.decode("utf-8", "replace").strip(), "field": None}, kept)
                return
            await send(message)

        async def capped_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise too_large(self.max_body)
            return message

        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"0")
        if not length.isdigit() or int(length) > self.max_body:
            exc = too_large(self.max_body) if length.isdigit() else ApiError(
                400, "Content-Length is not a number", "body")
            return await self.respond(send_with_id, exc.status_code, error_body(exc))
        try:
            await self.app(scope, capped_receive, send_with_id)
        except ClientDisconnect:
            log.info("request %s: the client went away", rid)
        except Exception:
            log.exception("request %s failed: %s %s", rid, scope.get("method"), scope.get("path"))
            if not started:
                await self.respond(send_with_id, 500, {
                    "detail": "internal error; the server's log has the details under this "
                              "request id", "field": None, "request_id": rid})

    @staticmethod
    async def respond(send, status: int, body: dict, headers: list | None = None) -> None:
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode()),
                                *(headers or [])]})
        await send({"type": "http.response.body", "body": data})


def too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body over {limit:,} bytes; the sentence limits are "
                    f"{MAX_WORDS} words and {MAX_CHARS:,} characters", "body", limit=limit)


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
        for ref in refs:
            run = self.by_name.get(ref) if isinstance(ref, str) else (
                self.served[ref] if 0 <= ref < len(self.served) else None)
            if run is None:
                raise ApiError(422, f"runs: no run {ref!r}; the runs are "
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
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=hosts)
    app.add_middleware(Guard)  # added last: outermost

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
    _info_routes(app, runs, slots, limits, render_page())
    _work_routes(app, runs, slots)
    return app


def _info_routes(app: FastAPI, runs: RunSet, slots: Slots, limits: Limits, page: str) -> None:
    """The page, /healthz and the runs served."""

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index():
        return HTMLResponse(page, headers={"Content-Security-Policy": (
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
            "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")})

    @app.get("/healthz", summary="liveness: ok, and how busy the decode slots are")
    async def healthz():
        return {"status": "ok", "runs": len(runs.served), "busy": slots.busy,
                "waiting": slots.waiting}

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
            results = [R.align(run, req.source, req.target, req.method, req.beam,
                               req.symmetrize) for run in asked]
            explorer = (R.explorer_data(results, req.source, req.target is not None,
                                        "nmt serve") if req.views else None)
            return [a.as_dict() for a in results], explorer

        results, explorer = await slots.run(work, gone=request.is_disconnected)
        return {"source": req.source, "target": req.target,
                "mode": "free" if req.target is None else "forced", "method": req.method,
                "symmetrize": req.symmetrize, "runs": results, "explorer": explorer}
