"""`nmt serve` as a user meets it: a real server (`python -m nmt serve RUN RUN`) on 127.0.0.1
over two tiny runs, driven with httpx (the API equals the Python API that `nmt translate` and
`nmt align` use; every bad input is a 4xx naming its field or limit; full decode slots give
503; a client that goes away leaves the server answering) and with Debian's chromium (the
page). The 500 path, the symmetrised view and the CLI's one-line errors run in-process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="nmt serve needs its extra: pip install -e '.[serve]'")
pytest.importorskip("uvicorn", reason="nmt serve needs its extra: pip install -e '.[serve]'")
httpx = pytest.importorskip("httpx", reason="pip install -e '.[serve]'")

import nmt  # noqa: E402
from nmt.align.bidirectional import flip_record, symmetrized_records  # noqa: E402
from nmt.core.config import config_to_dict  # noqa: E402
from nmt.models.checks import config_from_dict  # noqa: E402
from nmt.serve.runs import MAX_CHARS, MAX_WORDS  # noqa: E402
from nmt.training.trainer import Trainer  # noqa: E402
from tests.serve_page import ask, open_url  # noqa: E402
from tests.test_cli import assert_user_error, run_cli  # noqa: E402
from tests.test_train import MODELS, short_pairs, tiny_config  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TIGHT = ["--max-concurrent", "1", "--max-waiting", "1", "--queue-timeout", "0.5",
         "--decode-delay", "1.5"]  # one decode at a time, each holding its slot 1.5 s


@pytest.fixture(scope="module")
def runs(data_root, tmp_path_factory) -> dict[str, Path]:
    """Two tiny runs of one corpus (4 steps: the answers are nonsense, the plumbing is not)
    and a reverse run (tgt-src) for the symmetrised view."""
    folder = tmp_path_factory.mktemp("serve_runs")
    out = {}
    for name, family, pair in (("bahdanau", "bahdanau", None),
                               ("transformer", "transformer", None),
                               ("reverse", "bahdanau", "tgt-src")):
        cfg = tiny_config(data_root, folder, name, MODELS[family], max_steps=4, threads=1)
        if pair:
            cfg = config_from_dict(config_to_dict(cfg), overrides=[f"data.pair={pair}"])
        Trainer(cfg, quiet=True).fit()
        out[name] = cfg.run_dir
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def servers(*arg_lists: list[str], log_dir: Path):
    """Start one `python -m nmt serve ARGS --port P` per argument list (all at once), wait
    for each /healthz; yields their base URLs; stops them."""
    procs, urls = [], []
    try:
        for k, args in enumerate(arg_lists):
            port = free_port()
            log = open(log_dir / f"server{k}.log", "w")  # noqa: SIM115
            procs.append((subprocess.Popen(
                [sys.executable, "-m", "nmt", "serve", *map(str, args), "--port", str(port)],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "OMP_NUM_THREADS": "1"}), log))
            urls.append(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 90
        for (proc, _), url in zip(procs, urls):
            while True:
                if proc.poll() is not None:
                    raise AssertionError(f"server exited: {(log_dir / 'server0.log').read_text()}")
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        yield urls
    finally:
        for proc, log in procs:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


@pytest.fixture(scope="module")
def urls(runs, tmp_path_factory):
    """The server of the tests (default limits) and a tight one (TIGHT)."""
    pair = [runs["bahdanau"], runs["transformer"]]
    with servers(pair, [*pair, *TIGHT], log_dir=tmp_path_factory.mktemp("logs")) as found:
        yield found


@pytest.fixture(scope="module")
def url(urls) -> str:
    return urls[0]


@pytest.fixture(scope="module")
def models(runs):
    return [nmt.load(runs["bahdanau"]), nmt.load(runs["transformer"])]


@pytest.fixture(scope="module")
def sentences(data_root):
    return short_pairs(data_root, 3)


def post(url: str, path: str, body, **kwargs) -> httpx.Response:
    if isinstance(body, bytes):
        return httpx.post(url + path, content=body, timeout=30,
                          headers={"content-type": "application/json"}, **kwargs)
    return httpx.post(url + path, json=body, timeout=30, **kwargs)


def no_traceback(response: httpx.Response) -> None:
    assert "Traceback" not in response.text and 'File "' not in response.text, response.text


# ----------------------------------------------------------------------------- the API


def test_runs_are_listed_by_index_and_name(url, models):
    r = httpx.get(f"{url}/api/runs")
    assert r.status_code == 200 and r.headers["x-request-id"]
    runs = r.json()["runs"]
    assert [(x["index"], x["name"], x["family"], x["pair"]) for x in runs] == [
        (0, "bahdanau", "bahdanau", "src-tgt"), (1, "transformer", "transformer", "src-tgt")]
    assert [x["parameters"] for x in runs] == [
        sum(p.numel() for p in m.module.parameters()) for m in models]
    assert "path" not in json.dumps(runs) and "/" not in json.dumps([x["name"] for x in runs])
    assert httpx.get(f"{url}/api/runs/transformer").json()["index"] == 1
    missing = httpx.get(f"{url}/api/runs/7")
    assert missing.status_code == 404 and missing.json()["field"] == "run"
    paths = httpx.get(f"{url}/openapi.json").json()["paths"]
    assert paths.keys() >= {"/api/translate", "/api/align", "/api/runs", "/healthz"}
    for path in ("/api/translate", "/api/align"):  # the statuses the limits answer with
        responses = paths[path]["post"]["responses"]
        assert responses.keys() >= {"200", "413", "422", "503"}
        assert "out of range" in responses["422"]["description"]  # ours, not FastAPI's


def test_translate_equals_the_python_api(url, models, sentences):
    sources = sentences[0]
    for source in sources:
        r = post(url, "/api/translate", {"source": source, "beam": 3, "n_best": 2})
        assert r.status_code == 200, r.text
        for got, model in zip(r.json()["runs"], models):
            [want] = model.translate([source], beam=3, n_best=2, alignments=True)
            assert got["text"] == want.text and got["score"] == want.score
            assert [(h["text"], h["score"]) for h in got["n_best"]] == [
                (h.text, h.score) for h in want.hypotheses]
            assert [tuple(x) for x in got["links"]] == list(want.links)
    one = post(url, "/api/translate", {"source": sources[0], "runs": ["transformer"]}).json()
    assert [x["name"] for x in one["runs"]] == ["transformer"]
    assert one["runs"][0]["text"] == models[1].translate([sources[0]])[0].text  # decode.beam


@pytest.mark.parametrize("method", ["attention", "saliency"])
def test_align_equals_the_python_api_free_and_forced(url, models, sentences, method):
    source, target = sentences[0][1], sentences[1][1]
    for tgt in (None, target):
        r = post(url, "/api/align", {"source": source, "target": tgt, "method": method,
                                     "views": True})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["mode"] == ("free" if tgt is None else "forced")
        for got, model in zip(body["runs"], models):
            [want] = model.align([source], None if tgt is None else [tgt], method)
            assert (got["src_words"], got["tgt_words"]) == (want.src_words, want.tgt_words)
            assert np.allclose(got["matrix"], want.word_weights, atol=1e-6)
            assert [tuple(x) for x in got["links"]] == want.links
            if tgt is not None:
                assert got["target_logprob"] == pytest.approx(model.score([source], [tgt])[0])
        panels = body["explorer"]["panels"]
        assert [p["title"] for p in panels] == [f"bahdanau · {method}",
                                                f"transformer · {method}"]
        layers = (2, 4) if method == "attention" else (1, 1)  # saliency: one map
        assert (panels[1]["layers"], panels[1]["heads"]) == layers


def test_free_alignment_follows_the_beam_asked(url, models, sentences):
    source = sentences[0][2]
    body = post(url, "/api/align", {"source": source, "beam": 3}).json()
    for got, model in zip(body["runs"], models):
        [t] = model.translate([source], beam=3, alignments=True)
        assert got["tgt_words"] == t.hypotheses[0].tgt_words and [tuple(x) for x in got["links"]] == t.links
    widened = max(m.cfg.decode.beam for m in models) + 2  # n-best over each run's beam
    body = post(url, "/api/align", {"source": source, "n_best": widened}).json()
    asked = post(url, "/api/translate", {"source": source, "n_best": widened}).json()
    for got, said, model in zip(body["runs"], asked["runs"], models):
        [t] = model.translate([source], beam=widened, alignments=True)
        assert said["beam"] == widened and said["text"] == t.text  # the search translate ran
        assert got["tgt_words"] == t.hypotheses[0].tgt_words  # is the one aligned


BAD = [  # (path, body, status, field)
    ("/api/translate", {}, 422, "source"),
    ("/api/translate", {"source": ""}, 422, "source"),
    ("/api/translate", {"source": "   "}, 422, "source"),
    ("/api/translate", {"source": "\ufeff "}, 422, "source"),  # a byte-order mark is no text
    ("/api/align", {"source": "a", "target": "\ufeff"}, 422, "target"),
    ("/api/translate", {"source": 5}, 422, "source"),
    ("/api/translate", {"source": ["a"]}, 422, "source"),
    ("/api/translate", {"source": "a", "beam": "3"}, 422, "beam"),
    ("/api/translate", {"source": "a", "beam": 0}, 422, "beam"),
    ("/api/translate", {"source": "a", "beam": 99}, 422, "beam"),
    ("/api/translate", {"source": "a", "beam": 2, "n_best": 3}, 422, "n_best"),
    ("/api/translate", {"source": "a", "path": "/etc/passwd"}, 422, "path"),
    ("/api/translate", {"source": "a", "runs": [5]}, 422, "runs"),
    ("/api/translate", {"source": "a", "runs": ["../runs/x"]}, 422, "runs"),
    ("/api/translate", {"source": "a", "runs": [0, "<b>" * 500]}, 422, "runs"),
    ("/api/translate", b'{"source": "a"', 422, "body"),
    ("/api/translate", b"[1, 2]", 422, "body"),
    ("/api/translate", b"", 422, "body"),
    ("/api/align", {"source": "a", "method": "lrp"}, 422, "method"),
    ("/api/align", {"source": "a", "target": ""}, 422, "target"),
    ("/api/align", {"source": "a", "target": 3}, 422, "target"),
    ("/api/align", {"source": "a", "symmetrize": "agreement"}, 422, "symmetrize"),
    ("/api/align", {"source": "a", "symmetrize": "maybe"}, 422, "symmetrize"),
    ("/api/translate", {"source": "w " * (MAX_WORDS + 1)}, 413, "source"),
    ("/api/translate", {"source": "x" * (MAX_CHARS + 1)}, 413, "source"),
    ("/api/align", {"source": "a", "target": "w " * (MAX_WORDS + 1)}, 413, "target"),
    ("/api/align", {"source": "a " * 40_000}, 413, "body"),  # over the body limit
]


@pytest.mark.parametrize("path,body,status,field", BAD,
                         ids=[f"{p[5:]}-{f}-{k}" for k, (p, _, _, f) in enumerate(BAD)])
def test_bad_input_is_a_4xx_naming_the_field(url, path, body, status, field):
    r = post(url, path, body)
    assert r.status_code == status, r.text
    data = r.json()
    assert data["field"] == field, data
    assert field in data["detail"] or field == "body"
    no_traceback(r)
    assert "<b>" not in r.text  # the values sent are not echoed
    if status == 413:
        assert any(limit in data["detail"] for limit in (
            f"{MAX_WORDS} words", f"{MAX_CHARS:,} characters", "bytes"))


def test_a_10000_character_request_leaves_the_server_answering(url, sentences):
    r = post(url, "/api/align", {"source": "ab" * 5000, "method": "saliency"})
    assert r.status_code == 413 and "1,000 characters" in r.json()["detail"]
    no_traceback(r)
    assert post(url, "/api/translate", {"source": sentences[0][0]}).status_code == 200


def test_503_when_every_decode_slot_is_taken(urls, sentences):
    """TIGHT: one decode at a time, one waiter, 0.5 s of waiting. Three at once: one
    decodes, one waits 0.5 s and gets 503, one finds the queue full and gets 503."""
    tight = urls[1]
    answers = []

    def send():
        answers.append(post(tight, "/api/translate", {"source": sentences[0][0]}))

    threads = [threading.Thread(target=send) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.status_code for r in answers) == [200, 503, 503]
    for r in answers:
        no_traceback(r)
        if r.status_code == 503:
            assert "busy" in r.json()["detail"] and r.headers["retry-after"] == "1"
    assert httpx.get(f"{tight}/healthz").json()["busy"] == 0


def test_a_client_that_goes_away_leaves_the_server_answering(urls, sentences):
    tight = urls[1]
    with pytest.raises(httpx.ReadTimeout):  # the decode holds its slot 1.5 s
        httpx.post(f"{tight}/api/align", json={"source": sentences[0][0]}, timeout=0.3)
    with socket.create_connection(("127.0.0.1", int(tight.rsplit(":", 1)[1]))) as s:
        s.sendall(b"POST /api/translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                  b"\r\nContent-Length: 100\r\n\r\n{\"source\": \"a")  # then hang up
    deadline = time.monotonic() + 10
    while httpx.get(f"{tight}/healthz").json()["busy"]:  # the abandoned decode finishes
        assert time.monotonic() < deadline
        time.sleep(0.1)
    r = post(tight, "/api/translate", {"source": sentences[0][1]})
    assert r.status_code == 200 and r.json()["runs"][0]["text"] is not None


# ----------------------------------------------------------------------------- in-process


def test_an_unexpected_error_is_500_with_a_request_id_and_no_traceback(runs, monkeypatch,
                                                                        caplog):
    from starlette.testclient import TestClient

    from nmt.serve import runs as served_runs
    from nmt.serve.app import create_app

    app = create_app(served_runs.load_runs([runs["bahdanau"]]))

    def broken(*args):
        raise RuntimeError("secret detail at /srv/models")

    monkeypatch.setattr(served_runs, "translate", broken)
    with TestClient(app, raise_server_exceptions=False) as client, caplog.at_level("ERROR"):
        r = client.post("/api/translate", json={"source": "a b"})
        assert r.status_code == 500
        rid = r.json()["request_id"]
        assert rid == r.headers["x-request-id"] and "secret" not in r.text
        no_traceback(r)
        assert client.get("/healthz").json()["busy"] == 0  # the slot came back
    logged = [rec for rec in caplog.records if rid in rec.getMessage()]
    assert logged and logged[0].exc_info and "secret detail" in str(logged[0].exc_info[1])


def test_symmetrised_view_with_a_reverse_run(runs, sentences):
    from starlette.testclient import TestClient

    from nmt.serve.app import create_app
    from nmt.serve.runs import load_runs

    app = create_app(load_runs([runs["bahdanau"]], [runs["reverse"]]))
    source, target = sentences[0][0], sentences[1][0]
    with TestClient(app) as client:
        assert client.get("/api/runs").json()["runs"][0]["reverse"] == "reverse"
        body = client.post("/api/align", json={"source": source, "target": target,
                                               "symmetrize": "agreement", "views": True}).json()
        own = client.post("/api/align", json={"source": source, "symmetrize": "agreement"})
    assert own.status_code == 200, own.text  # no target: the reverse reads the translation
    forward = own.json()["runs"][0]
    assert forward["tgt_words"] and forward["reverse"]["tgt_words"] == forward["tgt_words"]
    assert forward["reverse"]["src_words"] == source.split()  # in the forward orientation
    fwd = nmt.load(runs["bahdanau"]).align([source], [target])
    back = [flip_record(r) for r in nmt.load(runs["reverse"]).align([target], [source])]
    [sym] = symmetrized_records(fwd, back, "agreement", {})
    got = body["runs"][0]
    assert np.allclose(got["reverse"]["matrix"], back[0].word_weights, atol=1e-6)
    assert np.allclose(got["symmetrized"]["matrix"], sym.word_weights, atol=1e-6)
    assert [tuple(x) for x in got["symmetrized"]["links"]] == sym.links
    assert [p["role"] for p in body["explorer"]["panels"]] == ["forward", "reverse",
                                                                "symmetrized"]


def test_cli_errors_are_one_line(runs, capsys, monkeypatch):
    import importlib.util

    import uvicorn

    assert_user_error(run_cli(capsys, "serve", runs["bahdanau"], "--reverse", runs["bahdanau"]),
                      "--reverse", "pair is src-tgt")
    assert_user_error(run_cli(capsys, "serve", runs["bahdanau"], "--reverse", runs["reverse"],
                              "--reverse", runs["reverse"]), "one reverse run per RUN")
    started = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append(kw))
    code, _, err = run_cli(capsys, "serve", runs["bahdanau"])
    assert code == 0 and started[-1]["host"] == "127.0.0.1" and "warning" not in err
    code, _, err = run_cli(capsys, "serve", runs["bahdanau"], "--host", "0.0.0.0")
    assert code == 0 and started[-1]["host"] == "0.0.0.0"
    assert "warning: listening on every interface" in err
    import socket

    with socket.socket() as taken:  # a port in use: one line before the banner
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert_user_error(run_cli(capsys, "serve", runs["bahdanau"], "--port", str(busy)),
                          f"--port {busy}: cannot listen there")
    code, _, err = run_cli(capsys, "serve", runs["bahdanau"], "--port", "0")
    assert code == 0 and started[-1]["port"] > 0 and f":{started[-1]['port']}/" in err  # its port
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "fastapi" else find_spec(name, *a))
    assert_user_error(run_cli(capsys, "serve", runs["bahdanau"]), "pip install -e '.[serve]'")


# ----------------------------------------------------------------------------- the page


def cells(page, panel: int) -> list[str]:
    return page.eval_on_selector_all(f'.panel[data-panel="{panel}"] td',
                                     "tds => tds.map(t => t.dataset.v)")


def lit(page) -> list[list[str]]:
    return page.eval_on_selector_all("#panels .panel", """ps => ps.map(p =>
        [...p.querySelectorAll('td.hl')].map(td => td.dataset.row + ',' + td.dataset.col))""")


def test_the_page(url, models, sentences):
    (src0, src1, _), (tgt0, tgt1, _) = sentences
    with open_url(url) as (page, errors):
        assert "not explanation" in page.text_content("#caveat")
        assert page.is_visible("#caveat") and "bahdanau" in page.text_content("#runs-line")
        ask(page, src1, target=tgt1)  # forced: both runs on the same target words
        assert page.locator("#panels .panel").count() == 2  # one per run
        texts = page.eval_on_selector_all(".panel .translation .text", "es => es.map(e => e.textContent)")
        assert texts == [m.translate([src1])[0].text or "(empty)" for m in models]
        page.hover('.panel[data-panel="0"] th.tgt[data-row="1"]')
        words = len(models[0].align([src1], [tgt1])[0].src_words)
        assert lit(page) == [[f"1,{i}" for i in range(words)]] * 2  # its row in both panels
        page.hover('#sentence .word[data-col="0"]')
        assert all(c == [f"{j},0" for j in range(len(tgt1.split()))] for c in lit(page))
        before = [cells(page, 0), cells(page, 1)]
        page.select_option("#method", "saliency")
        page.wait_for_function("""() => document.querySelector('.panel[data-panel="0"] h2')
            .textContent.includes('saliency')""")
        assert [cells(page, 0), cells(page, 1)] != before
        assert [len(cells(page, 0)), len(cells(page, 1))] == [len(b) for b in before]
        page.select_option("#method", "attention")
        page.wait_for_function("""() => document.querySelector('.panel[data-panel="1"] h2')
            .textContent.includes('attention')""")
        panel = '.panel[data-panel="1"]'
        shown = cells(page, 1)
        page.select_option(f"{panel} select.layer", "1")  # the Transformer's layer control
        assert cells(page, 1) != shown and "layer 2" in page.text_content(f"{panel} .view")
        ask(page, src0, beam="2", n_best="2")  # free: each run on its own translation
        assert page.locator(".panel ol.nbest").count() == 2
        assert page.locator(".panel ol.nbest li").count() == 4
        page.hover('#sentence .word[data-col="1"]')  # the source is shared: its column
        columns = [{x.split(",")[1] for x in c} for c in lit(page)]
        assert all(c <= {"1"} for c in columns) and any(columns)  # (a translation may be empty)
        assert errors == [], errors
        shown = cells(page, 0)  # an alignment refused (413) after its translation came back
        page.fill("#target", "ga " * 101)
        page.click("#go")
        page.wait_for_function("() => !document.getElementById('go').disabled")
        assert "101 words" in page.text_content("#message")
        page.select_option("#method", "saliency")  # the views redraw the sentence shown
        page.wait_for_function("""() => document.querySelector('.panel[data-panel="0"] h2')
            .textContent.includes('saliency')""")
        assert len(cells(page, 0)) == len(shown)
        assert [e for e in errors if "413" not in e] == [], errors
