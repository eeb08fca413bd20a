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
import time
import uuid
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Literal

import anyio
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from nmt.align.attribution import METHODS
from nmt.align.symmetrize import HEURISTICS, SOFT
from nmt.errors import NMTError
from nmt.serve import runs as R
from nmt.serve.runs import MAX_BEAM, MAX_CHARS, MAX_PIECES, MAX_WORDS, Served

log = logging.getLogger("nmt.serve")
MAX_BODY = 64 * 1024  # bytes of a request body
SYMMETRIZE = HEURISTICS + SOFT


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
    body = {"detail": exc.detail}
    if isinstance(exc, ApiError):
        body.update({"field": exc.field, **exc.extra} if exc.field else exc.extra)
    return body


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
    body's size, and a 500 with the id, never a traceback, when something fails; the
    traceback is logged with the id."""

    def __init__(self, app, max_body: int = MAX_BODY):
        self.app, self.max_body = app, max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = uuid.uuid4().hex[:12]
        scope.setdefault("state", {})["request_id"] = rid
        started = False
        received = 0

        async def send_with_id(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []),
                                                   (b"x-request-id", rid.encode())]}
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
                              "request id", "request_id": rid})

    @staticmethod
    async def respond(send, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode())]})
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
        self.waiting += 1
        acquired = False
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

    async def run(self, fn: Callable, *args):
        """`fn(*args)` in a worker thread, inside a slot. The thread is never abandoned:
        the slot is released only when the decode has really finished. An NMTError (the
        input's fault, as on the command line) is a 422."""
        async with self.hold():
            if self.limits.decode_delay:
                await run_in_threadpool(time.sleep, self.limits.decode_delay)
            try:
                return await run_in_threadpool(fn, *args)
            except NMTError as exc:
                raise ApiError(422, str(exc), "body") from None


# ------------------------------------------------------------------------------ requests

SOURCE_HELP = (f"a sentence in the runs' source language: at most {MAX_WORDS} words, "
               f"{MAX_CHARS:,} characters and {MAX_PIECES} subword pieces (longer: 413)")
RunRef = Annotated[int | str, Field(description="a run's index or name (GET /api/runs)")]


class SentenceRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    source: str = Field(description=SOURCE_HELP, examples=["a sentence"])
    runs: list[RunRef] | None = Field(
        None, description="runs to ask, by index or name; null: every run", max_length=64)

    @field_validator("source")
    @classmethod
    def _not_empty(cls, text: str) -> str:
        text = text.strip()
        if not text:
            raise ValueError("empty; type a sentence")
        return text


class TranslateRequest(SentenceRequest):
    beam: int | None = Field(None, ge=1, le=MAX_BEAM,
                             description="beam size (1: greedy); null: each run's decode.beam")
    n_best: int = Field(1, ge=1, le=MAX_BEAM, description="hypotheses per run, at most beam")

    @field_validator("n_best")
    @classmethod
    def _within_beam(cls, n: int, info) -> int:
        beam = info.data.get("beam")
        if beam is not None and n > beam:
            raise ValueError(f"{n} is larger than beam {beam}; a beam of k keeps k hypotheses")
        return n


class AlignRequest(SentenceRequest):
    target: str | None = Field(
        None, description="forced mode: every run aligned on these target words (same limits "
                          "as source); null: free mode, each run on its own translation")
    method: Literal[METHODS] = Field("attention", description="attention | saliency "
                                     "(gradient x input; also for fixed_context)")
    beam: int | None = Field(None, ge=1, le=MAX_BEAM,
                             description="free mode: the beam of the translation aligned")
    symmetrize: Literal[SYMMETRIZE] | None = Field(
        None, description="with --reverse runs: also the reverse run's alignment and the "
                          "two symmetrised by this heuristic (agreement: nmt align's default)")
    views: bool = Field(False, description="add `explorer`: the page's data (every "
                        "Transformer layer x head x reading, quantised)")

    @field_validator("target")
    @classmethod
    def _target(cls, text: str | None) -> str | None:
        if text is not None and not text.strip():
            raise ValueError("empty; send null for free mode (each run's own translation)")
        return None if text is None else text.strip()


# ------------------------------------------------------------------------------ responses

Pair = tuple[int, int]


class Hypothesis(BaseModel):
    text: str
    score: float
    links: list[Pair] | None = Field(description="word links (source, target), 0-based")


class RunTranslation(BaseModel):
    run: int
    name: str
    family: str
    beam: int
    text: str
    score: float = Field(description="the search's length-normalised log-probability "
                                     "(greedy search: 0)")
    links: list[Pair] | None
    links_method: str = Field(description="attention, or saliency for a family without it")
    n_best: list[Hypothesis]


class TranslateResponse(BaseModel):
    source: str
    runs: list[RunTranslation]


class Matrix(BaseModel):
    src_words: list[str]
    tgt_words: list[str]
    matrix: list[list[float]] = Field(description="target words x source words")
    links: list[Pair] | None
    layers: int = Field(description="decoder layers of the raw weights (1: a single map)")
    heads: int


class ReverseMatrix(Matrix):
    name: str | None


class RunAlignment(BaseModel):
    run: int
    name: str
    family: str
    method: str
    note: str | None = Field(None, description="why there is no matrix (no attention, ...)")
    target_logprob: float | None = Field(None, description="forced mode: log p(target | "
                                         "source), natural log")
    src_words: list[str] | None = None
    tgt_words: list[str] | None = None
    matrix: list[list[float]] | None = None
    links: list[Pair] | None = None
    layers: int | None = None
    heads: int | None = None
    reverse: ReverseMatrix | None = None
    symmetrized: Matrix | None = None
    reverse_note: str | None = None


class AlignResponse(BaseModel):
    source: str
    target: str | None
    mode: Literal["forced", "free"]
    method: str
    symmetrize: str | None
    runs: list[RunAlignment]
    explorer: dict | None = Field(None, description="with views: the page's data")


class RunInfo(BaseModel):
    index: int
    name: str
    family: str
    pair: str
    corpus: str
    parameters: int
    attention: bool
    beam: int
    decoder_layers: int
    heads: int | None
    reverse: str | None


class RunsResponse(BaseModel):
    runs: list[RunInfo]
    limits: dict


ERRORS = {413: {"description": "a sentence or the body over its limit"},
          422: {"description": "a field missing, of the wrong type or out of range"},
          503: {"description": "every decode slot busy past the wait"}}


# ------------------------------------------------------------------------------ the app


def create_app(served: list[Served], limits: Limits = Limits()) -> FastAPI:
    """The app over runs loaded once (`nmt.serve.runs.load_runs`)."""
    from nmt.serve.page import render_page

    slots = Slots(limits)
    by_name = {s.name: s for s in served}
    app = FastAPI(title="nmt serve", version="1",
                  description="A live attention playground: translate and align with the runs "
                              "given at start. Attention is not explanation: the matrices "
                              "show where each model looked, not why it translated as it did.")
    app.add_middleware(Guard)
    page = render_page()

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException):
        headers = {"Retry-After": "1"} if exc.status_code == 503 else None
        return JSONResponse(error_body(exc), status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return JSONResponse(validation_body(exc), status_code=422)

    def pick(refs: list[int | str] | None) -> list[Served]:
        if refs is None:
            return list(served)
        out = []
        for ref in refs:
            run = by_name.get(ref) if isinstance(ref, str) else (
                served[ref] if 0 <= ref < len(served) else None)
            if run is None:
                raise ApiError(422, f"runs: no run {ref!r}; the runs are "
                               f"{', '.join(f'{s.index} ({s.name})' for s in served)}", "runs")
            out.append(run)
        return out

    def check_length(field: str, text: str, runs: list[Served]) -> None:
        for run in runs or [None]:
            why = R.too_long(field, text, run.model if run else None)
            if why:
                raise ApiError(413, why, field, max_words=MAX_WORDS, max_chars=MAX_CHARS,
                               max_pieces=MAX_PIECES)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index():
        return HTMLResponse(page, headers={"Content-Security-Policy": (
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
            "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'")})

    @app.get("/healthz", summary="liveness: ok, and how busy the decode slots are")
    async def healthz():
        return {"status": "ok", "runs": len(served), "busy": slots.busy,
                "waiting": slots.waiting}

    @app.get("/api/runs", response_model=RunsResponse, summary="the runs served")
    async def list_runs():
        return {"runs": [s.info() for s in served],
                "limits": {"max_words": MAX_WORDS, "max_chars": MAX_CHARS,
                           "max_pieces": MAX_PIECES, "max_beam": MAX_BEAM,
                           "max_concurrent": limits.max_concurrent,
                           "queue_timeout": limits.queue_timeout}}

    @app.get("/api/runs/{run}", response_model=RunInfo, summary="one run, by index or name",
             responses={404: {"description": "no such run"}})
    async def one_run(run: str):
        found = by_name.get(run) or (served[int(run)] if run.isdigit()
                                     and int(run) < len(served) else None)
        if found is None:
            raise ApiError(404, f"no run {run!r}; GET /api/runs lists them", "run")
        return found.info()

    @app.post("/api/translate", response_model=TranslateResponse, responses=ERRORS,
              summary="each run's n-best translations, with word links")
    async def translate(req: TranslateRequest):
        runs = pick(req.runs)
        check_length("source", req.source, runs)

        def work():
            return [R.translate(run, req.source, req.beam, req.n_best) for run in runs]

        return {"source": req.source, "runs": await slots.run(work)}

    @app.post("/api/align", response_model=AlignResponse, responses=ERRORS,
              summary="each run's word alignment: forced on a target, or free")
    async def align(req: AlignRequest):
        runs = pick(req.runs)
        check_length("source", req.source, runs)
        if req.target is not None:
            check_length("target", req.target, runs)
        if req.symmetrize and not any(r.reverse for r in runs):
            raise ApiError(422, "symmetrize: no run has a reverse run; start the server with "
                           "--reverse RUN (one per run)", "symmetrize")

        def work():
            results = [R.align(run, req.source, req.target, req.method, req.beam,
                               req.symmetrize) for run in runs]
            explorer = (R.explorer_data(results, req.source, req.target is not None,
                                        "nmt serve") if req.views else None)
            return [a.as_dict() for a in results], explorer

        results, explorer = await slots.run(work)
        return {"source": req.source, "target": req.target,
                "mode": "free" if req.target is None else "forced", "method": req.method,
                "symmetrize": req.symmetrize, "runs": results, "explorer": explorer}

    return app
