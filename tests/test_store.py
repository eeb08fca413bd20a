"""The encoded store (nmt/data/store.py): one flat memory-mapped array per side and split,
and training's batches read from its offsets, equal to those of the lists it replaced."""

from __future__ import annotations

import mmap
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import nmt.data.store as store_module
from nmt.core.errors import NMTError
from nmt.core.tokens import BOS, EOS
from nmt.data.batching import (
    collate,
    filter_long,
    iterate_batches,
    join_pairs,
    pair_lengths,
    token_batches,
)
from nmt.data.corpora import read_lines
from nmt.data.store import Ragged, encode_split
from nmt.data.subwords import Vocab, prepare_vocab, training_sample
from tests.test_subwords import _cfg, _make_corpus

FILES = sorted(["src.npy", "src_off.npy", "tgt.npy", "tgt_off.npy", "source.json"])


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _make_corpus(tmp_path)
    return tmp_path


def _store(vocab_dir: Path, split: str) -> Path:
    (folder,) = [p for p in vocab_dir.glob(f"{split}.*") if p.is_dir()]
    return folder


def test_the_store_holds_each_sentence_as_encoding_it_alone_would(root):
    cfg = _cfg(root)
    vocab_dir = prepare_vocab(cfg)
    vocab = Vocab.from_dir(vocab_dir)
    src, tgt = encode_split(cfg, vocab_dir, "train")
    de, en = (read_lines(root / "multi30k" / "de-en" / f"train.{x}") for x in ("de", "en"))
    assert isinstance(src, Ragged) and len(src) == len(tgt) == len(de) == 200
    for i in range(len(de)):
        assert src[i].tolist() == vocab.encode_src([de[i]])[0]
        assert tgt[i].tolist() == vocab.encode_tgt([en[i]])[0]
    assert not src.flat.flags.writeable and src.flat.dtype == np.uint16  # 100 pieces
    assert src.maps and all(isinstance(m, mmap.mmap) for m in src.maps)  # a view of the file
    assert src.offsets.dtype == np.int64 and len(src.offsets) == 201
    assert src[0].dtype == np.int32 and src[-1].tolist() == src[199].tolist()
    assert src.lengths().tolist() == [len(ids) for ids in vocab.encode_src(de)]
    part = src[5:9]  # a view of the same arrays, not a copy
    assert len(part) == 4 and part.flat is src.flat
    assert [ids.tolist() for ids in part] == [src[i].tolist() for i in range(5, 9)]
    assert part.lengths().tolist() == src.lengths()[5:9].tolist()
    with pytest.raises(IndexError):
        src[200]


def test_the_store_is_reused_then_rebuilt_when_the_text_changes(root, monkeypatch):
    cfg = _cfg(root)
    vocab_dir = prepare_vocab(cfg)
    encode_split(cfg, vocab_dir, "val")
    folder = _store(vocab_dir, "val")
    assert sorted(p.name for p in folder.iterdir()) == FILES
    before = {name: (folder / name).stat() for name in FILES}

    def fail(*args):
        raise AssertionError("encoded again instead of reading the store")

    monkeypatch.setattr(store_module, "encode_chunk", fail)
    src, _ = encode_split(cfg, vocab_dir, "val")
    assert len(src) == 20
    for name, stat in before.items():  # the same files, not rewritten
        again = (folder / name).stat()
        assert (again.st_ino, again.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    val_en = root / "multi30k" / "de-en" / "val.en"
    val_en.write_text(val_en.read_text(encoding="utf-8").replace(".\n", " again.\n", 1),
                      encoding="utf-8")
    with pytest.raises(AssertionError, match="encoded again"):  # a new checksum, a new store
        encode_split(cfg, vocab_dir, "val")
    monkeypatch.undo()
    encode_split(cfg, vocab_dir, "val")
    assert len([p for p in vocab_dir.glob("val.*") if p.is_dir()]) == 2
    assert not list(vocab_dir.glob("*.tmp*"))


@pytest.mark.parametrize("name", FILES)
def test_a_cut_array_is_encoded_again(root, capsys, name):
    cfg = _cfg(root)
    vocab_dir = prepare_vocab(cfg)
    good = [[ids.copy() for ids in side] for side in encode_split(cfg, vocab_dir, "val")]
    path = _store(vocab_dir, "val") / name
    path.write_bytes(path.read_bytes()[:-3])
    (path.parent.parent / f"{path.parent.name}.tmp99999").mkdir()  # a killed writer's
    capsys.readouterr()
    src, tgt = encode_split(cfg, vocab_dir, "val")
    err = capsys.readouterr().err
    assert "encoding val again" in err and ("unreadable" in err or "does not hold" in err)
    assert [ids.tolist() for ids in [*src, *tgt]] == [ids.tolist() for ids in good[0] + good[1]]
    assert not list(vocab_dir.glob("val.*.old*")) and not list(vocab_dir.glob("*.tmp*"))


def _encode_with_workers(monkeypatch, chunk_lines: int) -> list[bool]:
    """Every split encoded by 2 worker processes in chunks of `chunk_lines`; the list fills
    with each encoding's `parallel` flag."""
    monkeypatch.setattr(store_module, "PARALLEL_PAIRS", 1)
    monkeypatch.setattr(store_module, "CHUNK_LINES", chunk_lines)
    monkeypatch.setattr(store_module, "WORKERS", 2)
    calls: list[bool] = []
    real = store_module.encoded_chunks

    def recording(paths, vocab, dtypes, parallel, *rest):
        calls.append(parallel)
        return real(paths, vocab, dtypes, parallel, *rest)

    monkeypatch.setattr(store_module, "encoded_chunks", recording)
    return calls


def test_worker_processes_write_the_same_bytes(root, monkeypatch):
    cfg = _cfg(root, joint=False)
    vocab_dir = prepare_vocab(cfg)
    encode_split(cfg, vocab_dir, "train")
    folder = _store(vocab_dir, "train")
    alone = {name: (folder / name).read_bytes() for name in FILES}
    shutil.rmtree(folder)
    calls = _encode_with_workers(monkeypatch, 23)  # 9 chunks, the last one short
    encode_split(cfg, vocab_dir, "train")
    assert calls == [True]
    assert {name: (folder / name).read_bytes() for name in FILES} == alone


# ---------------------------------------------------------------- the list path it replaced

def _old_filter_long(src, tgt, max_len):
    return [i for i, (s, t) in enumerate(zip(src, tgt))
            if 1 < len(s) <= max_len + 1 and 0 < len(t) <= max_len]


def _old_join_pairs(src, tgt, indices, most, seed):
    order = list(indices)
    rng = random.Random(seed)
    rng.shuffle(order)
    joined_src, joined_tgt, start = [], [], 0
    while start < len(order):
        run = order[start:start + rng.randint(1, most)]
        start += len(run)
        joined_src.append(np.concatenate([src[i][:-1] for i in run[:-1]] + [src[run[-1]]]))
        joined_tgt.append(np.concatenate([tgt[i] for i in run]))
    return joined_src, joined_tgt


def _old_token_batches(lengths, batch_tokens, seed, indices=None):
    order = list(range(len(lengths))) if indices is None else list(indices)
    rng = random.Random(seed)
    noise = {i: rng.random() for i in order} if seed is not None else {i: 0.0 for i in order}
    order.sort(key=lambda i: (lengths[i][1], lengths[i][0], noise[i]))
    batches, current, longest = [], [], 0
    for i in order:
        size = max(longest, lengths[i][0], lengths[i][1] + 1)
        if current and size * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, size = [], max(lengths[i][0], lengths[i][1] + 1)
        current.append(i)
        longest = size
    if current:
        batches.append(current)
    if seed is not None:
        rng.shuffle(batches)
    return batches


def _same_tensors(a, b):
    return all(torch.equal(x, y) for x, y in zip((a.src, a.tgt_in, a.tgt_out),
                                                  (b.src, b.tgt_in, b.tgt_out)))


@pytest.mark.parametrize("concat", [1, 3])
def test_batches_from_the_store_equal_those_of_the_lists(root, concat):
    cfg = _cfg(root)
    src, tgt = encode_split(cfg, prepare_vocab(cfg), "train")
    lists = [np.array(ids) for ids in src], [np.array(ids) for ids in tgt]
    max_len = int(np.median(src.lengths()))  # about half the pairs are longer
    keep = filter_long(src, tgt, max_len)
    old_keep = _old_filter_long(*lists, max_len)
    assert 0 < len(old_keep) < len(src) - 50 and keep.tolist() == old_keep
    if concat > 1:
        src, tgt = join_pairs(src, tgt, keep, concat, seed=7)
        lists = _old_join_pairs(*lists, old_keep, concat, seed=7)
        assert len(src) == len(lists[0]) < len(keep)
        assert all(np.array_equal(a, b) for a, b in zip([*src, *tgt], lists[0] + lists[1]))
        keep = old_keep = list(range(len(src)))
    lengths = [(len(s), len(t)) for s, t in zip(*lists)]
    assert pair_lengths(src, tgt).tolist() == [list(pair) for pair in lengths]
    for seed in (11, 12, None):
        for budget in (1, 60, 400):
            batches = token_batches(pair_lengths(src, tgt), budget, seed, keep)
            assert batches == _old_token_batches(lengths, budget, seed, old_keep)
    batches = token_batches(pair_lengths(src, tgt), 400, 3, keep)
    new = iterate_batches(src, tgt, batches)
    old = (collate([lists[0][i] for i in idx], [lists[1][i] for i in idx]) for idx in batches)
    assert all(_same_tensors(a, b) for a, b in zip(new, old, strict=True))
    first = next(iterate_batches(src, tgt, batches))
    assert (first.tgt_in[:, 0] == BOS).all() and (first.src == EOS).sum() == len(batches[0])


def _resident_kib(folder: Path) -> int:
    """This process's resident KiB of the files in `folder` (its lines of /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if "-" in head[0] and len(head[0]) > 8 and ":" not in head[0]:
            inside = len(head) >= 6 and head[5].startswith(str(folder))
        elif inside and head[0] == "Rss:":
            total += int(head[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_reading_batches_leaves_none_of_the_store_mapped(root):
    """A trainer's RSS holds what a batch reads, not every page of the store an epoch has
    read: iterate_batches releases the store's pages after each batch."""
    cfg = _cfg(root)
    vocab_dir = prepare_vocab(cfg)
    src, tgt = encode_split(cfg, vocab_dir, "train")
    folder = _store(vocab_dir, "train")
    assert _resident_kib(folder) == 0  # checking the store reads the files, not the maps
    words = [int(ids.sum()) for ids in [*src, *tgt]]  # every sentence read through the maps
    assert _resident_kib(folder) > 0
    batches = token_batches(pair_lengths(src, tgt), 200, 5)
    seen = sum(int(b.src.sum()) + int(b.tgt_out.sum()) for b in iterate_batches(src, tgt, batches))
    assert seen == sum(words) + EOS * len(src)  # the pages are read again where needed
    assert _resident_kib(folder) == 0


def test_sentencepiece_trains_on_every_line_or_a_bounded_seeded_sample(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("".join(f"a {i}\n" for i in range(300)), encoding="utf-8")
    b.write_text("".join(f"b {i}\n" for i in range(100)), encoding="utf-8")
    every = list(training_sample([a, b]))
    assert every == [f"a {i}" for i in range(300)] + [f"b {i}" for i in range(100)]
    few = list(training_sample([a, b], sentences=50))
    assert 0 < len(few) <= 50 and few == [line for line in every if line in set(few)]
    assert few == list(training_sample([a, b], sentences=50))  # seeded
    small = list(training_sample([a, b], size=500))
    assert sum(len(line) + 1 for line in small) <= 500


def test_a_trained_model_records_no_path_and_repeats_byte_for_byte(tmp_path):
    models = []
    for name in ("one", "two"):
        folder = tmp_path / name
        _make_corpus(folder)
        models.append((prepare_vocab(_cfg(folder)) / "joint.model").read_bytes())
    assert models[0] == models[1] and str(tmp_path).encode() not in models[0]


def test_a_resumed_run_on_a_store_written_by_workers_matches_an_uninterrupted_one(
        data_root, tmp_path, monkeypatch):
    """Exact resume on a corpus encoded by worker processes (as one above PARALLEL_PAIRS
    is): 4 steps, then --resume to 8, reach the parameters of 8 steps in one go."""
    from nmt.training.trainer import Trainer
    from tests.test_train import MODELS, tiny_config

    root = tmp_path / "data"
    shutil.copytree(data_root / "synth", root / "synth", ignore=shutil.ignore_patterns("spm"))
    calls = _encode_with_workers(monkeypatch, 2_000)
    model = {**MODELS["bahdanau"], "dropout": 0.2}
    first = Trainer(tiny_config(root, tmp_path, "full", model, max_steps=8, valid_every=4),
                    quiet=True)
    first.fit()
    assert calls and all(calls)  # every split of the corpus written by the workers
    Trainer(tiny_config(root, tmp_path, "part", model, max_steps=4, valid_every=4),
            quiet=True).fit()
    resumed = Trainer(tiny_config(root, tmp_path, "part", model, max_steps=8, valid_every=4),
                      resume=True, quiet=True)
    assert resumed.progress.step == 4 and isinstance(resumed.data.train_src, Ragged)
    resumed.fit()
    a, b = first.model.state_dict(), resumed.model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_an_unguarded_script_gets_one_line_not_a_hang(root, tmp_path):
    """A script whose top level encodes a split above PARALLEL_PAIRS without the
    `if __name__ == "__main__":` guard: each spawned worker re-runs it and stops at
    encode_split, and the script ends with one line naming the guard."""
    cfg = _cfg(root)
    prepare_vocab(cfg)  # the script's workers need not train SentencePiece again
    script = tmp_path / "unguarded.py"
    script.write_text(
        "import nmt.data.store as store\n"
        "from nmt.data.subwords import prepare_vocab\n"
        "from tests.test_subwords import _cfg\n"
        f"cfg = _cfg({str(root)!r})\n"
        "store.PARALLEL_PAIRS, store.WORKERS = 1, 2\n"
        "store.encode_split(cfg, prepare_vocab(cfg), 'train')\n")
    repo = str(Path(__file__).parent.parent)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": repo})
    assert done.returncode != 0
    assert "a worker process re-running a script" in done.stderr  # each worker's line
    last = done.stderr.strip().splitlines()[-1]
    assert "NMTError" in last and "__main__" in last and "docs/data.md" in last


@pytest.mark.parametrize("text", ["", "a", "a\n", "a\nb", "a\nb\n", "\n\n", "a\n\nb"])
def test_scan_counts_the_lines_read_lines_reads(tmp_path, text):
    import hashlib

    path = tmp_path / "side.txt"
    path.write_text(text, encoding="utf-8")
    assert store_module.scan(path) == (hashlib.sha256(text.encode()).hexdigest(),
                                       len(read_lines(path)))


def test_the_store_reports_pairs_done_chunk_by_chunk(tmp_path, monkeypatch):
    done = []
    monkeypatch.setattr(store_module, "tick", done.append)
    chunks = [(np.arange(7, dtype=np.uint16), np.array([3, 4]),
               np.arange(5, dtype=np.uint16), np.array([2, 3])),
              (np.arange(2, dtype=np.uint16), np.array([2]),
               np.arange(9, dtype=np.uint16), np.array([9]))]
    store_module.write_store(tmp_path / "train.x", iter(chunks), 3, (np.uint16, np.uint16), "t")
    assert done == [2, 1]  # pairs, not tokens


def test_sampled_chunks_give_each_side_its_own_dtype(tmp_path):
    class Wide:  # a target vocabulary past uint16
        src_size, tgt_size = 100, 70_000

        def sample_pairs(self, src, tgt, alpha, nbest, seed):
            return [[1, 2]] * len(src), [[69_999]] * len(tgt)

    paths = (tmp_path / "a.src", tmp_path / "a.tgt")
    paths[0].write_text("x\ny\n")
    paths[1].write_text("u\nv\n")
    (src, src_len, tgt, tgt_len), = store_module.sampled_chunks(
        paths, Wide(), np.array([0, 1]), 0.1, -1, 1)
    assert src.dtype == np.uint16 and tgt.dtype == np.int32 and tgt.tolist() == [69_999] * 2
    assert src_len.tolist() == [2, 2] and tgt_len.tolist() == [1, 1]


@pytest.mark.parametrize("bad", [0, 1])
def test_a_bad_line_while_encoding_names_its_own_file(tmp_path, bad):
    paths = (tmp_path / "pairs.src", tmp_path / "pairs.tgt")
    for side, path in enumerate(paths):
        path.write_bytes(b"fine\n" + (b"\xff\xfe broken\n" if side == bad else b"ok\n"))
    with pytest.raises(NMTError, match=rf"pairs\.{('src', 'tgt')[bad]}\b.*2"):
        list(store_module._line_chunks(paths))


@pytest.mark.parametrize("values", [np.zeros(0, np.int32), np.array([7], np.uint8),
                                    np.arange(10, dtype=np.uint16)])
def test_a_mapped_npy_file_reads_back_whole_through_the_map_and_in_blocks(tmp_path, values):
    """nmt.data.store:_map and _blocks — a 1-D .npy file maps as its own values (an empty
    one to an empty array, without a map) and reads back in blocks from the file, down to
    an array of one byte."""
    from nmt.data.store import _blocks, _map

    path = tmp_path / "a.npy"
    np.save(path, values)
    mapped = _map(path)
    assert mapped.array.dtype == values.dtype and np.array_equal(mapped.array, values)
    assert (mapped.map is None) == (len(values) == 0)
    for rows in (1, 3, 1 << 22):
        blocks = list(_blocks(mapped, rows))
        assert np.array_equal(np.concatenate(blocks) if blocks else values[:0], values)
        assert all(len(b) <= rows for b in blocks)


def test_a_store_with_an_empty_sentence_fits_and_a_falling_or_short_offset_does_not(tmp_path):
    """nmt.data.store:_fits — offsets start at 0, never fall (an empty sentence repeats
    one: a target SentencePiece encodes to no pieces, targets carrying no EOS) and end at
    the number of tokens; ids below the vocabulary size. Anything else is another version's
    file or an edit."""
    from nmt.data.store import _fits, _map

    def fits(tokens, offsets, count=3, size=10):
        np.save(tmp_path / "flat.npy", np.asarray(tokens, np.uint16))
        np.save(tmp_path / "offsets.npy", np.asarray(offsets, np.int64))
        return _fits(_map(tmp_path / "flat.npy"), _map(tmp_path / "offsets.npy"), count, size)

    assert fits([4, 5, 6, 7, 8], [0, 2, 2, 5])  # the second sentence is empty
    assert fits([4, 5, 6, 7, 8], [0, 0, 0, 5])
    assert not fits([4, 5, 6, 7, 8], [0, 3, 2, 5])  # falls
    assert not fits([4, 5, 6, 7, 8], [1, 2, 3, 5])  # does not start at 0
    assert not fits([4, 5, 6, 7, 8], [0, 2, 3, 4])  # ends before the last token
    assert not fits([4, 5, 6, 7, 8], [0, 2, 5])  # two sentences, not three
    assert not fits([4, 5, 6, 7, 10], [0, 2, 2, 5])  # an id past the vocabulary
