"""SentencePiece vocabularies, trained on the training split only and cached.

The cache key is a hash of the training files' contents and every option, so
a second `prepare` with the same inputs reuses the model and the encoded
splits instead of training again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import zipfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
import sentencepiece as spm

from nmt.core.config import Config
from nmt.core.errors import NMTError, one_line
from nmt.core.locks import file_lock
from nmt.core.tokens import BOS, EOS, PAD, UNK
from nmt.data.corpora import corpus_dir, load_split, normalise


class Vocab:
    """Source and target SentencePiece processors (the same one when joint)."""

    def __init__(self, src_model: Path, tgt_model: Path):
        self.paths = (Path(src_model), Path(tgt_model))
        for path in self.paths:
            if not path.is_file():
                raise NMTError(f"{path}: SentencePiece model not found")
        self.src = _load_model(self.paths[0])
        self.tgt = self.src if src_model == tgt_model else _load_model(self.paths[1])

    @property
    def src_size(self) -> int:
        return self.src.get_piece_size()

    @property
    def tgt_size(self) -> int:
        return self.tgt.get_piece_size()

    @property
    def joint(self) -> bool:
        return self.src is self.tgt

    def encode_src(self, lines: list[str]) -> list[list[int]]:
        """Source ids with EOS appended (the encoder sees where the sentence ends).

        Lines are normalised as corpora are on import (NFC, whitespace), so free text
        meets the pieces the model was trained on."""
        return [ids + [EOS] for ids in self.src.encode([normalise(x) for x in lines])]

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        return self.tgt.encode([normalise(x) for x in lines])

    def sample_pairs(self, src_lines: list[str], tgt_lines: list[str], alpha: float, nbest: int,
                     seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Subword regularisation (Kudo 2018): one segmentation of each pair drawn from
        SentencePiece's distribution (`alpha`, `nbest` as its nbest_size; BPE: dropout `alpha`),
        as encode_src/encode_tgt shape them. The same `seed` draws the same segmentations:
        SentencePiece's generator is global and is reproducible on one thread only."""
        options = {"enable_sampling": True, "alpha": alpha, "nbest_size": nbest, "num_threads": 1}
        spm.set_random_generator_seed(seed % (2**32 - 1))  # 2**32 - 1 means "unseeded"
        src = self.src.encode([normalise(x) for x in src_lines], **options)
        tgt = self.tgt.encode([normalise(x) for x in tgt_lines], **options)
        return ([np.asarray(ids + [EOS], dtype=np.int32) for ids in src],
                [np.asarray(ids, dtype=np.int32) for ids in tgt])

    @property
    def normalization(self) -> str:
        """The SentencePiece rule the target model applies, read from its behaviour (the
        rule's name sits in a protobuf field we do not parse)."""
        probe = "\ufb01\u200bA\u2026"  # ligature fi, zero-width space, A, ellipsis
        out = self.tgt.normalize(probe).replace("\u2581", " ").strip()
        return _RULES.get(out, "unknown")

    def decode_tgt(self, ids: list[int]) -> str:
        return self.tgt.decode([i for i in ids if i > EOS])

    def src_pieces(self, ids: list[int]) -> list[str]:
        return [self.src.id_to_piece(i) for i in ids]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self.tgt.id_to_piece(i) for i in ids]

    @classmethod
    def from_dir(cls, directory: Path) -> Vocab:
        joint = directory / "joint.model"
        if joint.is_file():
            return cls(joint, joint)
        return cls(directory / "src.model", directory / "tgt.model")


_RULES = {"\ufb01\u200bA\u2026": "identity", "fi\u200bA...": "nfkc", "fi\u200ba...": "nfkc_cf",
          "fi A...": "nmt_nfkc", "fi a...": "nmt_nfkc_cf"}  # the probe's output per rule


def _load_model(path: Path):
    try:
        return spm.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError) as exc:  # a truncated or foreign file
        raise NMTError(f"{path}: not a readable SentencePiece model ({one_line(exc)}); restore it "
                       "or re-train the run") from None


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _train_one(lines_files: list[Path], prefix: Path, cfg: Config) -> None:
    text = prefix.with_suffix(".txt")
    with open(text, "w", encoding="utf-8") as out:
        out.writelines(path.read_text(encoding="utf-8") for path in lines_files)
    try:
        spm.SentencePieceTrainer.train(
            input=str(text), model_prefix=str(prefix), vocab_size=cfg.vocab.size,
            model_type=cfg.vocab.model_type, character_coverage=cfg.vocab.character_coverage,
            normalization_rule_name=cfg.vocab.normalization,
            pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS, hard_vocab_limit=False,
            input_sentence_size=2_000_000, shuffle_input_sentence=True,
            minloglevel=2, num_threads=2,
        )
    except RuntimeError as exc:
        raise NMTError(f"SentencePiece training failed on {text}: {exc}") from None
    text.unlink()


def prepare_vocab(cfg: Config) -> Path:
    """Train (or reuse) the SentencePiece model(s) for `cfg`; returns their folder."""
    root = Path(cfg.data.root)
    load_split(root, cfg.data.corpus, cfg.data.pair, cfg.data.train)  # validates the split
    directory = corpus_dir(root, cfg.data.corpus, cfg.data.pair)
    src_file = directory / f"{cfg.data.train}.{cfg.src_lang}"
    tgt_file = directory / f"{cfg.data.train}.{cfg.tgt_lang}"
    options = {k: v for k, v in asdict(cfg.vocab).items()  # sampling: training only, same model
               if k not in ("sampling_alpha", "sampling_nbest")}
    key = json.dumps({"vocab": options, "src": _sha(src_file), "tgt": _sha(tgt_file)},
                     sort_keys=True)
    out = directory / "spm" / hashlib.sha256(key.encode()).hexdigest()[:16]
    if (out / "options.json").is_file():  # complete: folders appear by rename only
        return out
    with file_lock(directory / "spm" / ".lock"):  # another `nmt train` may be training it
        if not (out / "options.json").is_file():
            _train_vocab(cfg, src_file, tgt_file, key, out)
    return out


def _train_vocab(cfg: Config, src_file: Path, tgt_file: Path, key: str, out: Path) -> None:
    """Train into a private temporary folder, then rename it to `out` in one step."""
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        if cfg.vocab.joint:
            _train_one([src_file, tgt_file], tmp / "joint", cfg)
        else:
            _train_one([src_file], tmp / "src", cfg)
            _train_one([tgt_file], tmp / "tgt", cfg)
        (tmp / "options.json").write_text(key + "\n")
        shutil.rmtree(out, ignore_errors=True)  # a partial folder left by an older version
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def encode_split(cfg: Config, vocab_dir: Path, split: str) -> tuple[list[np.ndarray],
                                                                    list[np.ndarray]]:
    """Encoded (source, target) id arrays for a split, cached next to the vocabulary."""
    root = Path(cfg.data.root)
    src_lines, tgt_lines = load_split(root, cfg.data.corpus, cfg.data.pair, split)
    directory = corpus_dir(root, cfg.data.corpus, cfg.data.pair)
    digest = hashlib.sha256()
    for lang in (cfg.src_lang, cfg.tgt_lang):
        digest.update(_sha(directory / f"{split}.{lang}").encode())
    cache = vocab_dir / f"{split}.{digest.hexdigest()[:12]}.npz"
    vocab = Vocab.from_dir(vocab_dir)
    if cache.is_file():
        try:
            with np.load(cache) as data:
                sides = [_side(data[name], data[f"{name}_off"], len(lines), size)
                         for name, lines, size in (("src", src_lines, vocab.src_size),
                                                   ("tgt", tgt_lines, vocab.tgt_size))]
            if None not in sides:
                return sides[0], sides[1]
            print(f"{cache}: does not hold this split's {len(src_lines):,} encoded pairs; "
                  f"encoding {split} again", file=sys.stderr)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            print(f"{cache}: unreadable ({one_line(exc)}); encoding {split} again",
                  file=sys.stderr)
    src = [np.asarray(ids, dtype=np.int32) for ids in vocab.encode_src(src_lines)]
    tgt = [np.asarray(ids, dtype=np.int32) for ids in vocab.encode_tgt(tgt_lines)]
    tmp = cache.with_name(f"{cache.stem}.tmp{os.getpid()}.npz")  # private to this process
    try:
        np.savez(tmp, src=_flat(src), src_off=_offsets(src), tgt=_flat(tgt),
                 tgt_off=_offsets(tgt))
        os.replace(tmp, cache)  # atomic: readers see the old state or the complete file
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves no part-written file behind
        raise
    return src, tgt


def _flat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0, np.int32)


def _offsets(arrays: list[np.ndarray]) -> np.ndarray:
    return np.cumsum([0] + [len(a) for a in arrays]).astype(np.int64)


def _unflatten(flat: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    return [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]


def _side(flat: np.ndarray, offsets: np.ndarray, count: int, size: int
          ) -> list[np.ndarray] | None:
    """One side of a cached split, or None when the arrays, readable as they may be, are
    not `count` sentences of ids below `size` (another version's file, a hand's edit)."""
    whole = (flat.ndim == 1 and offsets.ndim == 1 and len(offsets) == count + 1
             and np.issubdtype(flat.dtype, np.integer)
             and np.issubdtype(offsets.dtype, np.integer)
             and offsets[0] == 0 and offsets[-1] == len(flat)
             and bool((np.diff(offsets) >= 0).all())
             and (not flat.size or (flat.min() >= 0 and flat.max() < size)))
    return _unflatten(flat.astype(np.int32, copy=False), offsets) if whole else None
