"""A run owns what it trained on, and commands are safe to kill (issue 60): one test per
defect of the issue, named by its number, each failing on the code before the fix."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import nmt.training.guided as guided_module
from nmt.core.config import config_to_dict
from nmt.core.errors import NMTError
from nmt.core.rundir import RunDir
from nmt.data.batching import token_batches
from nmt.data.corpora import SYNTH_PAIR
from nmt.data.links import PharaohFile
from nmt.data.pipeline import Filters, run
from nmt.data.sources import FilePair, Folder, Tsv
from nmt.models.checks import config_from_dict
from nmt.training.batches import sampled_examples
from nmt.training.trainer import Trainer
from tests.test_train import MODELS, tiny_config

REPO = Path(__file__).resolve().parent.parent
# What the fixes added (nmt.core.scratch, nmt.data.pin) is imported inside the tests, so
# that this file also runs on the code before them, where each test fails on its defect.


def _raw(data_root: Path, out: Path, offset: int) -> Path:
    """A folder of train/val/test files cut from the synthetic corpus at `offset`."""
    folder = data_root / "synth" / SYNTH_PAIR
    out.mkdir(parents=True, exist_ok=True)
    cuts = {"train": (offset, offset + 1500), "val": (offset + 1500, offset + 1560),
            "test": (offset + 1560, offset + 1620)}
    for lang in ("src", "tgt"):
        lines = (folder / f"train.{lang}").read_text().splitlines()
        for split, (a, b) in cuts.items():
            (out / f"{split}.{lang}").write_text("\n".join(lines[a:b]) + "\n")
    return out


def _import(root: Path, raw: Path) -> None:
    run("mini", SYNTH_PAIR, root, Folder(raw, "src", "tgt"),
        filters=Filters(overlap=False, duplicates=False))


def _config(root: Path, runs: Path, name: str, **vocab):
    raw = config_to_dict(tiny_config(root, runs, name, MODELS["bahdanau"], max_steps=2,
                                     valid_every=2))
    raw["data"].update(corpus="mini", test="test")
    raw["vocab"].update({"size": 300, **vocab})
    return config_from_dict(raw)


@pytest.fixture
def mini(data_root, tmp_path) -> Path:
    root = tmp_path / "data"
    _import(root, _raw(data_root, tmp_path / "raw1", 0))
    return root


def _reimport(data_root, tmp_path, root) -> None:
    _import(root, _raw(data_root, tmp_path / "raw2", 4000))  # other pairs in every split


def _texts(vocab, side) -> list[str]:
    return [vocab.src.decode([int(i) for i in ids if i > 3]) for ids in side]


# ----------------------------------------------------------------------------- defect 1


def test_1_a_reimport_during_a_sampled_run_changes_nothing_it_reads(mini, data_root, tmp_path):
    cfg = _config(mini, tmp_path / "runs", "sampled", sampling_alpha=0.1)
    trainer = Trainer(cfg, quiet=True)
    trainer.fit()
    pinned_train = (cfg.run_dir / "corpus" / "train.src").read_text().splitlines()
    pinned_test = (cfg.run_dir / "corpus" / "test.tgt").read_text().splitlines()
    _reimport(data_root, tmp_path, mini)
    assert (mini / "mini" / SYNTH_PAIR / "train.src").read_text().splitlines() != pinned_train
    from nmt.data.pin import scoring_split

    d = trainer.data
    src, _ = sampled_examples(cfg, d, 5, trainer.run.sampled)  # a later epoch's draw
    want = [pinned_train[k] for k in d.sample_keep]
    assert _texts(d.vocab, src) == [" ".join(s.split()) for s in want]  # the old pairs
    _, refs, scored = scoring_split(cfg, cfg.run_dir, "test", say=lambda text: None)
    assert refs == pinned_test and scored["pinned"]  # the end's evaluation: the pinned test


# ----------------------------------------------------------------------------- defect 2


def test_2_resume_after_a_reimport_keeps_the_runs_vocabulary(mini, data_root, tmp_path,
                                                              capsys):
    cfg = _config(mini, tmp_path / "runs", "resumed")
    Trainer(cfg).fit()
    spm = {p.name: p.read_bytes() for p in (cfg.run_dir / "spm").glob("*.model")}
    pinned = json.loads((cfg.run_dir / "corpus" / "pinned.json").read_text())
    _reimport(data_root, tmp_path, mini)
    capsys.readouterr()
    raw = config_to_dict(cfg)
    raw["train"]["max_steps"] = 4
    resumed = Trainer(config_from_dict(raw), resume=True)
    note = capsys.readouterr().err
    assert "changed since this run pinned it" in note and pinned["splits"]["train"]["sha256"]
    assert resumed.fit().step == 4
    assert {p.name: p.read_bytes() for p in (cfg.run_dir / "spm").glob("*.model")} == spm
    again = json.loads((cfg.run_dir / "corpus" / "pinned.json").read_text())
    assert again["splits"] == pinned["splits"] and again["vocab"] == pinned["vocab"]
    first = (cfg.run_dir / "corpus" / "train.src").read_text()
    assert first == (tmp_path / "raw1" / "train.src").read_text()  # trained on the old pairs


def test_2_a_replaced_vocabulary_is_refused_by_the_checkpoints(mini, data_root, tmp_path):
    """A vocabulary of the same size but other pieces (what a re-import's retraining wrote
    over the run's spm/ before the fix) no longer pairs with the run's checkpoints."""
    from nmt.data.subwords import Vocab, prepare_vocab
    from nmt.models.runs import load_run

    cfg = _config(mini, tmp_path / "runs", "swapped")
    Trainer(cfg, quiet=True).fit()
    model = cfg.run_dir / "spm" / "joint.model"
    _reimport(data_root, tmp_path, mini)
    other = prepare_vocab(cfg) / "joint.model"  # the same options, the new corpus
    assert other.read_bytes() != model.read_bytes()
    assert Vocab(other, other).src_size == Vocab(model, model).src_size
    model.write_bytes(other.read_bytes())
    with pytest.raises(NMTError, match="another vocabulary"):
        load_run(cfg.run_dir)


def test_2_a_restart_after_a_start_that_never_saved_holds_only_its_own_vocabulary(mini,
                                                                                   tmp_path):
    """A first start that died before its first checkpoint left a joint model in spm/; a
    fresh start with two vocabularies trains and decodes with its own two, not that one."""
    import shutil

    from nmt.data.subwords import Vocab

    first = _config(mini, tmp_path / "runs", "restarted")
    Trainer(first, quiet=True).fit()
    shutil.rmtree(first.run_dir / "checkpoints")  # as if killed before it saved
    again = _config(mini, tmp_path / "runs", "restarted", joint=False, size=280)
    Trainer(again, quiet=True).fit()
    assert sorted(p.name for p in (again.run_dir / "spm").iterdir()) == ["src.model", "tgt.model"]
    data = [r for r in RunDir(again.run_dir).read_metrics() if r["kind"] == "data"]
    assert len(data) == 1  # the abandoned start's records are gone with it
    assert Vocab.from_dir(again.run_dir / "spm").src_size == 280


def test_2_a_resume_that_changes_the_batches_or_the_shape_names_the_keys(mini, tmp_path):
    cfg = _config(mini, tmp_path / "runs", "changed")
    Trainer(cfg, quiet=True).fit()
    raw = config_to_dict(cfg)
    raw["train"].update(max_steps=4)  # more steps: what a resume is for
    for section, key, value, says in (
            ("train", "batch_tokens", 999, "train.batch_tokens was 800, now 999"),
            ("data", "max_len", 7, "data.max_len was 12, now 7"),
            ("guided", "symmetrize", "union", "teacher's links.*guided.symmetrize was 'grow-diag"),
            ("model", "hidden_size", 24, "model.hidden_size was 64, now 24; resume without")):
        changed = {**raw, section: {**raw[section], key: value}}
        with pytest.raises(NMTError, match=says):
            Trainer(config_from_dict(changed), resume=True, quiet=True).fit()
    with open(cfg.run_dir / "metrics.jsonl", "a") as handle:  # logged, then killed before a save
        handle.write(json.dumps({"kind": "train", "step": 3, "loss": 9.0}) + "\n")
    assert Trainer(config_from_dict(raw), resume=True, quiet=True).fit().step == 4
    steps = [(r["kind"], r["step"]) for r in RunDir(cfg.run_dir).read_metrics() if "step" in r]
    assert len(steps) == len(set(steps)) and ("valid", 4) in steps, steps
    assert 9.0 not in [r.get("loss") for r in RunDir(cfg.run_dir).read_metrics()]


def test_2_a_copied_runs_own_config_resumes_the_copy_not_the_original(mini, tmp_path,
                                                                       capsys):
    import shutil

    from nmt.core.checkpoint import load_checkpoint
    from tests.test_cli import run_cli

    cfg = _config(mini, tmp_path / "runs", "original")
    Trainer(cfg, quiet=True).fit()
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(cfg.run_dir, copy)
    before = (cfg.run_dir / "checkpoints" / "last.pt").read_bytes()
    code, _, err = run_cli(capsys, "train", "--config", copy / "config.yaml", "--resume",
                           "--set", "train.max_steps=4", "--no-evaluate")
    assert code == 0, err
    assert load_checkpoint(copy / "checkpoints" / "last.pt")["progress"]["step"] == 4
    assert (cfg.run_dir / "checkpoints" / "last.pt").read_bytes() == before
    from nmt.data.pin import corpus_of
    from nmt.models.runs import load_config as run_config

    moved = run_config(copy)  # what align, compare and serve read: the copy's own pin
    assert moved.run_dir.resolve() == copy.resolve()
    assert Path(corpus_of(moved).folder).resolve() == (copy / "corpus").resolve()


# ----------------------------------------------------------------------------- defect 3


def test_3_a_kill_past_an_epoch_boundary_resumes_exactly(mini, tmp_path):
    cfg = _config(mini, tmp_path / "runs", "epochs", sampling_alpha=0.1)
    first = Trainer(cfg, quiet=True)
    first.fit()  # last.pt in epoch 0
    batches = first.epoch_batches(0)
    epoch0 = [list(map(list, first.data.train_src))]
    raw = config_to_dict(cfg)
    raw["train"]["max_steps"] = 10_000
    crossing = Trainer(config_from_dict(raw), resume=True, quiet=True)
    crossing.epoch_batches(1)  # the loop crosses into epoch 1 ... and is killed here
    stores = sorted(p.name.split(".")[0] for p in cfg.run_dir.joinpath("sampled").glob("seed*"))
    assert stores == [f"seed{cfg.train.seed}", f"seed{cfg.train.seed + 1}"]
    resumed = Trainer(config_from_dict(raw), resume=True, quiet=True)
    assert resumed.progress.epoch == 0
    assert resumed.epoch_batches(0) == batches  # the same draw, not a fresh one
    assert [list(map(list, resumed.data.train_src))] == epoch0


# ----------------------------------------------------------------------------- defect 4


def proc_stats() -> dict[int, list[str]]:
    """Every process's /proc/PID/stat fields after the command name (state, ppid, pgrp...)."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stats[int(entry.name)] = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
    return stats


def _children(pid: int) -> list[int]:
    return [child for child, fields in proc_stats().items() if int(fields[1]) == pid]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


PREPARE = ("import sys, nmt.data.store as s; s.PARALLEL_PAIRS = 100; s.CHUNK_LINES = 20; "
           "from nmt.cli import main; sys.argv = ['nmt'] + sys.argv[1:]; main()")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_4_encoding_workers_die_with_their_parent(signum, mini, tmp_path):
    config = tmp_path / "c.yaml"
    cfg = _config(mini, tmp_path / "runs", "w")
    import yaml

    config.write_text(yaml.safe_dump(config_to_dict(cfg)))
    proc = subprocess.Popen([sys.executable, "-c", PREPARE, "data", "prepare", "-c", str(config)],
                            cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    deadline, workers = time.monotonic() + 120, []
    while time.monotonic() < deadline and proc.poll() is None:
        workers = [c for c in _children(proc.pid) if "spawn_main" in
                   Path(f"/proc/{c}/cmdline").read_bytes().decode(errors="replace")]
        if len(workers) >= 1 and list((mini / ".cache" / "spm").glob("*/.*.tmp-*")):
            break
        time.sleep(0.05)
    assert workers, f"no encoding worker started: {proc.communicate()[1].decode()[-400:]}"
    proc.send_signal(signum)
    code = proc.wait(60)
    err = proc.stderr.read().decode()
    gone = time.monotonic() + 10
    while time.monotonic() < gone and any(map(_alive, workers)):
        time.sleep(0.1)
    assert not any(map(_alive, workers)), "an encoding worker outlived its parent"
    from nmt.core.scratch import sweep

    if signum == signal.SIGTERM:
        assert code == 128 + signum and err.strip().splitlines()[-1] == "nmt: stopped by SIGTERM"
        assert not list((mini / ".cache" / "spm").glob("*/.*.tmp-*"))  # removed by itself
    sweep(next((mini / ".cache" / "spm").glob("*/")))  # the next writer's sweep
    assert not list((mini / ".cache" / "spm").glob("*/.*.tmp-*"))


# ----------------------------------------------------------------------------- defect 5


KILLED = ("import os, signal, sys; from pathlib import Path; from nmt.core.scratch import "
          "scratch\nwith scratch(Path(sys.argv[1])) as tmp:\n    (tmp / 'half').write_text('x')\n"
          "    os.kill(os.getpid(), signal.SIGKILL)")


def _killed_scratch(target: Path) -> Path:
    subprocess.run([sys.executable, "-c", KILLED, str(target)], env={
        **os.environ, "PYTHONPATH": str(REPO)}, check=False)
    [left] = [p for p in target.parent.glob(f".{target.name}.tmp-*") if p.is_dir()]
    return left


def _killed_import(root: Path, raw: Path) -> Path:
    """An `nmt data import` killed by SIGKILL while it writes; its scratch folder."""
    args = [sys.executable, "-m", "nmt", "data", "import", "mini", "--pair", SYNTH_PAIR,
            "--files", str(raw / "a.src"), str(raw / "a.tgt"), "--root", str(root)]
    proc = subprocess.Popen(args, env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, left = time.monotonic() + 60, []
    while time.monotonic() < deadline and proc.poll() is None and not left:
        left = [p for p in (root / "mini").glob(".*.tmp-*") if p.is_dir()]
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    assert left, "the import ended before it could be killed"
    return left[0]


def test_5_a_killed_imports_folder_is_swept_by_the_next_import_and_by_list(mini, data_root,
                                                                            tmp_path):
    from nmt.data.overview import list_corpora

    raw = tmp_path / "big"
    raw.mkdir()
    for side, word in (("src", "w"), ("tgt", "v")):
        (raw / f"a.{side}").write_text("".join(f"{word}{i} " * (1 + i % 9) + "\n"
                                               for i in range(150_000)))
    left = _killed_import(mini, raw)
    lines = list(list_corpora(mini))
    assert not left.exists() and not [p for p in (mini / "mini").glob(".*.tmp-*")]
    assert not any("in progress" in line for line in lines)
    left = _killed_import(mini, raw)
    _reimport(data_root, tmp_path, mini)
    assert not left.exists() and not [p for p in (mini / "mini").glob(".*.tmp-*")]


def test_5_a_live_writers_folder_is_named_not_swept(mini):
    from nmt.core.scratch import scratch
    from nmt.data.overview import list_corpora

    target = mini / "mini" / SYNTH_PAIR
    with scratch(target) as live:
        lines = list(list_corpora(mini))
        assert live.is_dir() and any(f"in progress: {live}" in line for line in lines)
    assert not live.exists()


def test_5_a_killed_vocabulary_trainers_folder_is_swept(mini, tmp_path):
    from nmt.data.subwords import prepare_vocab

    cfg = _config(mini, tmp_path / "runs", "v")
    out = prepare_vocab(cfg)
    import shutil

    shutil.rmtree(out)
    left = _killed_scratch(out)
    assert prepare_vocab(cfg) == out and not left.exists()
    assert not list(out.parent.glob(".*.tmp-*"))


# ----------------------------------------------------------------------------- defect 6


def test_6_a_tsv_row_with_a_stray_tab_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "tm.tsv"
    path.write_text("de\ten\nein Hund\ta dog\nzwei\tKatzen\ttwo cats\n")
    with pytest.raises(NMTError, match=r"tm.tsv:3: has 3 cells but the first row has 2.*"
                                       r"--extra-columns"):
        list(Tsv(path, "de", "en"))
    pairs = list(Tsv(path, "de", "en", extra_columns=True))
    assert pairs[-1] == (None, "zwei", "Katzen")


# ----------------------------------------------------------------------------- defect 7


def test_7_the_teacher_links_are_computed_once_for_every_rank(mini, tmp_path, monkeypatch):
    pytest.importorskip("eflomal")
    calls = []
    real = guided_module.eflomal_links

    def counted(*args, **kwargs):
        calls.append(1)
        time.sleep(0.3)  # long enough for the other rank to arrive meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(guided_module, "eflomal_links", counted)
    cfg = _config(mini, tmp_path / "runs", "g")
    raw = config_to_dict(cfg)
    raw["guided"] = {"weight": 1.0}
    cfg = config_from_dict(raw)
    ranks = [threading.Thread(target=guided_module.write_teacher_links, args=(cfg,))
             for _ in range(2)]
    for rank in ranks:
        rank.start()
    for rank in ranks:
        rank.join()
    assert len(calls) == 1
    Trainer(cfg, quiet=True)  # rank 0 pins the cached links
    monkeypatch.setattr(guided_module, "eflomal_links", None)  # a second rank computes nothing
    monkeypatch.setattr("nmt.training.distributed.is_main", lambda: False)
    from nmt.training.batches import load_data

    assert load_data(cfg).train_guides is not None


def test_7_pharaoh_file_closes_what_it_opens(tmp_path):
    path = tmp_path / "x.links"
    path.write_text("0-0 1-1\n\n2-0\n")
    links = PharaohFile(path)
    assert links[0] == {(0, 0), (1, 1)} and links[2] == {(2, 0)}
    if Path("/proc/self/fd").is_dir():  # no descriptor of this process still reads the file
        assert not [fd for fd in os.listdir("/proc/self/fd") if _target(fd) == str(path)]


def _target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


# ----------------------------------------------------------------------------- defect 8


def test_8_keep_empty_keeps_empty_sides_without_another_switch(tmp_path):
    src, tgt = tmp_path / "a.de", tmp_path / "a.en"
    src.write_text("ein Hund\n\nzwei Katzen\n")
    tgt.write_text("a dog\nnothing\ntwo cats\n")
    made = run("e", "de-en", tmp_path / "data", FilePair(src, tgt), filters=Filters(empty=False))
    assert (made.folder / "train.de").read_text().splitlines() == ["ein Hund", "", "zwei Katzen"]
    assert Filters(empty=False).drop("", "x") is None
    assert Filters(empty=False, min_words=2).drop("ein", "x y") == "min_words"


# ----------------------------------------------------------------------------- defect 9


def test_9_the_corpus_path_holds_a_whole_corpus_at_every_instant(mini, data_root, tmp_path,
                                                                 monkeypatch):
    """After every rename a re-import makes (where a kill could land), and all along in a
    reading thread, the corpus path holds a whole corpus."""
    target = mini / "mini" / SYNTH_PAIR
    seen, stop = [], threading.Event()

    def whole() -> bool:
        return (target / "manifest.json").is_file() and (target / "train.src").is_file()

    real = Path.rename

    def rename(self, other):
        out = real(self, other)
        seen.append(whole())
        return out

    monkeypatch.setattr(Path, "rename", rename)

    def read() -> None:
        while not stop.is_set():
            seen.append(whole())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for k in range(4):
            _import(mini, _raw(data_root, tmp_path / f"r{k}", 2000 * (k % 2)))
    finally:
        stop.set()
        reader.join()
    assert seen and all(seen), f"{seen.count(False)} looks found no corpus"


def test_9_a_swap_killed_between_two_renames_is_put_back(mini, monkeypatch):
    """Where no exchange exists: the two renames' gap, and a kill in it, is repaired."""
    target = mini / "mini" / SYNTH_PAIR
    old = (target / "train.src").read_text()
    aside = target.with_name(f".{target.name}.old-deadbeef")
    target.rename(aside)  # what a kill right after the first rename leaves
    from nmt.data.overview import list_corpora

    list(list_corpora(mini))
    assert (target / "train.src").read_text() == old and not aside.exists()


# ---------------------------------------------------------------------------- defect 10


def test_10_the_manifest_hashes_the_bytes_it_read_from_a_pipe(tmp_path):
    text = {"de": "ein Hund\nzwei Katzen\ndrei Vögel\n", "en": "a dog\ntwo cats\nthree birds\n"}
    pipes = {}
    for lang in text:
        pipes[lang] = tmp_path / f"pipe.{lang}"
        os.mkfifo(pipes[lang])

    def serve(lang: str) -> None:  # like <(...): the bytes once, then nothing
        for payload in (text[lang], "", "", ""):
            with open(pipes[lang], "w") as handle:
                handle.write(payload)

    writers = [threading.Thread(target=serve, args=(lang,), daemon=True) for lang in text]
    for writer in writers:
        writer.start()
    made = run("p", "de-en", tmp_path / "data", FilePair(pipes["de"], pipes["en"]))
    files = made.manifest["source"]["files"]
    for lang in text:
        assert files[str(pipes[lang].resolve())] == hashlib.sha256(text[lang].encode()).hexdigest()


# ---------------------------------------------------------------------------- defect 11


@pytest.mark.parametrize("budget", [40, 200, 1000])
def test_11_every_pair_is_trained_once_an_epoch_across_two_ranks(budget):
    rng = np.random.default_rng(0)
    lengths = np.stack([rng.integers(2, 30, 301), rng.integers(1, 30, 301)], axis=1)
    whole = token_batches(lengths, budget, seed=3)
    assert (whole.sizes() < 2).any() or budget > 40  # the small budget makes 1-row batches
    shards = [whole.shard(rank, 2) for rank in range(2)]
    assert len(shards[0]) == len(shards[1]) == len(whole)  # every rank steps every batch
    trained = [i for shard in shards for k in range(len(shard)) if shard.real(k)
               for i in shard[k]]
    assert sorted(trained) == list(range(301))
    for k in range(len(whole)):  # a stand-in is a row of its own batch
        if not shards[1].real(k):
            assert shards[1][k] == shards[0][k][:1]


# ------------------------------------------------------------------------------ data gc


def test_gc_removes_only_the_caches_no_corpus_and_no_run_references(mini, data_root, tmp_path):
    from nmt.data.caches import collect
    from nmt.data.subwords import prepare_vocab

    runs = tmp_path / "runs"
    cfg = _config(mini, runs, "kept")
    Trainer(cfg, quiet=True).fit()
    old = prepare_vocab(cfg)  # the vocabulary of the corpus as first imported: the run's
    _reimport(data_root, tmp_path, mini)
    new = prepare_vocab(cfg)  # the re-imported corpus's
    orphan = _config(mini, runs, "o", size=280)
    stray = prepare_vocab(orphan)  # the current corpus's too: referenced by the corpus
    lines = list(collect(mini, [runs], dry_run=True))
    assert old.is_dir() and lines[-1].startswith("would free")
    import shutil

    shutil.rmtree(runs / "kept")  # the run goes: its vocabulary is no longer referenced
    lines = list(collect(mini, [runs]))
    assert not old.exists() and new.is_dir() and stray.is_dir()
    assert any(f"removed {old}" == line for line in lines)
    import re

    removed = sum(line.startswith("removed ") for line in lines)
    assert re.fullmatch(rf"freed [\d.,]+ MiB in {removed} cache folder\(s\); kept \d+ .*",
                        lines[-1]), lines[-1]


def test_1_evaluate_records_the_digest_and_refuses_a_split_of_training_pairs(mini, tmp_path):
    from nmt.data.pin import scoring_split
    from nmt.decoding.evaluate import evaluate_run

    cfg = _config(mini, tmp_path / "runs", "scored")
    Trainer(cfg, quiet=True).fit()
    entry = evaluate_run(cfg.run_dir, "test", limit=5, align=False)
    pinned = json.loads((cfg.run_dir / "corpus" / "pinned.json").read_text())
    shas = pinned["splits"]["test"]["sha256"]
    from nmt.data.store import split_digest

    assert entry["data"] == {"digest": split_digest(shas["src"], shas["tgt"]), "pinned": True}
    assert json.loads((cfg.run_dir / "scores.json").read_text())["test"]["data"] == entry["data"]
    folder = mini / "mini" / SYNTH_PAIR
    train = [(folder / f"train.{s}").read_text().splitlines() for s in ("src", "tgt")]
    for side, lines in zip(("src", "tgt"), train):  # a new split: 2 training pairs among 3
        (folder / f"extra.{side}").write_text("\n".join([lines[5], "a new one", lines[9]]) + "\n")
    with pytest.raises(NMTError, match=r"2 of its 3 pairs are training pairs .*line 1\)"):
        scoring_split(cfg, cfg.run_dir, "extra", say=lambda text: None)
    for side in ("src", "tgt"):
        (folder / f"extra.{side}").write_text("a new one\n")
    notes = []
    _, refs, scored = scoring_split(cfg, cfg.run_dir, "extra", say=notes.append)
    assert refs == ["a new one"] and scored["pinned"] is False and "not a split" in notes[0]
