"""SentencePiece vocabularies, trained on the training split only and cached.

The cache key is a hash of the training files' contents and every option, so
a second `prepare` with the same inputs reuses the model and the encoded
splits instead of training again.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import re
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import sentencepiece as spm

from nmt.core.config import Config
from nmt.core.errors import NMTError, one_line
from nmt.core.locks import file_lock
from nmt.core.scratch import remove, scratch, sweep
from nmt.core.tokens import BOS, EOS, PAD, UNK
from nmt.data.corpora import LiveCorpus, iter_lines, normalise
from nmt.data.folder import HashedLines, sha256_file


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
                     seed: int) -> tuple[list[list[int]], list[list[int]]]:
        """Subword regularisation (Kudo 2018): one segmentation of each pair drawn from
        SentencePiece's distribution (`alpha`, `nbest` as its nbest_size; BPE: dropout `alpha`),
        shaped as encode_src/encode_tgt's. `seed` goes to SentencePiece's global generator:
        within one process it draws the same segmentations again, but not in another
        process, as SentencePiece's sampler cannot be seeded across processes
        (google/sentencepiece#609); a run therefore keeps each epoch's draw
        (nmt.training.batches.sampled_examples)."""
        options = {"enable_sampling": True, "alpha": alpha, "nbest_size": nbest, "num_threads": 1}
        spm.set_random_generator_seed(seed % (2**32 - 1))  # 2**32 - 1 means "unseeded"
        src = self.src.encode([normalise(x) for x in src_lines], **options)
        tgt = self.tgt.encode([normalise(x) for x in tgt_lines], **options)
        return [ids + [EOS] for ids in src], tgt

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
    return sha256_file(path)  # streamed in blocks


# SentencePiece's trainer peaks near 21x the bytes it is given: these bounds keep it near
# 1.4 GB (docs/experiments/2026-12-05-sentencepiece-sample.md)
SAMPLE_SENTENCES = 1_000_000  # SentencePiece trains on at most this many lines
SAMPLE_BYTES = 64 << 20  # ... and at most this many bytes of them
SAMPLE_SEED = 1234  # the draw of a larger corpus's sample


def training_sample(files: list[Path], sentences: int = SAMPLE_SENTENCES,
                    size: int = SAMPLE_BYTES, read: dict | None = None) -> Iterator[str]:
    """The lines SentencePiece trains on, streamed: every line of `files` in order when
    they are within both bounds, otherwise a seeded draw of each line with the probability
    that fills the tighter bound (cut at the bounds), never a whole file in memory. `read`
    gets each file's sha256 of the bytes this pass read (the whole file, past the bounds)."""
    lines = sum(_count_lines(path) for path in files)
    total = sum(path.stat().st_size for path in files)
    keep = min(1.0, sentences / max(lines, 1), size / max(total, 1))
    rng, taken, taken_bytes = random.Random(SAMPLE_SEED), 0, 0
    for path in files:
        with open(path, "rb") as handle:
            hashed = HashedLines(handle)
            for line in iter_lines(hashed, path):
                if taken > sentences or taken_bytes > size:
                    break  # the sample is full; the rest is only hashed
                if keep < 1.0 and rng.random() >= keep:
                    continue
                taken, taken_bytes = taken + 1, taken_bytes + len(line.encode()) + 1
                if taken <= sentences and taken_bytes <= size:
                    yield line
            if read is not None:
                read[path] = hashed.finish()


def _count_lines(path: Path) -> int:
    lines, last = 0, b"\n"
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            lines, last = lines + block.count(b"\n"), block[-1:]
    return lines + (last != b"\n")


def _train_one(lines_files: list[Path], prefix: Path, cfg, read: dict | None = None) -> None:
    """One model from `training_sample` of `lines_files`, fed to SentencePiece line by line
    (no concatenated copy). The model comes back in memory, so it records no file path or
    prefix: the same lines and options give the same bytes. `read`: training_sample's."""
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=training_sample(lines_files, read=read), model_writer=model,
            vocab_size=cfg.size,
            model_type=cfg.model_type, character_coverage=cfg.character_coverage,
            normalization_rule_name=cfg.normalization,
            pad_id=PAD, unk_id=UNK, bos_id=BOS, eos_id=EOS, hard_vocab_limit=False,
            input_sentence_size=SAMPLE_SENTENCES, shuffle_input_sentence=True,
            minloglevel=2, num_threads=2,
        )
    except RuntimeError as exc:
        if small := re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(exc)):
            raise NMTError(f"vocab.size={cfg.size} is below the {small[1]} pieces the corpus's "
                           f"characters and the special tokens need; set vocab.size to at "
                           f"least {small[1]} (or lower vocab.character_coverage)") from None
        names = ", ".join(str(path) for path in lines_files)
        raise NMTError(f"SentencePiece training failed on {names}: {one_line(exc)}") from None
    prefix.with_suffix(".model").write_bytes(model.getvalue())
    trained = spm.SentencePieceProcessor(model_proto=model.getvalue())  # the pieces, to read
    prefix.with_suffix(".vocab").write_text("".join(
        f"{trained.id_to_piece(i)}\t{trained.get_score(i):g}\n"
        for i in range(trained.get_piece_size())), encoding="utf-8")


def prepare_vocab(cfg: Config) -> Path:
    """Train (or reuse) the SentencePiece model(s) of `cfg` on its corpus as imported;
    returns their folder in the data root's cache."""
    corpus = LiveCorpus.of(cfg)
    return train_vocab(corpus.paths(cfg.data.train), cfg.vocab, corpus.cache)


def train_vocab(files: tuple[Path, Path], options_cfg, cache: Path) -> Path:
    """The SentencePiece model(s) of the training text `files` (source, target) with the
    `vocab` options `options_cfg`, trained once and kept in `cache/spm/<key>/`, the key a
    hash of every option and the files' contents, as the pass that trains read them
    (docs/data.md, "The run's data")."""
    src_file, tgt_file = map(Path, files)
    options = {k: v for k, v in asdict(options_cfg).items()  # sampling: training only, same model
               if k not in ("sampling_alpha", "sampling_nbest")}
    key = _key(options, _sha(src_file), _sha(tgt_file))
    out = Path(cache) / "spm" / hashlib.sha256(key.encode()).hexdigest()[:16]
    if (out / "options.json").is_file():  # complete: folders appear by rename only
        return out
    with file_lock(out.parent / ".lock"):  # another `nmt train` may be training it
        sweep(out.parent, out.name)  # what a killed trainer left
        if not (out / "options.json").is_file():
            _train_vocab(options_cfg, src_file, tgt_file, key, out)
    return out


def _key(options: dict, src_sha: str, tgt_sha: str) -> str:
    return json.dumps({"vocab": options, "src": src_sha, "tgt": tgt_sha}, sort_keys=True)


def _train_vocab(cfg, src_file: Path, tgt_file: Path, key: str, out: Path) -> None:
    """Train into a private scratch folder, then rename it to `out` in one step, once the
    digests of what the training read are those of the key (a file replaced in between,
    by a re-import, would otherwise file one text's vocabulary under another's key)."""
    read: dict = {}
    with scratch(out) as tmp:
        if cfg.joint:
            _train_one([src_file, tgt_file], tmp / "joint", cfg, read)
        else:
            _train_one([src_file], tmp / "src", cfg, read)
            _train_one([tgt_file], tmp / "tgt", cfg, read)
        as_read = _key(json.loads(key)["vocab"], read.get(src_file), read.get(tgt_file))
        if as_read != key:
            raise NMTError(f"{src_file}: the training text changed while SentencePiece read "
                           "it (a re-import?); nothing was kept: run the command again")
        (tmp / "options.json").write_text(key + "\n")
        remove(out)  # a partial folder left by an older version
        tmp.rename(out)
