"""`nmt translate` streams: output in input order chunk by chunk, flushed as it goes;
`decode.n_best` is the default number of hypotheses, `--n-best` overrides it."""

from __future__ import annotations

import io
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.config import DecodeConfig
from nmt.errors import NMTError
from nmt.rundir import load_run
from nmt.train import Trainer
from nmt.translate import translate_lines, translate_nbest, write_nbest
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


def test_chunks_come_out_in_input_order_and_are_flushed(run, data_root):
    _, vocab, model, _ = load_run(run)
    sources, _ = short_pairs(data_root, 12)
    cfg = DecodeConfig(beam=1, batch_size=2)
    expected = [nbest[0][0] for nbest in translate_nbest(model, vocab, vocab.encode_src(sources),
                                                         cfg)]
    out = Recorder()
    write_nbest(translate_lines(model, vocab, iter(sources), cfg, chunk=5), out, n_best=1)
    assert out.getvalue().splitlines() == expected
    assert [len(text.splitlines()) for text in out.flushed] == [5, 10, 12]


def test_what_was_decoded_before_a_failure_is_already_written(run, data_root):
    _, vocab, model, _ = load_run(run)
    sources, _ = short_pairs(data_root, 8)

    def lines():
        yield from sources[:7]
        raise OSError("the input went away")

    out = Recorder()
    with pytest.raises(OSError):
        write_nbest(translate_lines(model, vocab, lines(), DecodeConfig(beam=1), chunk=3), out,
                    n_best=1)
    assert len(out.flushed[-1].splitlines()) == 6  # two whole chunks written and flushed


def test_decode_n_best_is_the_default_and_the_flag_overrides_it(run, data_root):
    _, vocab, model, _ = load_run(run)
    sources, _ = short_pairs(data_root, 3)
    chunks = list(translate_lines(model, vocab, sources, DecodeConfig(beam=4, n_best=3)))
    assert [len(nbest) for nbest in chunks[0]] == [3, 3, 3]
    chunks = list(translate_lines(model, vocab, sources, DecodeConfig(beam=4, n_best=3),
                                  n_best=2))
    assert [len(nbest) for nbest in chunks[0]] == [2, 2, 2]
    with pytest.raises(NMTError, match="n-best 5.*beam 4"):
        list(translate_lines(model, vocab, sources, DecodeConfig(beam=4), beam=4, n_best=5))


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
