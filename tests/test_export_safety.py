"""Issue 50's export items (docs/deploy.md, "Export"): `nmt export --out` deletes nothing it
did not write (1); two processes exporting one run at once both succeed (3); the stamp's
quantisation decides what the engine runs (4); a damaged export is rebuilt (5); the stamp
names the weights exported, even when training replaces the checkpoint meanwhile (8). And
the same eyes on the rest: the file lock between threads, scores.json, the encoded-split
cache."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import nmt
from nmt.core.checkpoint import load_checkpoint, save_checkpoint
from nmt.core.errors import NMTError
from nmt.core.locks import file_lock
from nmt.core.rundir import RunDir
from nmt.decoding import export as exporting
from nmt.decoding.engines import engine_label
from nmt.decoding.export import export, export_dir, stale
from nmt.models import runs as model_runs
from tests.test_cli import assert_user_error, run_cli
from tests.test_train import MODELS, short_pairs, tiny_config

pytest.importorskip("ctranslate2")  # the [deploy] extra; make install brings it

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def trained(data_root, tmp_path_factory) -> Path:
    """A tiny Transformer (a few steps: these tests are about files, not translations)."""
    from nmt.training.trainer import Trainer

    cfg = tiny_config(data_root, tmp_path_factory.mktemp("export_safety"), "transformer",
                      MODELS["transformer"], max_steps=10, threads=1, valid_every=10,
                      valid_sentences=8)
    Trainer(cfg, quiet=True).fit()
    return cfg.run_dir


@pytest.fixture
def run(trained, tmp_path) -> Path:
    """A private copy of the run, which a test may export into, damage or retrain."""
    return Path(shutil.copytree(trained, tmp_path / "run"))


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _stamp(folder: Path) -> dict:
    return json.loads((folder / "export.json").read_text())


# 1. `nmt export --out DIR` writes only its own files


def test_1_export_refuses_a_folder_that_is_not_an_export_and_deletes_nothing(run, capsys):
    victim = run.parent / "victim"
    shutil.copytree(run, victim)
    before = _files(victim)
    assert_user_error(run_cli(capsys, "export", "--run", victim, "--out", victim),
                      str(victim), "not a CTranslate2 export", "--out")
    assert _files(victim) == before
    assert not [p for p in victim.parent.iterdir() if p.name.startswith(".victim")]
    code, out, _ = run_cli(capsys, "export", "--run", run, "--out", run.parent / "fresh")
    assert code == 0 and sorted(_files(run.parent / "fresh")) == [
        "config.json", "export.json", "model.bin", "shared_vocabulary.json"]


def test_1_an_export_is_replaced_but_a_file_put_beside_it_is_not(run, capsys):
    out = run.parent / "de-en"
    assert run_cli(capsys, "export", "--run", run, "--out", out)[0] == 0
    first = _files(out)
    assert run_cli(capsys, "export", "--run", run, "--out", out, "--quantize", "int8")[0] == 0
    assert sorted(_files(out)) == sorted(first) and _stamp(out)["quantize"] == "int8"
    (out / "README.txt").write_text("ours, not the export's\n")
    before = _files(out)
    assert_user_error(run_cli(capsys, "export", "--run", run, "--out", out),
                      "README.txt", "did not write")
    assert _files(out) == before
    (out / "README.txt").unlink()
    (out.parent / "a-file").write_text("x")
    assert_user_error(run_cli(capsys, "export", "--run", run, "--out", out.parent / "a-file"),
                      "not a folder")


# 3. two exports of one run at once

WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import nmt
    from nmt.decoding.export import export
    run, go, ready = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    ready.touch()
    while not go.exists():
        time.sleep(0.005)
    for _ in range(4):  # a missing or stale export, then a forced one, while the other reads
        model = nmt.load(run, engine="ctranslate2")
        assert model.translate(["a b c"], beam=1)[0].text is not None
        export(run)
""")


def test_3_two_processes_export_and_load_one_run_at_once(run, tmp_path):
    """Both `--engine ctranslate2` processes start on a missing export, then each exports
    again while the other loads: every export and every load succeeds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    go = tmp_path / "go"
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(run), str(go),
                                 str(tmp_path / f"ready{k}")], env=env, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for k in range(2)]
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"ready{k}").exists() for k in range(2)):
        assert time.monotonic() < deadline and all(w.poll() is None for w in workers), \
            [w.communicate() for w in workers if w.poll() is not None]
        time.sleep(0.01)
    go.touch()
    results = [w.communicate(timeout=120) for w in workers]
    for worker, (_, err) in zip(workers, results):
        assert worker.returncode == 0 and "Traceback" not in err, err
    assert stale(run) is None
    assert sorted(p.name for p in (run / "ctranslate2").iterdir()) == [".best.lock", "best"]


def test_3_the_lock_holds_between_threads_of_one_process(tmp_path):
    """A flock is per process: a second thread must still wait for (or be refused by) the
    first one's lock, as a second process is."""
    lock, held, release = tmp_path / ".lock", threading.Event(), threading.Event()

    def holder():
        with file_lock(lock):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        with pytest.raises(NMTError, match="busy"):
            with file_lock(lock, busy="busy (pid {pid})"):
                pass
    finally:
        release.set()
        thread.join()
    with file_lock(lock, busy="busy"):  # free again, and re-entrant within a thread
        with file_lock(lock, busy="busy"):
            pass


# 4. the stale check and the quantisation


def test_4_an_int8_export_does_not_become_the_engines_float32(run, capsys):
    """After `nmt export --quantize int8`, the engine runs the weights asked for, and the
    label `nmt evaluate` prints names them."""
    assert run_cli(capsys, "export", "--run", run, "--quantize", "int8")[0] == 0
    for asked, runs_as, label in ((None, "float32", "ctranslate2"),
                                  ("float32", "float32", "ctranslate2"),
                                  ("int8", "int8_float32", "ctranslate2/int8"),
                                  ("int8_float32", "int8_float32", "ctranslate2/int8_float32")):
        engine = nmt.load(run, engine="ctranslate2", quantize=asked).engine
        assert (engine.translator.compute_type, engine_label(engine)) == (runs_as, label)
    assert _stamp(export_dir(run))["quantize"] == "float32"
    assert _stamp(export_dir(run, "best", "int8"))["quantize"] == "int8"  # kept beside it


def test_4_an_int8_export_in_the_engines_folder_is_stale(run, data_root, capsys):
    export(run, quantize="int8", out=export_dir(run))
    assert stale(run) == f"{export_dir(run)}: exported in int8, not float32"
    capsys.readouterr()
    model = nmt.load(run, engine="ctranslate2", quantize="float32")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exported in int8, not float32: exporting it" in err
    assert model.engine.translator.compute_type == "float32" and stale(run) is None
    texts, _ = short_pairs(data_root, 8)
    assert [t.text for t in model.translate(texts, beam=1)] == \
        [t.text for t in nmt.load(run).translate(texts, beam=1)]


def test_4_int8_quantised_at_load_runs_the_weights_of_an_int8_export(run, data_root):
    """Why the engine keeps one float32 export: CTranslate2's int8 at load is the int8
    export's weights (docs/deploy.md, "Export")."""
    import ctranslate2

    texts, _ = short_pairs(data_root, 12)
    model = nmt.load(run, engine="ctranslate2", quantize="int8")
    int8 = ctranslate2.Translator(str(export(run, quantize="int8")), compute_type="int8")
    src = [model.vocab.src_pieces(ids[:-1]) + ["</s>"] for ids in model.vocab.encode_src(texts)]
    ours = model.engine.translator.translate_batch(src, beam_size=3, return_scores=True)
    theirs = int8.translate_batch(src, beam_size=3, return_scores=True)
    assert [r.hypotheses for r in ours] == [r.hypotheses for r in theirs]
    assert [r.scores for r in ours] == [r.scores for r in theirs]


# 5. a damaged export


@pytest.mark.parametrize("damage", ["cut", "changed", "stamp"])
def test_5_a_damaged_export_is_rebuilt_with_one_line(run, data_root, capsys, damage):
    out = export(run)
    model_bin = out / "model.bin"
    data = model_bin.read_bytes()
    if damage == "cut":
        model_bin.write_bytes(data[:len(data) // 2])
    elif damage == "changed":
        model_bin.write_bytes(data[:-64] + bytes(64))
    else:
        (out / "export.json").write_text("{not json")
    capsys.readouterr()
    model = nmt.load(run, engine="ctranslate2")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exporting it" in err and "Traceback" not in err
    assert {"cut": "model.bin: damaged", "changed": "model.bin: damaged",
            "stamp": "export.json: unreadable"}[damage] in err
    assert stale(run) is None and model_bin.read_bytes() == data
    texts, _ = short_pairs(data_root, 4)
    assert len(model.translate(texts)) == 4


def test_5_the_cli_names_a_cut_export_and_decodes(run, capsys):
    model_bin = export(run) / "model.bin"
    model_bin.write_bytes(model_bin.read_bytes()[:1000])
    code, out, err = run_cli(capsys, "translate", "--run", run, "--engine", "ctranslate2",
                             "a b c")
    assert code == 0 and "Traceback" not in err and "model.bin: damaged" in err
    assert len(out.splitlines()) == 1


# 8. the hash names the weights exported


@pytest.mark.parametrize("when", ["before", "after"])
def test_8_a_checkpoint_replaced_while_exporting_is_not_misnamed(run, monkeypatch, when):
    """Training replaces best.pt just before or just after the export loads it: the stamp
    names the checkpoint whose weights went into the export."""
    best = RunDir(run).checkpoint("best")
    original = best.read_bytes()
    payload = load_checkpoint(best)
    payload["model"] = {k: v + 0.5 if v.is_floating_point() else v
                        for k, v in payload["model"].items()}
    newer = run.parent / "newer.pt"
    save_checkpoint(newer, payload)
    weights = {hashlib.sha256(original).hexdigest(): load_checkpoint(best)["model"],
               hashlib.sha256(newer.read_bytes()).hexdigest(): payload["model"]}
    real_loader, real_spec, exported = model_runs.load_checkpoint, exporting.transformer_spec, {}

    def loader(path, *args):
        if when == "before":
            shutil.copyfile(newer, best)
        loaded = real_loader(path, *args)
        if when == "after":
            shutil.copyfile(newer, best)
        return loaded

    def spec(ct2, cfg, vocab, model):
        exported.update({k: v.clone() for k, v in model.state_dict().items()})
        return real_spec(ct2, cfg, vocab, model)

    monkeypatch.setattr(model_runs, "load_checkpoint", loader)
    monkeypatch.setattr(exporting, "transformer_spec", spec)
    made_from = _stamp(export(run))["checkpoint_sha256"]
    named = weights[made_from]
    assert exported.keys() == named.keys()
    assert all(torch.equal(exported[k], named[k]) for k in named)
    monkeypatch.undo()  # stale exactly when best.pt is no longer what was exported
    assert (stale(run) is None) == (made_from == hashlib.sha256(best.read_bytes()).hexdigest())


# The same eyes on the rest: files replaced and caches read back


LIMITED = textwrap.dedent("""
    import resource, signal, sys
    from nmt.core.rundir import RunDir
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
    try:
        RunDir(sys.argv[1]).write_scores("valid", {"bleu": 1.0, "note": "x" * 400})
    except OSError:
        sys.exit(3)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_scores_survive_a_write_that_fails_part_way(tmp_path):
    """A full disk (a file-size limit here) part-way through writing scores.json leaves the
    previous file whole, and no temporary file."""
    run = RunDir(tmp_path)
    run.write_scores("test", {"bleu": 30.0})
    before = run.scores.read_bytes()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", LIMITED, str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert run.scores.read_bytes() == before and run.read_scores() == {"test": {"bleu": 30.0}}
    assert sorted(p.name for p in tmp_path.iterdir()) == [".scores.lock", "scores.json"]
    run.scores.write_text("{cut")
    with pytest.raises(NMTError, match="scores.json: unreadable"):
        run.read_scores()


def test_an_unreadable_split_cache_is_encoded_again(trained, tmp_path, capsys):
    """A damaged encoded-split cache is named on stderr and rebuilt, not a traceback."""
    from nmt.data.store import encode_split
    from nmt.data.subwords import prepare_vocab
    from nmt.models.runs import load_config

    cfg = load_config(trained)
    vocab_dir = Path(shutil.copytree(prepare_vocab(cfg), tmp_path / "spm"))
    src, tgt = ([np.array(ids) for ids in side]  # copies: the test cuts the file
                for side in encode_split(cfg, vocab_dir, cfg.data.valid))
    (store,) = vocab_dir.glob(f"{cfg.data.valid}.*")
    cut = store / "tgt.npy"
    cut.write_bytes(cut.read_bytes()[:100])
    capsys.readouterr()
    again = encode_split(cfg, vocab_dir, cfg.data.valid)
    assert "unreadable" in capsys.readouterr().err
    assert all((a == b).all() for a, b in zip([*again[0], *again[1]], [*src, *tgt]))
    assert encode_split(cfg, vocab_dir, cfg.data.valid)[0][0].tolist() == src[0].tolist()
