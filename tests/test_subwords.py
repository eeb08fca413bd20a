"""Tests for the cached SentencePiece vocabularies (nmt/data/subwords.py)."""

from __future__ import annotations

import random
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import sentencepiece

from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.tokens import BOS, EOS, PAD, UNK
from nmt.data.pipeline import download
from nmt.data.store import encode_split
from nmt.data.subwords import Vocab, prepare_vocab
from nmt.models.checks import config_from_dict

DE_TEXT = ("ein eine der die das zwei drei mann frau kind hund katze mädchen junge spielt "
           "läuft isst trinkt liest sitzt steht auf im am unter über neben grünen roten "
           "großen kleinen alten jungen straße wiese strand haus tisch ball fahrrad brötchen "
           "wasser buch hut schnell langsam fröhlich müde")
EN_TEXT = ("a an the two three man woman child dog cat girl boy plays runs eats drinks reads "
           "sits stands on in at under over next green red big small old young street "
           "meadow beach house table ball bike roll water book hat quickly slowly happily "
           "tired")
DE_WORDS, EN_WORDS = DE_TEXT.split(), EN_TEXT.split()


def _lines(words: tuple[str, ...] | list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))).capitalize() + "."
            for _ in range(n)]


def _import(root: Path, splits: dict[str, tuple[list[str], list[str]]]) -> None:
    """Import `splits` as data/multi30k/de-en through the pipeline (Multi30k's preset)."""
    raw = root / "raw"
    raw.mkdir(parents=True)
    for split, sides in splits.items():
        for lang, lines in zip(("de", "en"), sides):
            (raw / f"{split}.{lang}").write_text("".join(f"{x}\n" for x in lines),
                                                 encoding="utf-8")
    download("multi30k", "de-en", root, raw)


def _make_corpus(root: Path) -> None:
    _import(root, {"train": (_lines(DE_WORDS, 200, 1), _lines(EN_WORDS, 200, 2)),
                   "val": (_lines(DE_WORDS, 20, 3), _lines(EN_WORDS, 20, 4)),
                   "test": (_lines(DE_WORDS, 15, 5), _lines(EN_WORDS, 15, 6))})


def _cfg(root: Path, **vocab) -> Config:
    return config_from_dict({
        "model": {"family": "bahdanau"},
        "data": {"root": str(root), "corpus": "multi30k", "pair": "de-en", "test": "test"},
        "vocab": {"size": 100, **vocab},
    })


@pytest.fixture
def root(tmp_path: Path) -> Path:
    _make_corpus(tmp_path)
    return tmp_path


@pytest.fixture
def train_calls(monkeypatch) -> list[dict]:
    """Record every SentencePiece training (still training for real)."""
    calls: list[dict] = []
    real = sentencepiece.SentencePieceTrainer.train

    def recording(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(sentencepiece.SentencePieceTrainer, "train", recording)
    return calls


def _forbid_training(monkeypatch) -> None:
    def fail(*args, **kwargs):
        raise AssertionError("SentencePiece trained again instead of reusing the cache")

    monkeypatch.setattr(sentencepiece.SentencePieceTrainer, "train", fail)


def test_prepare_trains_once_then_reuses(root, train_calls, monkeypatch):
    cfg = _cfg(root)
    first = prepare_vocab(cfg)
    assert len(train_calls) == 1
    assert train_calls[0]["vocab_size"] == 100
    assert first.parent == root / ".cache" / "spm"  # outside the corpus folder
    assert {p.name for p in first.iterdir()} == {"joint.model", "joint.vocab", "options.json"}
    assert not list(first.parent.glob("*.tmp*"))  # the temporary folder was renamed away

    _forbid_training(monkeypatch)
    assert prepare_vocab(cfg) == first
    assert prepare_vocab(_cfg(root)) == first  # an equal config from scratch, too


def test_vocab_has_the_reserved_ids(root):
    vocab = Vocab.from_dir(prepare_vocab(_cfg(root)))
    assert vocab.joint and vocab.src_size == vocab.tgt_size
    assert 50 < vocab.src_size <= 100
    assert vocab.src_pieces([PAD, UNK, BOS, EOS]) == ["<pad>", "<unk>", "<s>", "</s>"]


def test_changed_options_or_data_give_another_dir(root, train_calls):
    base = prepare_vocab(_cfg(root))
    dirs = {base,
            prepare_vocab(_cfg(root, size=120)),
            prepare_vocab(_cfg(root, model_type="bpe")),
            prepare_vocab(_cfg(root, joint=False)),
            prepare_vocab(_cfg(root, character_coverage=0.9995))}
    assert len(dirs) == 5
    assert len(train_calls) == 6  # the separate vocabulary trains twice
    # new training data: a new vocabulary, the old one stays in place
    train_en = root / "multi30k" / "de-en" / "train.en"
    train_en.write_text(train_en.read_text(encoding="utf-8").replace(".\n", " again.\n", 1),
                        encoding="utf-8")
    assert prepare_vocab(_cfg(root)) not in dirs
    assert (base / "joint.model").is_file()


def test_separate_vocabularies(root):
    vocab_dir = prepare_vocab(_cfg(root, joint=False))
    assert {p.name for p in vocab_dir.glob("*.model")} == {"src.model", "tgt.model"}
    vocab = Vocab.from_dir(vocab_dir)
    assert not vocab.joint
    assert vocab.src.id_to_piece(EOS) == vocab.tgt.id_to_piece(EOS) == "</s>"
    # each side's model only knows its own language's characters
    assert any("ä" in p for p in vocab.src_pieces(range(vocab.src_size)))
    assert not any("ä" in p for p in vocab.tgt_pieces(range(vocab.tgt_size)))
    src, tgt = encode_split(_cfg(root, joint=False), vocab_dir, "val")
    assert len(src) == len(tgt) == 20


@pytest.mark.parametrize("joint", [True, False])
def test_encode_split_ids(root, joint):
    cfg = _cfg(root, joint=joint)
    vocab_dir = prepare_vocab(cfg)
    vocab = Vocab.from_dir(vocab_dir)
    src, tgt = encode_split(cfg, vocab_dir, "train")
    assert len(src) == len(tgt) == 200
    assert all(ids.dtype == np.int32 for ids in list(src) + list(tgt))
    assert all(len(ids) >= 2 and ids[-1] == EOS for ids in src)  # source ends with EOS
    assert all(EOS not in ids[:-1] and BOS not in ids and PAD not in ids for ids in src)
    assert all(len(ids) and EOS not in ids and BOS not in ids for ids in tgt)
    assert max(int(ids.max()) for ids in src) < vocab.src_size
    assert max(int(ids.max()) for ids in tgt) < vocab.tgt_size
    en = (root / "multi30k" / "de-en" / "train.en").read_text(encoding="utf-8").splitlines()
    assert [vocab.decode_tgt(ids.tolist()) for ids in tgt[:20]] == en[:20]


def test_encoded_split_cache_is_reused(root, monkeypatch):
    cfg = _cfg(root)
    vocab_dir = prepare_vocab(cfg)
    src, tgt = encode_split(cfg, vocab_dir, "val")
    (store,) = vocab_dir.glob("val.*")
    assert sorted(p.name for p in store.iterdir()) == ["source.json", "src.npy", "src_off.npy",
                                                       "tgt.npy", "tgt_off.npy"]
    assert not list(vocab_dir.glob("*.tmp*"))

    def fail(self, lines):
        raise AssertionError("encoded again instead of reading the cache")

    monkeypatch.setattr(Vocab, "encode_src", fail)
    monkeypatch.setattr(Vocab, "encode_tgt", fail)
    src2, tgt2 = encode_split(cfg, vocab_dir, "val")
    assert len(src2) == len(src) and len(tgt2) == len(tgt)
    assert all(np.array_equal(a, b) for a, b in zip([*src, *tgt], [*src2, *tgt2]))
    # a changed split is encoded again (and here it must fail, proving the cache was not used)
    val_de = root / "multi30k" / "de-en" / "val.de"
    val_de.write_text(val_de.read_text(encoding="utf-8").replace(".\n", " neu.\n", 1),
                      encoding="utf-8")
    with pytest.raises(AssertionError, match="encoded again"):
        encode_split(cfg, vocab_dir, "val")


def test_hypotheses_keep_the_references_characters(tmp_path, train_calls):
    """The corpus is NFC; the default SentencePiece rule must not NFKC-fold what it emits
    ("…" -> "...", "ﬁ" -> "fi"), or no hypothesis could match such a reference."""
    rng = random.Random(7)
    special = ["…", "ﬁnal", "２０", "½", "™"]
    lines = [" ".join(rng.choice(EN_WORDS + special) for _ in range(8)) for _ in range(200)]
    splits = {s: (_lines(DE_WORDS, 200, 1), lines) for s in ("train", "val", "test")}
    _import(tmp_path, splits)
    cfg = _cfg(tmp_path)
    assert cfg.vocab.normalization == "identity"
    vocab = Vocab.from_dir(prepare_vocab(cfg))
    assert train_calls[-1]["normalization_rule_name"] == "identity"
    assert vocab.normalization == "identity"
    assert [vocab.decode_tgt(ids) for ids in vocab.encode_tgt(lines)] == lines
    # inputs are NFC-normalised as the corpus was: a decomposed "ä" still finds its pieces
    composed, decomposed = "mädchen läuft", unicodedata.normalize("NFD", "mädchen läuft")
    assert vocab.encode_src([decomposed]) == vocab.encode_src([composed])

    nfkc = Vocab.from_dir(prepare_vocab(_cfg(tmp_path, normalization="nmt_nfkc")))
    assert nfkc.normalization == "nmt_nfkc"
    assert nfkc.decode_tgt(nfkc.encode_tgt(["ﬁnal …"])[0]) == "final ..."
    assert len({prepare_vocab(_cfg(tmp_path, normalization=n))
                for n in ("identity", "nmt_nfkc", "nfkc_cf")}) == 3  # part of the cache key


def test_unknown_normalization_is_rejected(tmp_path):
    with pytest.raises(NMTError, match="vocab.normalization.*identity"):
        _cfg(tmp_path, normalization="nfc")
