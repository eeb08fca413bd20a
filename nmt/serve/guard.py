"""The outermost middleware of `nmt serve` and the one shape of its errors (docs/serve.md,
"Limits and errors"): a request id on every response, the cap on requests in flight and
on the body's size, JSON for every error, and a 500 with the id, never a traceback.
"""

from __future__ import annotations

import json
import logging
import uuid

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from nmt.serve.runs import MAX_CHARS, MAX_WORDS

log = logging.getLogger("nmt.serve")
MAX_BODY = 64 * 1024  # bytes of a request body


class ApiError(HTTPException):
    """An error answered as JSON {"detail", "field", ...}: the request's fault (4xx) or a
    full server (503)."""

    def __init__(self, status: int, detail: str, field: str | None = None, **extra):
        super().__init__(status_code=status, detail=detail)
        self.field, self.extra = field, extra


class Busy(ApiError):
    def __init__(self, detail: str):
        super().__init__(503, detail, retry_after=1)


class InFlight:
    """The requests in flight, of every kind, counted by Guard; at `limit`, the next is
    refused (503, Retry-After) before anything of it is read."""

    def __init__(self, limit: int | None = None):
        self.limit, self.count = limit, 0

    def enter(self) -> bool:
        if self.limit is not None and self.count >= self.limit:
            return False
        self.count += 1
        return True

    def leave(self) -> None:
        self.count -= 1


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
    requests in flight (`InFlight`) and on the body's size, X-Frame-Options: DENY on every
    response, one JSON shape for every error (a plain-text error from below, such as the
    Host check's, is rewritten as {"detail", "field": null}), and a 500 with the id, never
    a traceback, when something fails; the traceback is logged with the id."""

    def __init__(self, app, in_flight: InFlight | None = None, max_body: int = MAX_BODY):
        self.app, self.max_body = app, max_body
        self.in_flight = in_flight or InFlight()

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

        refused = self.refusal(scope)
        if refused is not None:
            return await self.respond(send_with_id, refused.status_code, error_body(refused),
                                      [(b"retry-after", b"1")] if isinstance(refused, Busy) else [])
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
        finally:
            self.in_flight.leave()

    def refusal(self, scope) -> ApiError | None:
        """Why a request is refused before any of its body is read: a Content-Length that
        is not a number (400) or over the cap (413), or the requests in flight at their
        limit (503). None: admitted, and counted in flight until it is answered."""
        length = dict(scope.get("headers") or []).get(b"content-length", b"0")
        if not length.isdigit():
            return ApiError(400, "Content-Length is not a number", "body")
        if int(length) > self.max_body:
            return too_large(self.max_body)
        if not self.in_flight.enter():
            return Busy(f"server busy: {self.in_flight.limit} requests in flight (the limit); "
                        "retry shortly")
        return None

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
