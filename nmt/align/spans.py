"""Gold words that are not the model's words (docs/alignment.md, "Gold in another
tokenisation").

A gold alignment indexes its own tokens: often lowercased and tokenised ("oh , oh !"),
French contractions written out ("de le ministre" for "du ministre"). The model reads the
tokens written as its corpus is (`surface`: sentence-initial capitals restored; with
`detok`, contractions restored and spaces removed by sacremoses' detokeniser), every gold
token keeps the characters it became, and each SentencePiece piece belongs to every gold
token whose characters it covers (`piece_words`): its attention goes to them, whatever
the two tokenisations are.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from nmt.core.errors import NMTError
from nmt.data.corpora import normalise
from nmt.data.pin import corpus_of

Span = tuple[int, int]
SAMPLE = 2000  # lines of the run's corpus read to learn its style

# French contractions: a gold tokenised as Och & Ney's Hansards writes them out.
_FR_FUSED = {("de", "le"): "du", ("de", "les"): "des", ("à", "le"): "au", ("à", "les"): "aux"}
_FR_ELIDED = {"le": "l'", "la": "l'", "de": "d'", "ne": "n'", "je": "j'", "que": "qu'",
              "ce": "c'", "se": "s'", "me": "m'", "te": "t'", "jusque": "jusqu'",
              "lorsque": "lorsqu'", "puisque": "puisqu'", "quelque": "quelqu'"}
_VOWELS = "aeiouàâäéèêëîïôöùûüœæ"
# Common words whose h is "aspiré": no elision before them (le héros, la hausse).
_ASPIRATED = ("hache", "haie", "haine", "hall", "halte", "hamea", "hanche", "handica",
              "hangar", "hant", "harcel", "harcèl", "hardi", "haricot", "hasard", "hâte",
              "hausse", "haussé", "haut", "hérisson", "héro", "hibou", "hiérarch", "hockey",
              "holland", "homard", "hongr", "honte", "hors", "hurl", "hutte")
_GLUE_LEFT = {"en": {"n't"}}  # English clitics the detokeniser leaves apart


def _contracted_fr(tokens: Sequence[str]) -> list[tuple[str, list[int], bool]]:
    """French tokens with contractions written back: (text, gold tokens, glued to the next)."""
    out: list[tuple[str, list[int], bool]] = []
    k = 0
    while k < len(tokens):
        word, after = tokens[k], tokens[k + 1] if k + 1 < len(tokens) else ""
        fused = _FR_FUSED.get((word.lower(), after.lower()))
        if fused and not (after and k + 2 < len(tokens) and _elides(tokens[k + 2])):
            out.append((_like(word, fused), [k, k + 1], False))
            k += 2
            continue
        elided = _FR_ELIDED.get(word.lower())
        if elided and _elides(after) or (word.lower() == "si" and after.lower() in ("il", "ils")):
            out.append((_like(word, elided or "s'"), [k], True))
        else:
            out.append((word, [k], False))
        k += 1
    return out


def _elides(word: str) -> bool:
    """Whether a French word takes an elided article or pronoun before it (l'avis, j'y)."""
    word = word.lower()
    if word[:1] == "h":
        return not word.startswith(_ASPIRATED)
    return word == "y" or word[:1] in _VOWELS


def _like(word: str, new: str) -> str:
    """`new` with `word`'s capital first letter."""
    return new[:1].upper() + new[1:] if word[:1].isupper() else new


def surface(tokens: Sequence[str], lang: str, capitalise: bool = False, detok: bool = True
             ) -> tuple[str, list[list[Span]]]:
    """The text a model reads for gold `tokens` of language `lang`, and each token's
    character spans in it: with `detok`, contractions written back (French), hyphens
    joined and sacremoses' detokeniser; with `capitalise`, the first letter capitalised
    (and English "i" as "I"). Where the detokeniser changes characters, or without
    `detok`, the tokens are joined by spaces."""
    from sacremoses import MosesDetokenizer  # start-up: sacremoses loads only for pairs

    if not detok:
        parts = [(t, [k], False) for k, t in enumerate(tokens)]
    elif lang == "fr":
        parts = _contracted_fr(tokens)
    else:
        parts = [(t, [k], False) for k, t in enumerate(tokens)]
    glue = _GLUE_LEFT.get(lang, set())
    if capitalise and parts:
        text, owners, glued = parts[0]
        parts[0] = (text[:1].upper() + text[1:], owners, glued)
    if capitalise and lang == "en":
        parts = [("I" if t == "i" else t, o, g) for t, o, g in parts]
    spans = None
    if detok:
        parts = _hyphens(parts)
        words: list[str] = []
        for n, (text, _, _) in enumerate(parts):
            if words and (parts[n - 1][2] or text in glue):
                words[-1] += text
            else:
                words.append(text)
        joined = normalise(MosesDetokenizer(lang=lang).detokenize(words, unescape=False))
        spans = _locate(joined, [normalise(t) for t, _, _ in parts])
    if spans is None:  # the detokeniser changed characters: read the tokens as they are
        joined = " ".join(normalise(t) for t, _, _ in parts)
        spans = _locate(joined, [normalise(t) for t, _, _ in parts])
    out: list[list[Span]] = [[] for _ in tokens]
    for span, (_, owners, _) in zip(spans, parts, strict=True):
        for k in owners:
            out[k].append(span)
    return joined, out


def _hyphens(parts: list[tuple[str, list[int], bool]]) -> list[tuple[str, list[int], bool]]:
    """A hyphen split off as its own token ("peut - être", Moses' "@-@") between two words
    joins them again ("peut-être")."""
    out = []
    for n, (text, owners, glued) in enumerate(parts):
        if text in ("-", "@-@") and 0 < n < len(parts) - 1 and \
                parts[n - 1][0][-1:].isalnum() and parts[n + 1][0][:1].isalnum():
            before = out.pop()
            out += [(before[0], before[1], True), ("-", owners, True)]
        else:
            out.append((text, owners, glued))
    return out


def _locate(text: str, parts: Sequence[str]) -> list[Span] | None:
    """Each part's (start, end) in `text`, in order, whitespace between them skipped; None
    where `text` is not the parts with whitespace changed."""
    spans, at = [], 0
    for part in parts:
        while at < len(text) and text[at].isspace():
            at += 1
        if text[at:at + len(part)] != part:
            return None
        spans.append((at, at + len(part)))
        at += len(part)
    return spans if not text[at:].strip() else None


def piece_spans(processor, text: str) -> list[Span]:
    """The character span in `text` of each piece SentencePiece cuts it into (as
    `processor.encode(text)` does; byte offsets turned into characters)."""
    proto = processor.encode(text, return_type="proto")
    char_of = [0] * (len(text.encode("utf-8")) + 1)
    at = 0
    for n, ch in enumerate(text):
        width = len(ch.encode("utf-8"))
        for b in range(width):
            char_of[at + b] = n
        at += width
    char_of[at] = len(text)
    return [(char_of[p.begin], char_of[p.end]) for p in proto.pieces]


def piece_words(pieces: Sequence[Span], words: Sequence[Sequence[Span]]) -> list[list[int]]:
    """For each piece, the words whose characters it covers (a piece of only spaces, as a
    lone "▁", belongs to the words of the piece after it, or before it at the end)."""
    out = [[w for w, spans in enumerate(words) if any(a < e and s < b for s, e in spans)]
           for a, b in pieces]
    for k in [k for k, owners in enumerate(out) if not owners]:
        near = next((out[n] for n in range(k + 1, len(out)) if out[n]), None) or \
            next((out[n] for n in range(k - 1, -1, -1) if out[n]), [])
        out[k] = list(near)
    if any(not any(w in owners for owners in out) for w in range(len(words))):
        raise NMTError("a gold token covers no piece of the text the model reads; check "
                       "the pairs for empty tokens")
    return out


@dataclass(frozen=True)
class GoldWords:
    """One pair's gold tokens and, for each piece of the text the model reads (EOS not
    included), the tokens it covers: {"src": [[...], ...], "tgt": [[...], ...]}."""

    src_words: list[str]
    tgt_words: list[str]
    word_of: dict


@dataclass(frozen=True)
class Style:
    """How text is written: tokenised (punctuation split off by spaces), lowercased."""

    tokenised: bool
    lowercased: bool

    @classmethod
    def of(cls, lines: Sequence[str]) -> Style:
        """Read from the lines: tokenised when most commas and full stops stand alone,
        lowercased when most lines begin with a small letter."""
        marks = [m.group(1) for line in lines for m in re.finditer(r"(\s?)[,.](?=\s|$)", line)]
        starts = [m.group(0) for line in lines if (m := re.search(r"[^\W\d_]", line))]
        return cls(tokenised=bool(marks) and sum(map(bool, marks)) > len(marks) / 2,
                   lowercased=bool(starts) and sum(c.islower() for c in starts) > len(starts) / 2)


def corpus_style(cfg, run: Path) -> Style | None:
    """The style of the first lines of the run's training pairs (its pin, or its corpus as
    imported), or None where they cannot be read (a published model's corpus is not with
    it)."""
    try:
        paths = corpus_of(cfg, run).paths(cfg.data.train)
        lines = []
        for path in paths:
            with Path(path).open(encoding="utf-8") as fh:
                lines += list(islice(fh, SAMPLE))
    except (OSError, NMTError, UnicodeDecodeError):
        return None
    return Style.of(lines)


def gold_reading(vocab, sources: Sequence[str], targets: Sequence[str], langs: tuple[str, str],
                 corpus: Style | None, detokenise: bool = False
                 ) -> tuple[list[str], list[str], list[GoldWords], str]:
    """The texts the model reads for gold pairs `sources`/`targets` (whitespace tokens,
    which the gold indexes), their `GoldWords`, and a one-line notice (empty when the
    pairs are written as the corpus is). Lowercased pairs get their first letter back for
    a cased corpus (its style unknown: a corpus as published). With `detokenise`,
    tokenised pairs are also detokenised for a corpus that is not: off, as measured on
    the Hansards gold's development slice while the teacher's words keep punctuation
    attached (docs/experiments/2026-12-06-align-in-domain.md)."""
    pairs = Style.of(list(sources) + list(targets))
    corpus = corpus or Style(tokenised=False, lowercased=False)
    detok = detokenise and pairs.tokenised and not corpus.tokenised
    capitalise = pairs.lowercased and not corpus.lowercased
    src_texts, tgt_texts, gold = [], [], []
    for src, tgt in zip(sources, targets, strict=True):
        src_tokens, tgt_tokens = src.split(), tgt.split()
        src_text, src_spans = surface(src_tokens, langs[0], capitalise, detok)
        tgt_text, tgt_spans = surface(tgt_tokens, langs[1], capitalise, detok)
        word_of = {"src": piece_words(piece_spans(vocab.src, src_text), src_spans),
                   "tgt": piece_words(piece_spans(vocab.tgt, tgt_text), tgt_spans)}
        src_texts.append(src_text)
        tgt_texts.append(tgt_text)
        gold.append(GoldWords(src_tokens, tgt_tokens, word_of))
    return src_texts, tgt_texts, gold, _notice(pairs, corpus, detok, capitalise)


def _notice(pairs: Style, corpus: Style, detok: bool, capitalise: bool) -> str:
    written = [w for w, differs in (("lowercased", pairs.lowercased != corpus.lowercased),
                                    ("tokenised", pairs.tokenised != corpus.tokenised))
               if differs]
    if not written:
        return ""
    done = [d for d, on in (("detokenised", detok), ("with sentence-initial capitals",
                                                     capitalise)) if on]
    what = " and ".join(w if getattr(pairs, w) else f"not {w}" for w in written)
    return (f"the pairs are {what}, unlike the run's corpus: the model reads them "
            f"{' and '.join(done) or 'as they are'}, each piece scored on the gold token it "
            "covers; to close the rest of the gap, adapt the model to them (--adapt N) or "
            "train on a corpus imported with --lowercase")
