"""A run's data through one door (issue 74): every cache keyed by the bytes its build read,
a run's gold from its pin only, and nothing in a key that names a folder. Each test fails
on the code before the fix; a race is widened by a hook, never by sleeping."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import nmt.data.store as store_module
import nmt.data.subwords as subwords_module
import nmt.training.guided as guided_module
from nmt.core.config import config_to_dict
from nmt.core.errors import NMTError
from nmt.data.pin import Pin, gold_of, pin_corpus, scoring_split
from nmt.data.store import encode_split, split_digest
from nmt.data.subwords import Vocab, prepare_vocab
from nmt.models.checks import config_from_dict
from nmt.training.trainer import Trainer
from tests.test_run_owns_data import _config, _import, _raw, _reimport, _texts


@pytest.fixture
def mini(data_root, tmp_path) -> Path:
    root = tmp_path / "data"
    _import(root, _raw(data_root, tmp_path / "raw1", 0))
    return root


def _reimport_after(calls: int, action):
    """A wrapper that runs `action` once, right after the wrapped function's `calls`-th call
    returns: a re-import landing between a cache's hash and its build."""
    count = [0]

    def hook(real):
        def wrapped(*args, **kwargs):
            out = real(*args, **kwargs)
            count[0] += 1
            if count[0] == calls:
                action()
            return out
        return wrapped
    return hook


# ------------------------------------------------------------------ defect 1: stores


def test_1_a_store_is_never_filed_under_another_texts_key(mini, data_root, tmp_path,
                                                           monkeypatch):
    cfg = _config(mini, tmp_path / "runs", "race")
    vocab_dir = prepare_vocab(cfg)
    a_val = [p.read_bytes() for p in (mini / "mini" / "src-tgt").glob("val.*")]
    raced = _reimport_after(2, lambda: _reimport(data_root, tmp_path, mini))
    monkeypatch.setattr(store_module, "scan", raced(store_module.scan))
    with pytest.raises(NMTError, match="changed while they were being encoded"):
        encode_split(cfg, vocab_dir, "val")  # hashed A, then the files became B
    monkeypatch.undo()
    assert not list(vocab_dir.glob("val.*")), "a store was kept under a key it does not hold"
    _import(mini, _raw(data_root, tmp_path / "raw1", 0))  # corpus A again
    assert [p.read_bytes() for p in (mini / "mini" / "src-tgt").glob("val.*")] == a_val
    pin = pin_corpus(cfg, resume=False, say=lambda text: None)
    vocab = Vocab.from_dir(pin.vocab_dir)
    src, _ = pin.store("val", vocab)
    assert _texts(vocab, src) == [vocab.src.decode(vocab.src.encode(s))
                                  for s in pin.load("val")[0]]


def test_1_a_store_of_other_text_is_refused_by_its_own_record(mini, tmp_path, capsys):
    """Opening a store checks the digests it recorded against what the run pinned: a
    store swapped for another text's (same size, ids in range) is encoded again."""
    cfg = _config(mini, tmp_path / "runs", "swapped")
    pin = pin_corpus(cfg, resume=False, say=lambda text: None)
    vocab = Vocab.from_dir(pin.vocab_dir)
    before = _texts(vocab, pin.store("val", vocab)[0])
    record = pin.folder / "store" / "val" / store_module.SOURCE
    other = json.loads(record.read_text())
    other["sha256"][0] = "0" * 64
    record.unlink()  # a hard link to the cache's: replaced, never written in place
    record.write_text(json.dumps(other))
    capsys.readouterr()
    assert _texts(vocab, pin.store("val", vocab)[0]) == before
    assert "was built from other text" in capsys.readouterr().err


def test_1_a_vocabulary_is_never_filed_under_another_texts_key(mini, data_root, tmp_path,
                                                                monkeypatch):
    cfg = _config(mini, tmp_path / "runs", "race")
    raced = _reimport_after(2, lambda: _reimport(data_root, tmp_path, mini))
    monkeypatch.setattr(subwords_module, "_sha", raced(subwords_module._sha))
    with pytest.raises(NMTError, match="changed while SentencePiece read it"):
        prepare_vocab(cfg)
    assert not [p for p in (mini / ".cache" / "spm").iterdir() if not p.name.startswith(".")]


def test_1_teacher_links_are_never_filed_under_another_texts_key(mini, data_root, tmp_path,
                                                                  monkeypatch):
    raw = config_to_dict(_config(mini, tmp_path / "runs", "race"))
    raw["guided"].update(weight=1.0, teacher="eflomal")
    cfg = config_from_dict(raw)
    raced = _reimport_after(4, lambda: _reimport(data_root, tmp_path, mini))
    monkeypatch.setattr(guided_module, "sha256_file", raced(guided_module.sha256_file))
    monkeypatch.setattr(guided_module, "require_eflomal", lambda: None)
    with pytest.raises(NMTError, match="changed while its links were being computed"):
        guided_module.write_teacher_links(cfg)
    links = mini / ".cache" / "links"
    assert not [p for p in links.iterdir() if not p.name.startswith(".")]


# ------------------------------------------------------------------ defect 3: gold


def test_3_a_pinned_split_without_gold_never_reads_the_corpus_gold_of_today(mini, tmp_path):
    cfg = _config(mini, tmp_path / "runs", "nogold")
    pin_corpus(cfg, resume=False, say=lambda text: None)
    live = mini / "mini" / "src-tgt"
    (live / "test.gold").write_text("4-22\n" * 60)  # another corpus's gold appears
    assert Pin(cfg.run_dir).gold("test") is None
    assert gold_of(cfg, "test") is None


def test_3_a_split_scored_after_pinning_is_adopted_with_its_gold(mini, data_root, tmp_path):
    cfg = _config(mini, tmp_path / "runs", "adopt")
    pin_corpus(cfg, resume=False, say=lambda text: None)
    live = mini / "mini" / "src-tgt"
    extra = _raw(data_root, tmp_path / "raw3", 8000)
    for lang in ("src", "tgt"):
        shutil.copy(extra / f"test.{lang}", live / f"extra.{lang}")
    (live / "extra.gold").write_text("0-0\n" * 60)
    sources, _, scored = scoring_split(cfg, cfg.run_dir, "extra", say=lambda text: None)
    adopted = cfg.run_dir / "corpus" / "scored" / "extra"
    assert gold_of(cfg, "extra") == adopted / "extra.gold"
    assert scored["digest"] == split_digest(*Pin(cfg.run_dir).sha256("extra"))
    (live / "extra.gold").unlink()
    (live / "extra.gold").write_text("1-1\n" * 60)  # the corpus's gold changes afterwards
    assert (adopted / "extra.gold").read_text() == "0-0\n" * 60  # the run's reading holds
    assert sources == (extra / "test.src").read_text().splitlines()


# ------------------------------------------------------------------ defect 4: keys


def test_4_a_copied_run_resumes_its_sampled_epoch_bit_for_bit(mini, tmp_path, monkeypatch):
    """The sampled store's key names no folder: a copy of a run resumed from another working
    directory reads the epoch's draw the original reads, and the losses are the same bits."""
    cfg = _config(mini, tmp_path / "runs", "original", sampling_alpha=0.1)
    Trainer(cfg, quiet=True).fit()  # last.pt at step 2, mid-epoch 0
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(cfg.run_dir, copy)

    def resume(run: Path) -> list[float]:
        raw = config_to_dict(cfg)
        raw["train"].update(max_steps=5, log_every=1)
        raw["name"], raw["runs_dir"] = run.name, str(run.parent)
        Trainer(config_from_dict(raw), resume=True, quiet=True).fit()
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [r["loss"] for r in map(json.loads, lines) if r.get("kind") == "train"]

    original = resume(Path(cfg.run_dir))
    monkeypatch.chdir(tmp_path / "elsewhere")
    copied = resume(copy)
    assert len(copied) == 3 and copied == original
    names = [sorted(p.name for p in (run / "sampled").glob("seed*"))
             for run in (Path(cfg.run_dir), copy)]
    assert names[0] == names[1], "the copy drew its own store where the original read one"


# ------------------------------------------------------------------ item 1: one door

REPO = Path(__file__).resolve().parent.parent
# What opens a corpus by its path or builds a cache from one: only nmt/data/ itself and the
# corpus-level commands (nmt data ...) may; every reader of a run goes through its Pin.
BY_PATH = {"LiveCorpus", "split_paths", "corpus_dir", "encode_split", "encode_files",
           "open_store", "write_store", "sampled_chunks", "prepare_vocab", "train_vocab",
           "read_parallel", "link_splits"}
CORPUS_LEVEL = {  # module: why it may name the corpus as imported
    "nmt/cli/core.py": "nmt data prepare / nmt data links work on the corpus, not a run",
    "nmt/training/guided.py": "nmt data links' teacher links of the corpus as imported "
                              "(a run passes its Pin)",
}


def test_no_reader_of_a_run_opens_a_corpus_by_its_path():
    import ast

    found = []
    for path in sorted((REPO / "nmt").rglob("*.py")):
        name = path.relative_to(REPO).as_posix()
        if name.startswith("nmt/data/") or name in CORPUS_LEVEL:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nmt.data"):
                found += [f"{name}: {a.name}" for a in node.names if a.name in BY_PATH]
    assert not found, "readers past the door: " + "; ".join(found)
    trains = ast.parse((REPO / "nmt/training/batches.py").read_text())
    modules = {n.module for n in ast.walk(trains) if isinstance(n, ast.ImportFrom)}
    assert {m for m in modules if m.startswith("nmt.data")} <= {
        "nmt.data.pin", "nmt.data.batching", "nmt.data.subwords"}
