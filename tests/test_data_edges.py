"""Edges of importing, sampling, pinning, sweeping and batching a corpus that mutation
samples found untested (docs/experiments/2026-12-07-mutation-sample-round.md)."""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.core.errors import NMTError
from nmt.data.pipeline import Filters, run
from nmt.data.sources import Folder
from nmt.data.subwords import Vocab, prepare_vocab, training_sample
from tests.test_subwords import _cfg, _make_corpus

REPO = Path(__file__).resolve().parent.parent


def _lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_sentencepieces_sample_is_drawn_across_the_files_and_cut_at_each_bound(tmp_path):
    """nmt.data.subwords.training_sample: within both bounds, every line in order; over
    the line bound, a seeded draw across the whole file, at most `sentences` lines; over
    the byte bound, lines whose bytes (newline included) stay within `size`."""
    ten = _lines(tmp_path / "ten.txt", [f"w{i}" for i in range(10)])
    assert list(training_sample([ten], sentences=10)) == [f"w{i}" for i in range(10)]
    hundred = _lines(tmp_path / "hundred.txt", [f"l{i:03d}" for i in range(100)])
    drawn = list(training_sample([hundred], sentences=10, size=1 << 30))
    assert len(drawn) == 10 and drawn == sorted(drawn) and max(drawn) > "l050"
    assert drawn != [f"l{i:03d}" for i in range(10)]  # not the file's head
    numbers = _lines(tmp_path / "numbers.txt", [f"{i:04d}" for i in range(100)])  # 500 bytes
    cut = list(training_sample([numbers], sentences=1000, size=50))
    assert sum(len(line) + 1 for line in cut) == 50 and len(cut) == 10  # the draw took 14


def test_every_seed_draws_the_same_segmentations_again(tmp_path):
    """Vocab.sample_pairs: 2**32 - 1, SentencePiece's "unseeded", is a seed like any other."""
    _make_corpus(tmp_path)
    vocab_dir = prepare_vocab(_cfg(tmp_path))
    vocab = Vocab.from_dir(vocab_dir)
    folder = tmp_path / "multi30k" / "de-en"
    src, tgt = ((folder / f"train.{lang}").read_text().splitlines()[:8] for lang in ("de", "en"))
    draws = {seed: vocab.sample_pairs(src, tgt, 0.1, -1, seed) for seed in (1, 2)}
    assert draws[1] != draws[2]  # the draw depends on the seed ...
    for seed, first in draws.items():  # ... and repeats with it
        assert vocab.sample_pairs(src, tgt, 0.1, -1, seed) == first
    # SentencePiece's "unseeded" shows in a process that has not seeded its sampler yet
    code = ("import json, sys\n"
            "from nmt.data.subwords import Vocab\n"
            "vocab = Vocab.from_dir(__import__('pathlib').Path(sys.argv[1]))\n"
            "src, tgt = json.loads(sys.argv[2])\n"
            "print(vocab.sample_pairs(src, tgt, 0.1, -1, 2**32 - 1) == "
            "vocab.sample_pairs(src, tgt, 0.1, -1, 2**32 - 1))\n")
    out = subprocess.run([sys.executable, "-c", code, str(vocab_dir), json.dumps([src, tgt])],
                         capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.strip() == "True"


def test_source_target_lines_need_exactly_one_separator(tmp_path):
    from nmt.data.corpora import read_pairs

    good = _lines(tmp_path / "pairs.txt", ["a b ||| x y", "c|||z"])
    assert read_pairs(good) == (["a b", "c"], ["x y", "z"])
    for bad in ("no separator", "a ||| b ||| c"):
        path = _lines(tmp_path / "bad.txt", ["a ||| x", bad])
        with pytest.raises(NMTError, match=r"bad\.txt:2: expected 'source \|\|\| target'"):
            read_pairs(path)


def test_a_folder_holding_one_split_twice_is_refused(tmp_path):
    _lines(tmp_path / "train.src", ["a"])
    _lines(tmp_path / "train.tgt", ["x"])
    with gzip.open(tmp_path / "train.src.gz", "wt") as handle:
        handle.write("b\n")
    with pytest.raises(NMTError, match=r"train\.src.* and .*train\.src\.gz hold the same split"):
        Folder(tmp_path, "src", "tgt").split_names()


def _import(root: Path, raw: Path, **kw):
    return run("edge", "src-tgt", root, Folder(raw, "src", "tgt"), **kw)


def test_drawn_splits_strip_no_bom_and_too_few_pairs_are_counted_after_duplicates(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "train.src").write_text("\ufeff" + "".join(f"s{i}\n" for i in range(40)))
    _lines(raw / "train.tgt", [f"t{i}" for i in range(40)])
    _import(tmp_path / "data", raw, valid_size=5, test_size=5)
    manifest = json.loads((tmp_path / "data" / "edge" / "src-tgt" / "manifest.json").read_text())
    assert manifest["splits"]["train"]["bom_stripped"] == 1
    assert manifest["splits"]["val"]["bom_stripped"] == manifest["splits"]["test"]["bom_stripped"] == 0
    _lines(raw / "train.src", ["dup"] * 30 + [f"s{i}" for i in range(6)])
    _lines(raw / "train.tgt", ["dupe"] * 30 + [f"t{i}" for i in range(6)])
    with pytest.raises(NMTError, match=r"7 distinct training pairs left .*29 duplicate"):
        _import(tmp_path / "data", raw, valid_size=5, test_size=5)


def test_a_corpus_whose_every_pair_has_an_empty_side_says_so(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    _lines(raw / "train.src", ["a", "", "c"])
    _lines(raw / "train.tgt", ["", "y", ""])
    with pytest.raises(NMTError, match="every training pair has an empty side; nothing to train"):
        _import(tmp_path / "data", raw, filters=Filters(overlap=False, duplicates=False))


def test_the_reverse_synthetic_corpus_follows_the_forward_one(tmp_path):
    from nmt.data.corpora import _ensure_reverse

    forward, reverse = tmp_path / "src-tgt", tmp_path / "tgt-src"
    forward.mkdir()
    _lines(forward / "test.src", ["a b"])
    _lines(forward / "test.tgt", ["x y z"])
    _lines(forward / "test.gold", ["0-0 1-2"])
    _ensure_reverse(forward, reverse)
    assert (reverse / "test.gold").read_text() == "0-0 2-1\n"
    _lines(forward / "test.gold", ["0-1 1-2"])  # the forward corpus changed: derived again
    _ensure_reverse(forward, reverse)
    assert (reverse / "test.gold").read_text() == "1-0 2-1\n"


def test_an_owner_file_whose_owner_lives_is_kept_before_its_path_exists(tmp_path):
    """nmt.core.scratch.sweep: the owner makes `.NAME.tmp-X.owner` first, its path after; in
    between, a sweep leaves the owner file to a live owner and removes a dead one's."""
    from nmt.core.scratch import sweep

    owner = tmp_path / ".corpus.tmp-abcd.owner"
    fd = os.open(owner, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        sweep(tmp_path, "corpus")
        assert owner.is_file()
    finally:
        os.close(fd)  # the owner is gone
    sweep(tmp_path, "corpus")
    assert not owner.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_worker_is_killed_not_signalled_when_its_parent_dies():
    """die_with_parent asks Linux for SIGKILL (uncatchable) on the parent's death."""
    code = ("import ctypes, ctypes.util, os\n"
            "from nmt.core.scratch import die_with_parent\n"
            "die_with_parent(os.getppid())\n"
            "libc = ctypes.CDLL(ctypes.util.find_library('c') or None)\n"
            "sig = ctypes.c_int()\n"
            "libc.prctl(2, ctypes.byref(sig))\n"  # PR_GET_PDEATHSIG
            "print(sig.value)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, check=True).stdout
    assert out.strip() == "9"


def test_a_runs_pin_holds_its_gold_and_its_stores_and_pins_an_older_run_on_resume(
        data_root, tmp_path, capsys):
    """nmt.data.pin: the gold of a pinned split is the run's copy (gold_of too); a
    damaged pinned store is encoded again from the pinned text, saying so; a run older than
    pins (no corpus/ folder) is pinned on --resume with its own vocabulary."""
    from nmt.data.pin import Pin, gold_of
    from nmt.training.trainer import Trainer
    from tests.test_train import MODELS, tiny_config

    cfg = tiny_config(data_root, tmp_path / "runs", "pinned", MODELS["bahdanau"], max_steps=2,
                      valid_every=2)
    Trainer(cfg, quiet=True).fit()
    run = Path(cfg.run_dir)
    pin = Pin(run)
    assert pin.gold("test") == run / "corpus" / "test.gold" == gold_of(cfg, "test")
    assert pin.gold("nope") is None
    vocab = Vocab.from_dir(run / "spm")
    before = [ids.tolist() for ids in pin.store("train", vocab)[0]]
    (run / "corpus" / "store" / "train" / "src.npy").write_bytes(b"cut")
    capsys.readouterr()
    again = [ids.tolist() for ids in pin.store("train", vocab)[0]]
    assert again == before and "encoding train again from the pinned text" in capsys.readouterr().err
    shutil.rmtree(run / "corpus")  # as a run made before pins left it
    resumed = tiny_config(data_root, tmp_path / "runs", "pinned", MODELS["bahdanau"],
                          max_steps=4, valid_every=2)
    Trainer(resumed, resume=True, quiet=False).fit()
    assert "predates pinned corpora" in capsys.readouterr().err
    assert Pin(run).gold("test") == run / "corpus" / "test.gold"
    assert [ids.tolist() for ids in Pin(run).store("train", vocab)[0]] == before


def test_gc_removes_a_stale_store_of_a_kept_vocabulary_and_an_unreferenced_teacher_cache(
        data_root, tmp_path):
    from nmt.data.caches import collect
    from nmt.data.corpora import cache_root
    from nmt.data.store import encode_split
    from tests.test_run_owns_data import _config, _import, _raw

    root = tmp_path / "data"
    _import(root, _raw(data_root, tmp_path / "raw", 0))
    cfg = _config(root, tmp_path / "runs", "v")
    vocab_dir = prepare_vocab(cfg)  # the corpus's own: kept
    encode_split(cfg, vocab_dir, "train")
    (store,) = [p for p in vocab_dir.iterdir() if p.is_dir() and p.name.startswith("train.")]
    stale = vocab_dir / "train.0123456789abcdef"  # a store of text no corpus holds any more
    shutil.copytree(store, stale)
    teacher = cache_root(root) / "links" / "eflomal-old"
    teacher.mkdir(parents=True)
    (teacher / "settings.json").write_text(json.dumps({"digests": {"train": "feed"}}))
    lines = list(collect(root, [tmp_path / "runs"]))
    assert not stale.exists() and not teacher.exists(), lines
    assert store.is_dir() and vocab_dir.is_dir()
    assert f"removed {stale}" in lines and f"removed {teacher}" in lines


def test_gc_dry_run_changes_nothing_and_says_what_a_real_gc_then_frees(tmp_path):
    """A killed import's scratch folder and an unreferenced vocabulary with a store: the dry
    run names both and removes neither; the real gc removes both and frees what it said."""
    from nmt.data.caches import collect
    from nmt.data.corpora import cache_root

    root = tmp_path / "data"
    scratch_dir = root / "mine" / ".de-en.tmp-0badf00d"  # its owner file is gone: dead
    scratch_dir.mkdir(parents=True)
    (scratch_dir / "train.de").write_bytes(b"x" * 2**20)
    vocab = cache_root(root) / "spm" / "feedbeef"
    (vocab / "train.0123456789abcdef").mkdir(parents=True)
    (vocab / "options.json").write_text(json.dumps({"src": "aa", "tgt": "bb"}))
    (vocab / "train.0123456789abcdef" / "ids.npy").write_bytes(b"y" * 2**20)
    dry = list(collect(root, [tmp_path / "runs"], dry_run=True))
    assert scratch_dir.is_dir() and vocab.is_dir(), dry
    assert any(str(scratch_dir) in line and line.startswith("would remove") for line in dry)
    assert dry[-1].startswith("would free 2.0 MiB in 2 "), dry
    real = list(collect(root, [tmp_path / "runs"]))
    assert not scratch_dir.exists() and not vocab.exists(), real
    assert real[-1].startswith("freed 2.0 MiB in 2 "), real


def test_filter_long_keeps_one_piece_targets_and_drops_empty_sides():
    """A pair trains when each side has at least one piece and at most `max_len` (the
    source counts its EOS): a one-piece target is kept, an empty target or source is not.
    The indices are int32 below 2**31 pairs (docs/experiments/2026-12-06-training-memory.md)."""
    import numpy as np

    from nmt.core.tokens import EOS
    from nmt.data.batching import filter_long

    src = [[5, EOS], [5, EOS], [5, 6, EOS], [EOS], [5, 6, 7, EOS]]
    tgt = [[7], [], [7, 8], [7], [7]]
    keep = filter_long([np.array(s) for s in src], [np.array(t) for t in tgt], max_len=2)
    assert keep.tolist() == [0, 2] and keep.dtype == np.int32


def test_token_batches_hold_pair_indices_as_int32():
    """An epoch's order of pair indices is int32 below 2**31 pairs, given or not given
    the indices (int64 from numpy by default), so it costs 4 bytes a pair."""
    import numpy as np

    from nmt.data.batching import token_batches

    lengths = [(3 + k % 7, 2 + k % 5) for k in range(100)]
    for indices in (None, np.arange(0, 100, 2, dtype=np.int64)):
        batches = token_batches(lengths, 40, seed=3, indices=indices)
        assert batches.order.dtype == np.int32
        assert sorted(batches.order.tolist()) == list(range(0, 100, 1 if indices is None else 2))


@pytest.mark.parametrize("guided", [False, True])
def test_a_batch_moves_every_tensor_to_another_device_and_stays_itself_on_its_own(guided):
    """`Batch.to` is the batch itself on the device it is on (no copy) and a batch of the
    same tensors on another one (the meta device stands in for a GPU here), guide included."""
    import torch

    from nmt.data.batching import Batch

    ids = torch.tensor([[5, 6, 2]])
    guide = torch.full((1, 3, 3), 1 / 3) if guided else None
    batch = Batch(ids, ids.clone(), ids.clone(), guide)
    assert batch.to(torch.device("cpu")) is batch
    moved = batch.to(torch.device("meta"))
    assert moved is not batch
    pairs = [(moved.src, batch.src), (moved.tgt_in, batch.tgt_in), (moved.tgt_out, batch.tgt_out)]
    pairs += [(moved.guide, batch.guide)] if guided else []
    assert all(new.device.type == "meta" and new.shape == old.shape for new, old in pairs)
    assert (moved.guide is None) == (not guided)
