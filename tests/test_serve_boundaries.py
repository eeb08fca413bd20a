"""`nmt serve`'s boundaries, in-process (Starlette's TestClient and raw ASGI calls): each
class of hostile input is a 4xx of the one documented shape {"detail", "field", ...},
never a 500 and never more work than one request's share."""

from __future__ import annotations

import json

import anyio
import pytest

pytest.importorskip("fastapi", reason="nmt serve needs its extra: pip install -e '.[serve]'")
from starlette.testclient import TestClient  # noqa: E402

from nmt.serve import runs as served_runs  # noqa: E402
from nmt.serve.app import Busy, Limits, Slots, create_app  # noqa: E402
from tests.test_serve import runs  # noqa: E402,F401  (the module's tiny runs)


@pytest.fixture(scope="module")
def served(runs):  # noqa: F811
    return served_runs.load_runs([runs["bahdanau"], runs["transformer"]])


@pytest.fixture(scope="module")
def client(served):
    with TestClient(create_app(served), raise_server_exceptions=False) as c:
        yield c


def shaped(r, status: int, field: str | None) -> dict:
    """The documented error shape: JSON with detail (text) and field."""
    assert r.status_code == status, r.text
    body = r.json()
    assert isinstance(body["detail"], str) and body["detail"] and body["field"] == field, body
    assert "Traceback" not in r.text
    return body


def test_a_run_named_twice_decodes_once_and_more_names_than_runs_is_a_422(client, monkeypatch):
    calls = []
    real = served_runs.translate
    monkeypatch.setattr(served_runs, "translate",
                        lambda run, *a: calls.append(run.index) or real(run, *a))
    r = client.post("/api/translate", json={"source": "a b", "runs": [0, "bahdanau", 0]})
    shaped(r, 422, "runs")  # three references, two runs served
    r = client.post("/api/translate", json={"source": "a b", "runs": [1, "transformer"]})
    assert r.status_code == 200 and [x["run"] for x in r.json()["runs"]] == [1]
    assert calls == [1]
    r = client.post("/api/translate", json={"source": "a b", "runs": [1, 0]})
    assert [x["run"] for x in r.json()["runs"]] == [1, 0]  # the order asked


@pytest.mark.parametrize("path,field", [("/api/translate", "source"), ("/api/align", "source"),
                                        ("/api/align", "target")])
def test_text_that_is_not_unicode_is_a_422_naming_its_field(client, path, field):
    body = {"source": "abc \\ud800 def"} if field == "source" else {
        "source": "a b", "target": "x \\udfff"}
    raw = json.dumps(body).replace("\\\\u", "\\u").encode()  # a lone surrogate, escaped
    r = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert "surrogate" in shaped(r, 422, field)["detail"]


@pytest.mark.parametrize("ref", ["²", "١", "1" * 4301, "-0", " 1", "1.0", "０", "bahdanau "])
def test_a_run_reference_is_ascii_digits_or_an_exact_name(client, ref):
    r = client.get(f"/api/runs/{ref}")
    body = shaped(r, 404, "run")
    assert "0 (bahdanau)" in body["detail"] and "1 (transformer)" in body["detail"]


def test_run_references_that_name_a_run(client):
    assert client.get("/api/runs/1").json()["name"] == "transformer"
    assert client.get("/api/runs/bahdanau").json()["index"] == 0


def test_bodies_json_cannot_read_are_the_documented_422(client):
    for raw in (b"[" * 30_000 + b"]" * 30_000, b'{"source": "a", "beam": ' + b"7" * 5000 + b"}"):
        r = client.post("/api/translate", content=raw,
                        headers={"content-type": "application/json"})
        shaped(r, 422, "body")


def test_every_4xx_has_the_one_shape_and_no_page_may_be_framed(client):
    shaped(client.get("/no/such/path"), 404, None)
    shaped(client.delete("/api/translate"), 405, None)
    r = client.get("/api/runs")
    assert r.headers["x-frame-options"] == "DENY" and r.headers["x-request-id"]
    page = client.get("/")
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def test_only_the_allowed_host_names_are_answered(served):
    app = create_app(served, hosts=["127.0.0.1", "localhost"])
    with TestClient(app, base_url="http://127.0.0.1:8000") as c:
        assert c.get("/api/runs").status_code == 200
        assert c.get("/api/runs", headers={"host": "localhost:8000"}).status_code == 200
        r = c.get("/api/runs", headers={"host": "rebound.example.org"})
        assert "host" in shaped(r, 400, None)["detail"].lower()
        assert r.headers["x-request-id"]


def test_a_queue_timeout_of_zero_takes_a_free_slot_and_never_waits():
    async def main():
        slots = Slots(Limits(max_concurrent=1, queue_timeout=0.0))
        async with slots.hold():  # idle: the slot is free, so taken
            assert slots.busy == 1
            with pytest.raises(Busy):  # taken: no wait at all
                async with slots.hold():
                    pass
            assert slots.waiting == 0
        assert slots.busy == 0

    anyio.run(main)


def test_a_request_whose_client_has_gone_never_starts_its_decode(served, monkeypatch):
    """One decode holds the only slot; a second request's client hangs up while it waits:
    when the slot frees, its decode does not start, and the slot is free again."""
    calls = []
    real = served_runs.translate
    monkeypatch.setattr(served_runs, "translate",
                        lambda run, *a: calls.append(run.index) or real(run, *a))
    app = create_app(served, Limits(max_concurrent=1, queue_timeout=5.0, decode_delay=0.4))
    body = json.dumps({"source": "a b", "runs": [0]}).encode()
    scope = {"type": "http", "http_version": "1.1", "method": "POST", "path": "/api/translate",
             "raw_path": b"/api/translate", "query_string": b"", "root_path": "",
             "scheme": "http", "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 1),
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())]}
    statuses = {}

    def client(name: str, hangs_up: bool):
        sent = False

        async def receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            if hangs_up:
                return {"type": "http.disconnect"}
            await anyio.sleep_forever()

        async def send(message):
            if message["type"] == "http.response.start":
                statuses[name] = message["status"]

        return receive, send

    async def main():
        async with anyio.create_task_group() as group:
            group.start_soon(app, dict(scope), *client("stays", False))
            await anyio.sleep(0.1)
            group.start_soon(app, dict(scope), *client("leaves", True))

    anyio.run(main)
    assert statuses == {"stays": 200} and calls == [0]


# ------------------------------------------------------------------------------ pinned limits
# docs/serve.md promises these numbers; each test states the number itself, so a change
# to the constant, the default or the comparison fails here.


def test_the_documented_limits_are_the_servers(client):
    from nmt.serve.app import MAX_BODY

    assert (served_runs.MAX_WORDS, served_runs.MAX_CHARS, served_runs.MAX_PIECES,
            served_runs.MAX_BEAM, MAX_BODY) == (100, 1000, 400, 16, 64 * 1024)
    assert (Limits().max_concurrent, Limits().max_waiting, Limits().queue_timeout) == (2, 8, 10.0)
    limits = client.get("/api/runs").json()["limits"]
    assert limits == {"max_words": 100, "max_chars": 1000, "max_pieces": 400, "max_beam": 16,
                      "max_concurrent": 2, "queue_timeout": 10.0}


@pytest.mark.parametrize("field", ["source", "target"])
def test_a_sentence_of_100_words_is_answered_and_101_are_413(client, field):
    def ask(words: int):
        text = " ".join(["a"] * words)
        body = {"source": text} if field == "source" else {"source": "a", "target": text}
        return client.post("/api/align", json={**body, "runs": [0]})

    assert ask(100).status_code == 200
    assert "100 words" in shaped(ask(101), 413, field)["detail"]


def test_1000_characters_pass_the_character_limit_and_1001_do_not(client):
    at = " ".join(["abcdefghi"] * 100)[:999] + "j"  # 100 words, 1,000 characters
    assert len(at) == 1000 and len(at.split()) == 100
    r = client.post("/api/translate", json={"source": at, "runs": [0]})
    assert r.status_code == 200 or "characters" not in r.json()["detail"]  # pieces may stop it
    r = client.post("/api/translate", json={"source": at + "k", "runs": [0]})
    assert "1,000 characters" in shaped(r, 413, "source")["detail"]


def test_beam_and_n_best_stop_at_16(client):
    ok = client.post("/api/translate", json={"source": "a", "beam": 16, "n_best": 16,
                                             "runs": [0]})
    assert ok.status_code == 200 and len(ok.json()["runs"][0]["n_best"]) <= 16
    shaped(client.post("/api/translate", json={"source": "a", "beam": 17}), 422, "beam")


def test_a_body_of_64_kib_is_read_and_one_byte_more_is_413(client):
    pad = 64 * 1024 - len(b'{"source": "a", "x": ""}')
    at = b'{"source": "a", "x": "' + b" " * pad + b'"}'
    assert len(at) == 64 * 1024
    r = client.post("/api/translate", content=at, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["field"] == "x"  # read: the unknown field named
    over = at[:-2] + b' "}'
    shaped(client.post("/api/translate", content=over,
                       headers={"content-type": "application/json"}), 413, "body")


def test_the_cli_allows_its_address_localhost_and_the_names_given():
    from nmt.cli.serve import allowed_hosts
    from nmt.core.errors import NMTError

    assert allowed_hosts("127.0.0.1", ["nmt.example.org"]) == [
        "127.0.0.1", "localhost", "127.0.0.1", "::1", "nmt.example.org"]
    assert allowed_hosts("[::1]", [])[0] == "::1"
    assert allowed_hosts("127.0.0.1", ["*.example.org", "*"])[-2:] == ["*.example.org", "*"]
    for bad in ("nmt.*.org", "*example.org", "example.*"):
        with pytest.raises(NMTError, match="--allow-host"):
            allowed_hosts("127.0.0.1", [bad])
