"""An OPUS-MT model's vocabulary (transformers' MarianTokenizer files) read with nmt's ids.

OPUS-MT cuts text with two SentencePiece models (`source.spm`, `target.spm`) but numbers
the pieces with its own `vocab.json` (and `target_vocab.json` when `separate_vocabs`): a
piece missing from it is `<unk>`, EOS is appended to every source. Its special ids are not
ours: EOS 0, UNK 1, padding last (`pad_token_id` = vocab_size - 1), and the decoder starts
from the padding id. nmt's search, batching and alignment records assume PAD 0, UNK 1,
BOS 2, EOS 3 (nmt.core.tokens), so the ids are permuted once, here, at the boundary:

    our id   0 PAD   1 UNK   2 BOS          3 EOS   4, 5, ...
    Marian   pad     unk     decoder start  eos     every other id, in Marian's order

`ORDER[k]` is the Marian id of our id k; the model's embedding and output rows are read in
that order (nmt.models.opus), so the weights and this vocabulary agree without any other
change. Our BOS is one more id than Marian has: its input row is the decoder start's (the
padding row), and it is never predicted (nmt.models.opus masks its output).

Text is read as nmt reads it (NFC, whitespace collapsed: `normalise`), then as
MarianTokenizer reads it: a leading `>>xx<<` language code is one token, the rest goes
through the SentencePiece model. Two differences, both from MarianTokenizer treating
special strings as tokens: a literal `</s>`, `<unk>` or `<pad>` in the text is characters
here, a special token there. Decoding drops the special ids and joins the pieces as
MarianTokenizer's `batch_decode(skip_special_tokens=True)` does.
"""

from __future__ import annotations

import json
from pathlib import Path

import sentencepiece as spm

from nmt.core.errors import NMTError, one_line
from nmt.core.tokens import BOS, EOS
from nmt.data.corpora import normalise

SPECIALS = 4  # PAD, UNK, BOS, EOS: our ids below this are not pieces of the text
BOS_PIECE = "<s>"  # how our BOS (Marian has none) is shown


def read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data
    except (OSError, ValueError) as exc:
        raise NMTError(f"{path}: unreadable ({one_line(exc)}); download the model again") from None


class Side:
    """One side's pieces: Marian's piece -> id mapping and its permutation into ours."""

    def __init__(self, ids: dict, pad: int, unk: int, start: int, eos: int, where: Path):
        size = len(ids)
        if sorted(ids.values()) != list(range(size)):
            raise NMTError(f"{where}: its ids are not 0..{size - 1}, each once; not a "
                           "MarianTokenizer vocabulary")
        if not all(0 <= i < size for i in (pad, unk, start, eos)):
            raise NMTError(f"{where}: a special id (pad {pad}, unk {unk}, start {start}, eos "
                           f"{eos}) lies outside its {size} ids; config.json and it disagree")
        self.marian = ids
        rest = [i for i in range(size) if i not in (pad, unk, eos)]
        self.order = [pad, unk, start, eos, *rest]  # our id -> Marian's
        self.ours = [0] * size  # Marian's id -> ours (padding: PAD; the start id: BOS only as input)
        for k, m in enumerate(self.order):
            if k != BOS:
                self.ours[m] = k
        piece = {i: p for p, i in ids.items()}
        self.pieces = [piece[m] for m in self.order]
        self.pieces[BOS] = BOS_PIECE
        self.unk = unk

    def ids(self, pieces: list[str]) -> list[int]:
        get, unk, ours = self.marian.get, self.unk, self.ours
        return [ours[get(p, unk)] for p in pieces]


class OpusVocab:
    """`nmt.data.subwords.Vocab`'s interface over a MarianTokenizer folder, in nmt's ids."""

    def __init__(self, folder: Path, config: dict):
        folder = Path(folder)
        tok = read_json(folder / "tokenizer_config.json") if (
            folder / "tokenizer_config.json").is_file() else {}
        self.separate = bool(tok.get("separate_vocabs", False))
        self.paths = tuple(folder / name for name in (
            "source.spm", "target.spm", "vocab.json",
            *(("target_vocab.json",) if self.separate else ())))
        for path in self.paths:
            if not path.is_file():
                raise NMTError(f"{path}: missing; an OPUS-MT model folder holds source.spm, "
                               "target.spm and vocab.json (MarianTokenizer's files)")
        self.src, self.tgt = (_load(p) for p in self.paths[:2])
        unk_piece = str(tok.get("unk_token", "<unk>"))
        pad, eos = config.get("pad_token_id", 58100), config.get("eos_token_id", 0)
        start = config.get("decoder_start_token_id", pad)
        sides = []
        for path in (self.paths[2], self.paths[-1]):
            ids = read_json(path)
            if unk_piece not in ids:
                raise NMTError(f"{path}: has no {unk_piece!r}; not a MarianTokenizer vocabulary")
            sides.append(Side(ids, pad, ids[unk_piece], start, eos, path))
        self.source, self.target = sides
        self.codes = {p for p in self.source.marian if p.startswith(">>") and p.endswith("<<")}

    src_size = property(lambda self: len(self.source.order))
    tgt_size = property(lambda self: len(self.target.order))
    joint = property(lambda self: not self.separate)  # one vocab.json for both sides

    def _cut(self, processor, line: str, codes: bool) -> list[str]:
        text, code = normalise(line), []
        if codes and text.startswith(">>") and (end := text.find("<<")) != -1:
            code, text = [text[:end + 2]], text[end + 2:]  # MarianTokenizer's language code
        return code + processor.encode(text, out_type=str)

    def encode_src(self, lines: list[str]) -> list[list[int]]:
        """Our source ids of each line, EOS appended (as MarianTokenizer appends its own)."""
        return [self.source.ids(self._cut(self.src, x, True)) + [EOS] for x in lines]

    def encode_tgt(self, lines: list[str]) -> list[list[int]]:
        return [self.target.ids(self._cut(self.tgt, x, False)) for x in lines]

    def decode_tgt(self, ids: list[int]) -> str:
        """MarianTokenizer's batch_decode(skip_special_tokens=True): the special ids dropped
        (UNK among them), the pieces joined by the target model, "▁" read as a space."""
        pieces = [self.target.pieces[i] for i in ids if i >= SPECIALS]
        return self.tgt.decode_pieces(pieces).replace("\u2581", " ").strip()

    def src_pieces(self, ids: list[int]) -> list[str]:
        return [self.source.pieces[i] for i in ids]

    def tgt_pieces(self, ids: list[int]) -> list[str]:
        return [self.target.pieces[i] for i in ids]

    def sample_pairs(self, *args, **kwargs):
        raise NMTError("subword sampling trains nmt's own vocabularies; an OPUS-MT model's "
                       "is read as published")


def _load(path: Path):
    try:
        return spm.SentencePieceProcessor(model_file=str(path))
    except (RuntimeError, OSError) as exc:
        raise NMTError(f"{path}: not a readable SentencePiece model ({one_line(exc)}); "
                       "download the model again") from None
