"""Word alignments from attention: gold files, AER, subword->word reduction, hard links, export.

Conventions used throughout: a link is ``(i, j)`` with ``i`` the source index and ``j`` the
target index, both 0-based; an attention matrix has shape ``(T, S)`` = (target, source), so
row ``j`` is the distribution of target position ``j`` over the source positions. Pure numpy.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nmt.errors import NMTError

Link = tuple[int, int]
WORD_START = "\u2581"  # SentencePiece's "▁", marks a piece that begins a new word

# "i-j" (sure), "i-j-S" / "i-j-P" (sure / possible), "ipj" or "i?j" (possible, talp style)
_LINK_RE = re.compile(r"^(\d+)(?:-(\d+)(?:-([SsPp]))?|[p?](\d+))$")


@dataclass(frozen=True)
class GoldAlignment:
    """Gold links of one sentence pair; ``possible`` always contains ``sure`` (S ⊆ P)."""

    sure: frozenset[Link]
    possible: frozenset[Link]

    def __post_init__(self) -> None:
        if not self.sure <= self.possible:
            raise ValueError("GoldAlignment: every sure link must also be possible (S ⊆ P)")


# ---------------------------------------------------------------- gold files and Pharaoh text


def _parse_link(token: str) -> tuple[int, int, bool]:
    m = _LINK_RE.match(token)  # -> (i, j, is_sure); ValueError if malformed
    if m is None:
        raise ValueError(token)
    if m.group(4) is not None:
        return int(m.group(1)), int(m.group(4)), False
    return int(m.group(1)), int(m.group(2)), m.group(3) not in ("P", "p")


def read_gold(path: Path, one_based: bool = False) -> list[GoldAlignment]:
    """Read a gold alignment file, one line per sentence pair, links separated by spaces.

    Accepted links: Pharaoh ``i-j`` (sure), talp ``ipj`` / ``i?j`` (possible) and
    ``i-j-S`` / ``i-j-P``. An empty line is a sentence with no links. With ``one_based``
    every index is shifted down by 1.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise NMTError(f"{path}: gold alignment file not found; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NMTError(f"{path}: cannot read gold alignments ({exc}); need a UTF-8 text file")
    shift = 1 if one_based else 0
    gold: list[GoldAlignment] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        sure: set[Link] = set()
        possible: set[Link] = set()
        for token in line.split():
            try:
                i, j, is_sure = _parse_link(token)
            except ValueError:
                raise NMTError(
                    f"{path}:{lineno}: malformed link {token!r}; expected 'i-j' (sure), "
                    "'ipj' (possible) or 'i-j-S'/'i-j-P'"
                ) from None
            i, j = i - shift, j - shift
            if i < 0 or j < 0:
                raise NMTError(
                    f"{path}:{lineno}: link {token!r} has index 0 but the file was read as "
                    "1-based; drop --one-based if the file is 0-based"
                )
            (sure if is_sure else possible).add((i, j))
        gold.append(GoldAlignment(frozenset(sure), frozenset(possible | sure)))
    return gold


def check_links_in_range(
    gold: Sequence[GoldAlignment],
    src_lens: Sequence[int],
    tgt_lens: Sequence[int],
    path: Path,
) -> None:
    """Raise NMTError if the gold file has the wrong number of lines or a link leaves its
    sentence (needs ``0 <= i < src_len`` and ``0 <= j < tgt_len``; lengths in words)."""
    if len(src_lens) != len(tgt_lens):
        raise ValueError(f"{len(src_lens)} source lengths but {len(tgt_lens)} target lengths")
    if len(gold) != len(src_lens):
        raise NMTError(
            f"{path}: gold file has {len(gold)} lines but the test set has {len(src_lens)} "
            "sentences; it needs exactly one line per sentence pair"
        )
    for lineno, (g, s_len, t_len) in enumerate(zip(gold, src_lens, tgt_lens), start=1):
        for i, j in sorted(g.possible):
            if i >= s_len or j >= t_len:
                edge = i == s_len or j == t_len
                hint = "; is the file 1-based (then add --one-based)?" if edge else ""
                raise NMTError(
                    f"{path}:{lineno}: link {i}-{j} (0-based) is outside the sentence pair with "
                    f"{s_len} source and {t_len} target words{hint}"
                )


def format_pharaoh(links: Iterable[Link]) -> str:
    """Format links as sorted, space-separated Pharaoh ``i-j`` (source-target) text."""
    return " ".join(f"{i}-{j}" for i, j in sorted(set(links)))


def parse_pharaoh(line: str) -> set[Link]:
    """Parse one line of ``i-j`` links (0-based) into a set of ``(i, j)``; NMTError if malformed."""
    links: set[Link] = set()
    for token in line.split():
        try:
            i, j, _ = _parse_link(token)
        except ValueError:
            msg = f"malformed Pharaoh link {token!r} in {line.strip()!r}; use 'i-j'"
            raise NMTError(msg) from None
        links.add((i, j))
    return links


# ------------------------------------------------------------------------------------ scoring


def alignment_error_rate(
    predicted: Sequence[set[Link]], gold: Sequence[GoldAlignment]
) -> dict[str, float | int]:
    """Corpus-level precision, recall and AER (Och & Ney 2003), counts summed over sentences.

    precision = |A∩P| / |A|,  recall = |A∩S| / |S|,
    AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|).
    Zero denominators: precision = 0.0 if |A| = 0, recall = 0.0 if |S| = 0, and
    AER = 0.0 if |A| + |S| = 0 (nothing to predict and nothing predicted).
    """
    if len(predicted) != len(gold):
        raise NMTError(
            f"{len(predicted)} predicted alignments but {len(gold)} gold lines; "
            "align every sentence of the gold test set"
        )
    n_a = n_s = n_p = n_as = n_ap = 0
    for pred, g in zip(predicted, gold):
        a = set(pred)
        n_a += len(a)
        n_s += len(g.sure)
        n_p += len(g.possible)
        n_as += len(a & g.sure)
        n_ap += len(a & g.possible)
    return {
        "precision": n_ap / n_a if n_a else 0.0,
        "recall": n_as / n_s if n_s else 0.0,
        "aer": 1.0 - (n_as + n_ap) / (n_a + n_s) if n_a + n_s else 0.0,
        "sentences": len(gold),
        "predicted": n_a,
        "sure": n_s,
        "possible": n_p,
        "predicted_and_sure": n_as,
        "predicted_and_possible": n_ap,
    }


# ------------------------------------------------------------------ subword -> word reduction


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


def _grouping(word_of: Sequence[int], n_sub: int, axis: str) -> np.ndarray:
    """0/1 matrix (n_sub, n_words): piece k -> word word_of[k]; -1 pieces map nowhere."""
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


# -------------------------------------------------------------------------------- hard links


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


def intersect_links(a: Iterable[Link], b_reversed: Iterable[Link]) -> set[Link]:
    """Bidirectional intersection A ∩ B; the reverse-direction model's links ``b_reversed``
    must already be flipped into ``(source, target)`` order of the forward direction."""
    return set(a) & set(b_reversed)


# ------------------------------------------------------------------------------- diagnostics


def attention_entropy(matrix: np.ndarray) -> float:
    """Mean row entropy in nats, H_j = -sum_i p_ji log p_ji over nonzero p (each row is first
    renormalised to sum to 1); all-zero rows are skipped; 0.0 if there are no rows."""
    a = np.clip(np.nan_to_num(np.asarray(matrix, dtype=np.float64)), 0.0, None)
    if a.ndim != 2:
        raise ValueError(f"attention matrix must be 2-D (T, S), got shape {a.shape}")
    total = a.sum(axis=1)
    a = a[total > 0] / total[total > 0, None]
    if a.shape[0] == 0:
        return 0.0
    logs = np.log(a, out=np.zeros_like(a), where=a > 0)
    return float(np.mean(-(a * logs).sum(axis=1)))


def mass_on(matrix: np.ndarray, columns: Sequence[int]) -> float:
    """Mean over target rows of the attention mass on ``columns``: mean_j sum_{i in C} A[j, i]
    (e.g. columns=[-1] for the EOS column); 0.0 for a matrix without rows."""
    a = np.asarray(matrix, dtype=np.float64)
    if a.shape[0] == 0:
        return 0.0
    bad = [c for c in columns if not -a.shape[1] <= c < a.shape[1]]
    if bad:
        raise ValueError(f"columns {bad} out of range for a matrix with {a.shape[1]} columns")
    cols = sorted({c % a.shape[1] for c in columns})
    return float(a[:, cols].sum(axis=1).mean())


def diagonal_links(src_len: int, tgt_len: int) -> set[Link]:
    """Diagonal baseline: target j is linked to source round(j * (S-1) / max(T-1, 1))."""
    if src_len <= 0 or tgt_len <= 0:
        return set()
    scale = (src_len - 1) / max(tgt_len - 1, 1)
    return {(min(math.floor(j * scale + 0.5), src_len - 1), j) for j in range(tgt_len)}


# ------------------------------------------------------------------------------------ export


@dataclass(eq=False)
class AlignmentRecord:
    """Attention of one sentence pair. ``weights`` (L, H, T, S) float32 has one row per entry of
    ``tgt_tokens`` and one column per entry of ``src_tokens`` (EOS included if it has a column);
    ``word_weights`` (T_word, S_word) matches ``tgt_words`` x ``src_words``; ``links`` are
    word-level (source, target) pairs; RNN families use L = H = 1."""

    index: int
    src_tokens: list[str]
    tgt_tokens: list[str]
    weights: np.ndarray
    src_words: list[str]
    tgt_words: list[str]
    word_weights: np.ndarray
    links: list[Link] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.weights = np.asarray(self.weights, dtype=np.float32)
        self.word_weights = np.asarray(self.word_weights, dtype=np.float32)
        self.links = [(int(i), int(j)) for i, j in self.links]
        shape = (len(self.tgt_tokens), len(self.src_tokens))
        if self.weights.ndim != 4 or self.weights.shape[2:] != shape:
            raise ValueError(f"record {self.index}: weights {self.weights.shape} != (L, H, T, S)")
        if self.word_weights.shape != (len(self.tgt_words), len(self.src_words)):
            raise ValueError(f"record {self.index}: word_weights shape {self.word_weights.shape} "
                             f"!= ({len(self.tgt_words)}, {len(self.src_words)})")


_FORMAT = "nmt-alignments-v1"
_TEXT_FIELDS = ("index", "src_tokens", "tgt_tokens", "src_words", "tgt_words", "links", "meta")


def save_alignments(path_npz: Path, records: Sequence[AlignmentRecord]) -> None:
    """Write records to ``path_npz`` (np.savez_compressed, no pickle: arrays ``weights_<n>``,
    ``word_weights_<n>`` and one JSON string per record in ``records``) and a readable index
    to ``path_npz.with_suffix('.json')``."""
    path_npz = Path(path_npz)
    if path_npz.suffix != ".npz":
        raise NMTError(f"{path_npz}: alignment export must end in .npz; rename the output path")
    arrays: dict[str, np.ndarray] = {"format": np.array(_FORMAT)}
    texts, index = [], []
    for n, rec in enumerate(records):
        arrays[f"weights_{n}"] = rec.weights
        arrays[f"word_weights_{n}"] = rec.word_weights
        fields = {name: getattr(rec, name) for name in _TEXT_FIELDS}
        try:
            texts.append(json.dumps(fields, ensure_ascii=False))
        except TypeError as exc:
            raise ValueError(f"record {rec.index}: meta is not JSON-serialisable ({exc})") from None
        index.append({
            **{k: v for k, v in fields.items() if k != "links"},
            "weights_shape": list(rec.weights.shape),
            "word_weights_shape": list(rec.word_weights.shape),
            "links": format_pharaoh(rec.links),
            "entropy": attention_entropy(rec.word_weights),
        })
    arrays["records"] = np.array(texts, dtype=np.str_)
    path_npz.parent.mkdir(parents=True, exist_ok=True)
    with open(path_npz, "wb") as fh:  # a file handle stops numpy from renaming the path
        np.savez_compressed(fh, **arrays)
    index_doc = {"format": _FORMAT, "arrays": path_npz.name, "records": index}
    path_npz.with_suffix(".json").write_text(
        json.dumps(index_doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )


def load_alignments(path_npz: Path) -> list[AlignmentRecord]:
    """Read records written by :func:`save_alignments` (with ``allow_pickle=False``)."""
    path_npz = Path(path_npz)
    try:
        with np.load(path_npz, allow_pickle=False) as data:
            if "format" not in data.files or str(data["format"]) != _FORMAT:
                raise NMTError(f"{path_npz}: not an nmt alignment export; re-run the export")
            out = []
            for n, text in enumerate(data["records"]):
                fields = json.loads(str(text))
                fields["links"] = [tuple(link) for link in fields["links"]]
                out.append(AlignmentRecord(
                    weights=data[f"weights_{n}"], word_weights=data[f"word_weights_{n}"], **fields
                ))
            return out
    except FileNotFoundError:
        raise NMTError(f"{path_npz}: alignment file not found; run the export first") from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise NMTError(f"{path_npz}: cannot read alignment export ({exc}); re-run the export")
