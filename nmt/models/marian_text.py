"""The published folder's SentencePiece models with `nmt`'s reading of text inside them, so
`transformers`' MarianTokenizer gives `nmt`'s ids on any text (docs/deploy.md, "Publish a
model").

`nmt` normalises every line before its SentencePiece model reads it (nmt.data.corpora.
normalise: NFC, any run of whitespace one space, ends trimmed, a leading byte-order mark
dropped). MarianTokenizer hands the raw text to SentencePiece, whose own normaliser is a
table of rewrites (a precompiled character map) applied longest match first. This module
writes `normalise` into that table for a run trained with SentencePiece's `identity` rule:
every whitespace character becomes a space (SentencePiece itself then collapses runs and
trims ends, as it does for nmt), every canonically decomposed or half-composed sequence its
NFC form, and U+FEFF nothing. The table is compiled by SentencePiece's own trainer from a
rule file (a throwaway model on a few lines) and copied into our model's normaliser; the
pieces, their scores and ids are untouched. On text `normalise` has already read the table
changes nothing, so nmt's ids are the same either way.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

from nmt.core.scratch import scratch

BOM = "\ufeff"
LAST = 0x2FA1F  # no character above decomposes or is whitespace (CJK compatibility ideographs end here)


def rewrites() -> dict[str, str]:
    """Source sequence -> what `normalise` makes of it, for one character or one
    decomposed sequence at a time."""
    rules: dict[str, str] = {}
    for code in range(LAST + 1):
        char = chr(code)
        if 0xD800 <= code <= 0xDFFF:
            continue
        if char.isspace() and char != " ":
            rules[char] = " "
            continue
        if unicodedata.is_normalized("NFD", char) and unicodedata.is_normalized("NFC", char):
            continue
        nfc, nfd = unicodedata.normalize("NFC", char), unicodedata.normalize("NFD", char)
        if nfc != char:
            rules[char] = nfc
        for cut in range(1, len(nfd)):  # fully and partly decomposed forms
            head = unicodedata.normalize("NFC", nfd[:cut])
            source = head + nfd[cut:]
            if source != nfc:
                rules.setdefault(source, nfc)
    rules[BOM] = ""
    return rules


def _tsv(rules: dict[str, str]) -> str:
    def hexes(text: str) -> str:
        return " ".join(f"{ord(c):X}" for c in text)
    return "".join(f"{hexes(src)}\t{hexes(dst)}\n" for src, dst in sorted(rules.items()))


def charsmap(work: Path) -> bytes:
    """`rewrites()` compiled by SentencePiece's trainer into its character-map format, in a
    scratch folder of `work` (publish's own)."""
    import sentencepiece as spm  # start-up: only publish builds the table

    with scratch(Path(work) / "charsmap") as folder:
        (folder / "rules.tsv").write_text(_tsv(rewrites()), encoding="utf-8")
        (folder / "text.txt").write_text("a b c d e f g\n" * 20, encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(folder / "text.txt"), model_prefix=str(folder / "m"), vocab_size=12,
            model_type="char", normalization_rule_tsv=str(folder / "rules.tsv"),
            minloglevel=2)
        from sentencepiece import sentencepiece_model_pb2 as pb  # start-up: the model's protobuf

        proto = pb.ModelProto()
        proto.ParseFromString((folder / "m.model").read_bytes())
        return proto.normalizer_spec.precompiled_charsmap


def reading_as_nmt(model: bytes, table: bytes) -> bytes | None:
    """The SentencePiece model `model` (serialised) with `table` as its normaliser, or None
    when its own rule is not `identity` (its table is kept: docs/deploy.md says what
    differs)."""
    from sentencepiece import sentencepiece_model_pb2 as pb  # start-up: the model's protobuf

    proto = pb.ModelProto()
    proto.ParseFromString(model)
    spec = proto.normalizer_spec
    if spec.name != "identity" or not spec.remove_extra_whitespaces:
        return None
    spec.name = "nmt_normalise"
    spec.precompiled_charsmap = table
    return proto.SerializeToString()
