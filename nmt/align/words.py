"""From subword attention to word alignments: which word each piece belongs to, one
reading of the raw (L, H, T+1, S) weights, the piece->word reduction and hard links.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nmt.core.errors import NMTError
from nmt.data.links import Link
from nmt.models.attention import supervised

WORD_START = "\u2581"  # SentencePiece's "▁", marks a piece that begins a new word


def pieces_to_words(pieces: Sequence[str]) -> list[int]:
    """Word index of each SentencePiece piece.

    A piece starting with "▁" starts a new word; the first piece is always word 0; a lone
    "▁" belongs to the word of the piece after it (at the very end, to the word before it).
    """
    word_of: list[int] = []
    word = -1
    joined = False  # previous piece was a lone "▁" that already opened the current word
    for n, piece in enumerate(pieces):
        lone, last = piece == WORD_START, n == len(pieces) - 1
        if n == 0 or (piece.startswith(WORD_START) and not joined and not (lone and last)):
            word += 1
        joined = lone and not last
        word_of.append(word)
    return word_of


def join_pieces(pieces: Sequence[str], word_of: Sequence[int]) -> list[str]:
    """Surface words from pieces and their word map (pieces with ``word_of < 0`` are skipped)."""
    n_words = max((w for w in word_of if w >= 0), default=-1) + 1
    parts: list[list[str]] = [[] for _ in range(n_words)]
    for piece, w in zip(pieces, word_of, strict=True):
        if w >= 0:
            parts[w].append(piece)
    return ["".join(p).replace(WORD_START, "") for p in parts]


def _grouping(word_of: Sequence, n_sub: int, axis: str) -> np.ndarray:
    """0/1 matrix (n_sub, n_words): piece k -> word word_of[k]; -1 pieces map nowhere. An
    entry may be a list: the piece belongs to each word listed (none: to no word), as gold
    words of another tokenisation are met (nmt.align.spans)."""
    if any(isinstance(w, (list, tuple)) for w in word_of):
        return _shared_grouping(word_of, n_sub, axis)
    ids = np.asarray(word_of, dtype=np.int64).reshape(-1)
    if ids.size != n_sub:
        raise ValueError(f"{axis} word map has {ids.size} entries but the matrix has {n_sub}")
    n_words = int(ids.max()) + 1 if ids.size and ids.max() >= 0 else 0
    if np.any(ids < -1) or len(np.unique(ids[ids >= 0])) != n_words:
        raise ValueError(f"{axis} word map must use -1 or word ids 0..n-1 with none skipped")
    group = np.zeros((n_sub, n_words))
    keep = ids >= 0
    group[np.nonzero(keep)[0], ids[keep]] = 1.0
    return group


def _shared_grouping(word_of: Sequence, n_sub: int, axis: str) -> np.ndarray:
    owners = [list(w) if isinstance(w, (list, tuple)) else ([] if w < 0 else [w])
              for w in word_of]
    if len(owners) != n_sub:
        raise ValueError(f"{axis} word map has {len(owners)} entries but the matrix has {n_sub}")
    n_words = max((max(o) for o in owners if o), default=-1) + 1
    group = np.zeros((n_sub, n_words))
    for k, words in enumerate(owners):
        group[k, words] = 1.0
    if not group.any(axis=0).all():
        raise ValueError(f"{axis} word map must use word ids 0..n-1 with none skipped")
    return group


def reduce_to_words(
    matrix: np.ndarray, tgt_word_of: Sequence[int], src_word_of: Sequence[int]
) -> np.ndarray:
    """Reduce a subword attention matrix (T_sub, S_sub) to words (T_word, S_word).

    ``tgt_word_of[t]`` / ``src_word_of[s]`` give each row's / column's word index, or -1 for
    a token that is not a word (EOS, BOS, padding) and is dropped. Rule:
    W[j, i] = sum_{s in word i} mean_{t in word j} A[t, s]  (average a target word's rows,
    sum the attention mass landing on a source word's pieces), then each row is renormalised,
    W[j] /= sum_i W[j, i], so rows stay stochastic over real words; an all-zero row stays zero.
    """
    a = np.asarray(matrix, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"attention matrix must be 2-D (T, S), got shape {a.shape}")
    rows = _grouping(tgt_word_of, a.shape[0], "target")  # (T_sub, T_word)
    cols = _grouping(src_word_of, a.shape[1], "source")  # (S_sub, S_word)
    counts = rows.sum(axis=0)
    words = (rows / np.where(counts > 0, counts, 1.0)).T @ a @ cols
    total = words.sum(axis=1, keepdims=True)
    return np.divide(words, total, out=np.zeros_like(words), where=total > 0)


def links_from_matrix(
    matrix: np.ndarray, method: str = "argmax", threshold: float = 0.0
) -> set[Link]:
    """Hard ``(source, target)`` links from an attention matrix (T, S).

    "argmax": for each target row j, link (argmax_i A[j, i], j); all-zero rows get no link.
    "threshold": every cell with A[j, i] >= threshold and A[j, i] > 0.
    """
    a = np.nan_to_num(np.asarray(matrix, dtype=np.float64))
    if a.ndim != 2:
        raise ValueError(f"attention matrix must be 2-D (T, S), got shape {a.shape}")
    if method == "argmax":
        if a.shape[1] == 0:
            return set()
        best = a.argmax(axis=1)
        return {(int(best[j]), j) for j in range(a.shape[0]) if a[j].any()}
    if method == "threshold":
        tgt, src = np.nonzero((a >= threshold) & (a > 0))
        return {(int(i), int(j)) for j, i in zip(tgt, src)}
    raise NMTError(f"unknown alignment method {method!r}; use 'argmax' or 'threshold'")


def reading(weights: np.ndarray, shifted: bool | None = None, layer: int | None = None,
            heads: int | None = None) -> np.ndarray:
    """One (T', S) map per target piece from raw (L, H, T+1, S) weights.

    Single-map families: the map without its EOS row, whatever `layer` and `heads` say (a
    guided recurrent run's reading carries guided.layer too). Multi-layer/head models: head
    average of `layer` (of its first `heads` heads when given: a guided run's supervised
    heads, nmt.align.guided), or by default the mean over every layer and head (chosen by
    measurement: docs/experiments/2026-11-30-choosing-the-defaults.md). Naive: row t is
    the step that predicts piece t; `shifted` (Chen et al. 2020): the step whose input is
    piece t.
    """
    L, H = weights.shape[:2]
    if L == 1 and H == 1 and not shifted:
        return weights[0, 0, :-1]
    if layer is None:
        mean = weights.mean((0, 1))  # (T+1, S)
    elif -L <= layer < L:
        mean = supervised(weights, layer, heads)
    else:
        raise NMTError(f"--layer {layer}: the model has {L} decoder layers (0..{L - 1})")
    return mean[1:] if shifted else mean[:-1]


def word_matrix(weights: np.ndarray, src_pieces: list[str], tgt_pieces: list[str],
                shifted: bool | None = None, layer: int | None = None,
                heads: int | None = None, null: bool = False,
                word_of: dict | None = None) -> np.ndarray:
    """Word-level (T_word, S_word) map of one reading; the EOS column is dropped, or with
    `null` kept as a last word (T_word, S_word + 1), the NULL word of a guided run. Words
    are the pieces' own ("▁" starts one), or `word_of`'s: {"src": ..., "tgt": ...}, each
    piece's list of the words it covers (nmt.align.spans)."""
    if word_of:
        src_word_of, tgt_word_of = list(word_of["src"]), list(word_of["tgt"])
        n_src = max((max(w) for w in src_word_of if w), default=-1) + 1
        src_word_of.append([n_src] if null else [])
    else:
        src_word_of, tgt_word_of = pieces_to_words(src_pieces), pieces_to_words(tgt_pieces)
        src_word_of += [max(src_word_of, default=-1) + 1 if null else -1]
    return reduce_to_words(reading(weights, shifted, layer, heads), tgt_word_of, src_word_of)


def record_matrix(rec, shifted: bool | None = None, layer: int | None = None,
                  heads: int | None = None) -> np.ndarray:
    """The word map of a saved `AlignmentRecord` under another reading: its pieces (EOS
    dropped) grouped into its words as when it was made."""
    return word_matrix(rec.weights, rec.src_tokens[:-1], rec.tgt_tokens[:-1], shifted, layer,
                       heads, word_of=rec.word_of)
