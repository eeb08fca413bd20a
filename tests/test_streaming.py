"""`nmt translate` streams: output in input order chunk by chunk, flushed as it goes;
`decode.n_best` is the default number of hypotheses, `--n-best` overrides it."""

from __future__ import annotations

import dataclasses
import io
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

import nmt
from nmt.cli.output import write_translations
from nmt.core.config import DecodeConfig
from nmt.core.errors import NMTError
from nmt.decoding.translate import translate_ids
from nmt.training.trainer import Trainer
from tests.test_train import MODELS, short_pairs, tiny_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(data_root, tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    cfg = tiny_config(data_root, runs, "b", MODELS["bahdanau"], max_steps=3, threads=1)
    Trainer(cfg, quiet=True).fit()
    return cfg.run_dir


class Recorder(io.StringIO):
    """A stdout that remembers what had been written at each flush."""

    def __init__(self):
        super().__init__()
        self.flushed: list[str] = []

    def flush(self):
        self.flushed.append(self.getvalue())


def _model(run, **decode):
    model = nmt.load(run)
    model.cfg = dataclasses.replace(model.cfg, decode=DecodeConfig(**decode))
    return model


def test_chunks_come_out_in_input_order_and_are_flushed(run, data_root):
    model = _model(run, beam=1, batch_size=2)
    sources, _ = short_pairs(data_root, 12)
    expected = translate_ids(model.module, model.vocab, model.vocab.encode_src(sources),
                             model.cfg.decode)
    out = Recorder()
    write_translations(model.translate_chunks(iter(sources), chunk=5), out)
    assert out.getvalue().splitlines() == expected
    assert [len(text.splitlines()) for text in out.flushed] == [5, 10, 12]


def test_what_was_decoded_before_a_failure_is_already_written(run, data_root):
    model = _model(run, beam=1)
    sources, _ = short_pairs(data_root, 8)

    def lines():
        yield from sources[:7]
        raise OSError("the input went away")

    out = Recorder()
    with pytest.raises(OSError):
        write_translations(model.translate_chunks(lines(), chunk=3), out)
    assert len(out.flushed[-1].splitlines()) == 6  # two whole chunks written and flushed


def test_n_best_lists_and_their_limit(run, data_root):
    model = _model(run, beam=4)
    sources, _ = short_pairs(data_root, 3)
    chunks = list(model.translate_chunks(sources, n_best=3))
    assert [len(t.hypotheses) for t in chunks[0]] == [3, 3, 3]
    scores = [h.score for h in chunks[0][0].hypotheses]
    assert scores == sorted(scores, reverse=True)
    out = Recorder()
    write_translations([chunks[0]], out, n_best=3)
    assert len(out.getvalue().splitlines()) == 9
    with pytest.raises(NMTError, match="n-best 5.*beam 4"):
        model.translate(sources, beam=4, n_best=5)


def test_the_cli_writes_the_first_chunk_before_stdin_closes(run, data_root):
    sources, _ = short_pairs(data_root, 40)
    lines = (sources * 30)[:1000]  # exactly one chunk
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "nmt", "translate", "--run", str(run)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    try:
        proc.stdin.write("".join(x + "\n" for x in lines).encode())
        proc.stdin.flush()  # ... and stdin stays open
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "no output within 120 s while stdin was still open"
        first = proc.stdout.readline().decode()
        proc.stdin.write(b"ein letzter satz\n")
        proc.stdin.close()
        rest = proc.stdout.read().decode().splitlines()
        assert proc.wait(60) == 0
        assert first and len(rest) == 1000  # 999 of the first chunk + the last line
    finally:
        proc.kill()


def test_the_cli_n_best_defaults_to_the_config(run, capsys, monkeypatch, data_root):
    from tests.test_cli import run_cli

    config = run / "config.yaml"
    config.write_text(config.read_text().replace("n_best: 1", "n_best: 2"))
    try:
        code, out, err = run_cli(capsys, "translate", "--run", run, "--beam", "3", "ein hund")
        assert code == 0, err
        assert len(out.splitlines()) == 2 and all("\t" in x for x in out.splitlines())
        code, out, err = run_cli(capsys, "translate", "--run", run, "--beam", "3", "--n-best",
                                 "1", "ein hund")
        assert code == 0 and len(out.splitlines()) == 1 and "\t" not in out
    finally:
        config.write_text(config.read_text().replace("n_best: 2", "n_best: 1"))
