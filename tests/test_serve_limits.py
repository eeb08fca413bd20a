"""Issue 50's serve and API items: int8 runs read (alignment, saliency, score, parameter
counts) with their float32 weights; the server's own limits are the ones that bind, in
JSON (a real `python -m nmt serve`, on ::1 where the machine has IPv6 loopback); the Host
check of an IPv6 address; `nmt.NMTError`; bytes where sentences are expected."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import anyio
import numpy as np
import pytest

import nmt
import nmt.core.errors
from nmt.serve import runs as served_runs
from nmt.serve.app import Busy, Limits, Slots, create_app
from nmt.training.trainer import Trainer
from tests.test_cli import run_cli
from tests.test_train import MODELS, short_pairs, tiny_config

pytest.importorskip("fastapi", reason="nmt serve needs its extra: pip install -e '.[serve]'")
httpx = pytest.importorskip("httpx", reason="pip install -e '.[serve]'")
from starlette.testclient import TestClient  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def runs(data_root, tmp_path_factory) -> dict[str, Path]:
    """Three tiny runs (4 steps: the answers are nonsense, the plumbing is not)."""
    folder = tmp_path_factory.mktemp("limits_runs")
    out = {}
    for name in ("bahdanau", "transformer", "fixed_context"):
        cfg = tiny_config(data_root, folder, name, MODELS[name], max_steps=4, threads=1)
        Trainer(cfg, quiet=True).fit()
        out[name] = cfg.run_dir
    return out


# ------------------------------------------------------------------ item 2: int8 reads float32


@pytest.mark.parametrize("family", ["bahdanau", "transformer"])
def test_int8_on_pytorch_reads_links_and_scores_with_the_float32_weights(runs, data_root,
                                                                         family):
    """int8 decodes; saliency (a backward pass, which quantised Linear layers do not have),
    the forced attention and score read the float32 weights: each equals the float32
    model's reading of the same hypothesis."""
    texts, refs = short_pairs(data_root, 3)
    plain, int8 = nmt.load(runs[family]), nmt.load(runs[family], quantize="int8")
    assert any("quantized" in type(m).__module__ for m in int8.module.modules())
    src_ids = plain.vocab.encode_src(texts)
    for method in ("saliency", "attention"):
        found = int8.translate(texts, alignments=True, method=method)
        ids = [plain.vocab.encode_tgt([t.text])[0] for t in found]
        ref = plain.align_ids(src_ids, ids, method, mode="free")
        for t, rec in zip(found, ref):
            assert t.links == rec.links and np.array_equal(t.word_matrix, rec.word_weights)
    assert int8.score(texts, refs) == plain.score(texts, refs)
    assert not any("quantized" in type(m).__module__ for m in int8.float_module.modules())
    again = int8.on("pytorch", "int8")  # from the float32 weights, not the int8 copy
    assert again.float_module is int8.float_module
    assert [t.text for t in again.translate(texts)] == [t.text for t in int8.translate(texts)]


def test_the_cli_translates_int8_with_saliency_links(runs, capsys):
    for family in ("bahdanau", "transformer"):
        code, out, err = run_cli(capsys, "translate", "--run", runs[family], "--quantize",
                                 "int8", "--alignments", "--method", "saliency", "ein hund")
        assert code == 0 and "Traceback" not in err, err
        assert "\t" in out  # text<TAB>links


def test_served_int8_runs_answer_with_saliency_and_count_every_weight(runs):
    """docs/deploy.md's form: every run asked for CTranslate2 in int8; fixed_context (links
    from saliency) and Bahdanau decode on PyTorch in int8. /api/translate is 200 with links,
    and /api/runs counts the float32 weights (int8 packs its own outside parameters())."""
    paths = [runs["fixed_context"], runs["bahdanau"]]
    served = served_runs.load_runs(paths, engine="ctranslate2", quantize="int8",
                                   say=lambda line: None)
    assert all(s.model.engine.quantize == "int8" for s in served)
    with TestClient(create_app(served), raise_server_exceptions=False) as client:
        r = client.post("/api/translate", json={"source": "ein hund", "beam": 2})
        assert r.status_code == 200, r.text
        first = r.json()["runs"][0]
        assert first["links_method"] == "saliency" and first["links"] is not None
        counted = [run["parameters"] for run in client.get("/api/runs").json()["runs"]]
    floats = [sum(p.numel() for p in nmt.load(p).module.parameters()) for p in paths]
    assert counted == floats and all(isinstance(n, int) and n > 0 for n in counted)


# ------------------------------------------------------------------ item 15: nmt.NMTError


def test_nmt_error_is_exported_and_catches_what_load_raises(tmp_path):
    assert nmt.NMTError is nmt.core.errors.NMTError and "NMTError" in nmt.__all__
    with pytest.raises(nmt.NMTError):
        nmt.load(tmp_path / "no_such_run")
    with pytest.raises(nmt.NMTError):
        nmt.load(None)
    assert "nmt.NMTError" in (ROOT / "docs" / "api.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------ item 19: bytes


@pytest.mark.parametrize("call, named", [
    (lambda m: m.translate(b"ein hund"), "texts:"),
    (lambda m: m.translate(bytearray(b"ein hund")), "texts:"),
    (lambda m: m.translate(memoryview(b"ein hund")), "texts:"),
    (lambda m: m.translate([b"ein hund"]), "texts[0]:"),
    (lambda m: list(m.translate_chunks(b"ein hund\nder hund\n")), "lines:"),
    (lambda m: m.align(b"ein hund"), "sources:"),
    (lambda m: m.align(["ein hund"], b"a dog"), "targets:"),
    (lambda m: m.score([b"ein hund"], ["a dog"]), "sources[0]:"),
], ids=["translate", "translate-bytearray", "translate-memoryview", "translate-item",
        "chunks", "align", "align-targets", "score-item"])
def test_bytes_where_sentences_are_expected_is_one_line_saying_decode(runs, call, named):
    """Iterating bytes gives one int per byte: never translated, always named with how to
    decode them."""
    model = nmt.load(runs["bahdanau"])
    with pytest.raises(nmt.NMTError) as caught:
        call(model)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(named), message
    assert "decode" in message and any(k in message for k in ("bytes", "bytearray",
                                                               "memoryview")), message


# ------------------------------------------------------------------ item 19: max_waiting


def test_max_waiting_requests_wait_and_the_next_one_is_refused_at_once():
    """One decode slot, two may wait: the two wait, the third is 503 at once (not after
    the timeout), and the waiters then get their slot in turn."""

    async def main():
        slots = Slots(Limits(max_concurrent=1, max_waiting=2, queue_timeout=3.0))
        served = []

        async def waiter(k):
            async with slots.hold():
                served.append(k)

        async with anyio.create_task_group() as group:
            async with slots.hold():
                group.start_soon(waiter, 1)
                group.start_soon(waiter, 2)
                while slots.waiting < 2:
                    await anyio.sleep(0.01)
                started = time.monotonic()
                with pytest.raises(Busy, match="2 requests waiting"):
                    async with slots.hold():
                        pass
                assert time.monotonic() - started < 1 and slots.waiting == 2
        assert served == [1, 2] and slots.busy == slots.waiting == 0
        none_wait = Slots(Limits(max_concurrent=1, max_waiting=0, queue_timeout=30.0))
        async with none_wait.hold():
            with pytest.raises(Busy):
                async with none_wait.hold():
                    pass

    anyio.run(main)


# ------------------------------------------------------------------ item 12: IPv6 Host


def test_an_ipv6_address_is_allowed_as_its_clients_send_it(runs):
    from nmt.cli.serve import allowed_hosts
    from nmt.serve.app import host_patterns

    assert host_patterns(["::1", "[::1]", "0:0:0:0:0:0:0:1", "FE80::A", "127.0.0.1",
                          "localhost", "*.example.org"]) == [
        "[::1]", "[::1]", "[::1]", "[fe80::a]", "127.0.0.1", "localhost", "*.example.org"]
    served = served_runs.load_runs([runs["bahdanau"]])
    app = create_app(served, hosts=allowed_hosts("::1", []))
    with TestClient(app, base_url="http://[::1]:8000") as client:
        assert client.get("/healthz").status_code == 200
        assert client.get("/healthz", headers={"host": "[::1]:8000"}).status_code == 200
        assert client.get("/healthz", headers={"host": "[::1]"}).status_code == 200
        assert client.get("/healthz", headers={"host": "localhost:8000"}).status_code == 200
        refused = client.get("/healthz", headers={"host": "[::2]:8000"})
        assert refused.status_code == 400 and refused.json()["field"] is None


# ------------------------------------------------------------------ a real server: items 12, 13


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


HOST = "::1" if ipv6_loopback() else "127.0.0.1"
FAMILY = socket.AF_INET6 if HOST == "::1" else socket.AF_INET


@pytest.fixture(scope="module")
def server(runs, tmp_path_factory):
    """`python -m nmt serve` on HOST (::1 where there is IPv6 loopback), one decode at a
    time and one waiter; yields (base URL, port)."""
    with socket.socket(FAMILY) as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    log_path = tmp_path_factory.mktemp("limits_log") / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nmt", "serve", str(runs["bahdanau"]), "--host", HOST,
             "--port", str(port), "--threads", "1", "--max-concurrent", "1",
             "--max-waiting", "1"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "OMP_NUM_THREADS": "1"})
        try:
            deadline = time.monotonic() + 90
            while True:  # listening means loaded: uvicorn binds after the app is built
                assert proc.poll() is None, log_path.read_text()
                try:
                    socket.create_connection((HOST, port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "server did not start"
                    time.sleep(0.1)
            shown = f"[{HOST}]" if ":" in HOST else HOST
            yield f"http://{shown}:{port}", port
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.mark.skipif(HOST != "::1", reason="no IPv6 loopback on this machine")
def test_a_server_on_ipv6_loopback_answers_its_own_clients(server):
    url, _ = server
    r = httpx.get(f"{url}/healthz")  # Host: [::1]:PORT, as every client sends it
    assert r.status_code == 200 and r.json()["status"] == "ok", r.text
    assert httpx.get(f"{url}/api/runs").json()["runs"][0]["name"] == "bahdanau"


def test_past_the_servers_own_request_limit_the_503_is_json_with_retry_after(server):
    """max_requests (1 decode + 1 waiter + 32) requests in flight are admitted and the
    next is 503 from the app: JSON, Retry-After, X-Request-ID (uvicorn's own limit, whose
    503 is plain text, is not set). The bodies that never arrive hold their requests in
    flight; once their clients go, the server answers again."""
    url, port = server
    limit = Limits(max_concurrent=1, max_waiting=1).max_requests
    assert limit == 34 and Limits().max_requests == 42  # docs/serve.md's number
    head = (b"POST /api/translate HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
            b"application/json\r\nContent-Length: 100\r\n\r\n{\"source\": ")

    def health() -> httpx.Response:
        return httpx.get(f"{url}/healthz", headers={"host": "localhost"}, timeout=10)

    def until(check, what: str) -> httpx.Response:
        deadline = time.monotonic() + 20
        while not check(r := health()):
            assert time.monotonic() < deadline, f"{what}: {r.status_code} {r.text}"
            time.sleep(0.05)
        return r

    with ExitStack() as stack:
        for _ in range(limit - 1):  # each one's body never ends: in flight until it hangs up
            s = stack.enter_context(socket.create_connection((HOST, port)))
            s.sendall(head)
        at = until(lambda r: r.status_code == 200 and r.json()["requests"] == limit,
                   "the last request the limit admits")
        assert at.json()["busy"] == 0  # none of them has reached a decode slot
        s = stack.enter_context(socket.create_connection((HOST, port)))
        s.sendall(head)
        over = until(lambda r: r.status_code != 200, "one request past the limit")
        assert over.status_code == 503, over.text
        assert over.headers["content-type"] == "application/json"
        assert over.headers["retry-after"] == "1" and over.headers["x-request-id"]
        body = over.json()
        assert f"{limit} requests in flight" in body["detail"] and body["field"] is None
        assert body["retry_after"] == 1
        work = httpx.post(f"{url}/api/translate", json={"source": "ein hund"},
                          headers={"host": "localhost"}, timeout=10)
        assert work.status_code == 503 and work.json()["field"] is None
    after = until(lambda r: r.status_code == 200 and r.json()["requests"] == 1,
                  "the requests of clients that went away are released")
    assert after.json()["waiting"] == 0
    r = httpx.post(f"{url}/api/translate", json={"source": "ein hund"},
                   headers={"host": "localhost"}, timeout=30)
    assert r.status_code == 200, r.text


def test_uvicorn_is_given_no_limit_of_its_own(monkeypatch, runs):
    """The CLI hands uvicorn no limit_concurrency: its plain-text 503 never answers first."""
    import uvicorn

    given = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: given.update(kwargs))
    from nmt.cli.serve import serve

    serve([runs["bahdanau"]], port=0)
    assert given["limit_concurrency"] is None and given["timeout_keep_alive"] == 5
