"""Two directions of one corpus: check that two runs are each other's reverse, turn the
reverse run's records into the forward (source, target) order, symmetrise them.

Several runs of one direction can be pooled first (`mean_records`: an ensemble, the mean
of their word maps), and the pooled maps symmetrised like one run's.

Flipped, pooled and symmetrised records are *word-level* records: their tokens are the words
(each marked as a word start, "▁word", plus EOS), so every tool that reduces pieces to
words gets the words back unchanged; `weights` is (1, 1, T+1, S+1) with an empty EOS row
and column and is read naively (meta "reading": "naive").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nmt.align.records import AlignmentRecord
from nmt.align.words import WORD_START, links_from_matrix
from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.tokens import EOS_PIECE
from nmt.data.links import Link
from nmt.data.symmetrize import (
    AGREEMENT,
    DEFAULT_AGREEMENT,
    agreement,
    flip_links,
    symmetrize,
)


def check_reverse(forward: Config, reverse: Config, forward_run: str, reverse_run: str) -> None:
    """One-line NMTError unless `reverse` was trained on the same corpus, other direction."""
    a, b = forward.data.pair.split("-"), reverse.data.pair.split("-")
    if b != a[::-1]:
        raise NMTError(f"--reverse {reverse_run}: its pair is {reverse.data.pair} but "
                       f"{forward_run} is {forward.data.pair}; the reverse run must be "
                       f"{'-'.join(a[::-1])}")
    if forward.data.corpus != reverse.data.corpus:
        raise NMTError(f"--reverse {reverse_run}: trained on {reverse.data.corpus} but "
                       f"{forward_run} on {forward.data.corpus}; use runs of one corpus")


def word_record(index: int, src_words: Sequence[str], tgt_words: Sequence[str],
                matrix: np.ndarray, links: set[Link], meta: dict) -> AlignmentRecord:
    """A record whose pieces are its words: `matrix` (T_word, S_word) is both the
    word-level map and, padded with an empty EOS row and column, the (1, 1, T+1, S+1) map."""
    matrix = np.asarray(matrix, dtype=np.float32)
    weights = np.zeros((1, 1, len(tgt_words) + 1, len(src_words) + 1), dtype=np.float32)
    weights[0, 0, :-1, :-1] = matrix
    return AlignmentRecord(
        index=index, src_tokens=[WORD_START + w for w in src_words] + [EOS_PIECE],
        tgt_tokens=[WORD_START + w for w in tgt_words] + [EOS_PIECE], weights=weights,
        src_words=list(src_words), tgt_words=list(tgt_words), word_weights=matrix,
        links=sorted(links), meta={**meta, "reading": "naive"})


def link_matrix(links: set[Link], src_len: int, tgt_len: int) -> np.ndarray:
    """0/1 matrix (T, S) with a 1 at [j, i] for every link (i, j)."""
    matrix = np.zeros((tgt_len, src_len), dtype=np.float32)
    for i, j in links:
        matrix[j, i] = 1.0
    return matrix


def flip_record(record: AlignmentRecord, meta: dict | None = None) -> AlignmentRecord:
    """A reverse run's record (its source = our target) in the forward order: the word
    map transposed (columns of the reverse map now sum to 1) and the links flipped."""
    return word_record(record.index, record.tgt_words, record.src_words,
                       record.word_weights.T, flip_links(record.links),
                       {**record.meta, "direction": "reverse", **(meta or {})})


def symmetrized_records(forward: Sequence[AlignmentRecord], flipped: Sequence[AlignmentRecord],
                        heuristic: str, meta: dict, threshold: float = DEFAULT_AGREEMENT
                        ) -> list[AlignmentRecord]:
    """One record per sentence: `symmetrize` of the forward links and the flipped reverse
    links (both source, target) as a 0/1 link matrix, or for "agreement" the geometric
    mean of the two word maps and its links at >= `threshold`. Word counts must agree."""
    out = []
    for fwd, rev in zip(forward, flipped, strict=True):
        if (len(fwd.src_words), len(fwd.tgt_words)) != (len(rev.src_words), len(rev.tgt_words)):
            raise NMTError(f"sentence {fwd.index}: the two runs split it into different words "
                           f"({len(fwd.src_words)}x{len(fwd.tgt_words)} against "
                           f"{len(rev.src_words)}x{len(rev.tgt_words)}); check the inputs")
        S, T = len(fwd.src_words), len(fwd.tgt_words)
        if heuristic == AGREEMENT:
            matrix, links = agreement(fwd.word_weights, rev.word_weights, threshold)
            extra = {"threshold": threshold}
        else:
            links = symmetrize(fwd.links, rev.links, S, T, heuristic)
            matrix, extra = link_matrix(links, S, T), {}
        out.append(word_record(fwd.index, fwd.src_words, fwd.tgt_words, matrix, links,
                               {**meta, "symmetrize": heuristic, "direction": "both", **extra}))
    return out


def mean_records(record_sets: Sequence[Sequence[AlignmentRecord]], meta: dict,
                 flipped: bool = False) -> list[AlignmentRecord]:
    """An ensemble of runs of one direction: per sentence the mean of their word maps, with
    argmax links per target word, or per source word when the records are `flipped`
    reverse records (their columns are the distributions). Word counts must agree."""
    out = []
    for recs in zip(*record_sets, strict=True):
        shapes = {r.word_weights.shape for r in recs}
        if len(shapes) != 1:
            raise NMTError(f"sentence {recs[0].index}: the runs split it into different words "
                           f"({' / '.join(f'{s}x{t}' for t, s in sorted(shapes))}); an "
                           "ensemble needs runs that see the same words")
        matrix = np.mean([r.word_weights for r in recs], axis=0)
        links = (flip_links(links_from_matrix(matrix.T)) if flipped
                 else links_from_matrix(matrix))
        first = recs[0]
        out.append(word_record(first.index, first.src_words, first.tgt_words, matrix, links,
                               {**meta, "ensemble": len(recs),
                                "direction": "reverse" if flipped else "forward"}))
    return out
