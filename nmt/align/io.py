"""Alignment files: gold (Pharaoh / talp), Pharaoh links, and the npz export of records.

A link is ``(i, j)``: source index ``i``, target index ``j``, both 0-based (files may be
1-based: ``one_based``).
"""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nmt.align.metrics import attention_entropy
from nmt.config import Config
from nmt.data.corpora import corpus_dir
from nmt.errors import NMTError

Link = tuple[int, int]


_LINK_RE = re.compile(r"^(\d+)(?:-(\d+)(?:-([SsPp]))?|[p?](\d+))$")


@dataclass(frozen=True)
class GoldAlignment:
    """Gold links of one sentence pair; ``possible`` always contains ``sure`` (S ⊆ P)."""

    sure: frozenset[Link]
    possible: frozenset[Link]

    def __post_init__(self) -> None:
        if not self.sure <= self.possible:
            raise ValueError("GoldAlignment: every sure link must also be possible (S ⊆ P)")


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


def load_gold(path: Path, records: Sequence[AlignmentRecord], one_based: bool = False,
              prefix: bool = False) -> list[GoldAlignment]:
    """Gold links for `records`, checked to lie inside each sentence pair's words. With
    `prefix` (a --limit aligned only the first sentences) the file may have more lines."""
    gold = read_gold(path, one_based)
    gold = gold[:len(records)] if prefix else gold
    check_links_in_range(gold, [len(r.src_words) for r in records],
                         [len(r.tgt_words) for r in records], path)
    return gold


def corpus_gold(cfg: Config, split: str) -> Path | None:
    """The corpus's own gold alignments for `split` (`<split>.gold`), if it has them."""
    path = corpus_dir(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair) / f"{split}.gold"
    return path if path.is_file() else None


def write_links(path: Path, records: Sequence[AlignmentRecord]) -> None:
    """One Pharaoh line of word links per record."""
    path.write_text("".join(format_pharaoh(r.links) + "\n" for r in records), encoding="utf-8")


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


def read_pairs(path: Path) -> tuple[list[str], list[str]]:
    """`source ||| target` lines; errors name the file and line."""
    from nmt.data.corpora import read_lines

    sources, targets = [], []
    for number, line in enumerate(read_lines(path), 1):
        if line.count("|||") != 1:
            raise NMTError(f"{path}:{number}: expected 'source ||| target'")
        src, tgt = (part.strip() for part in line.split("|||"))
        sources.append(src)
        targets.append(tgt)
    if not sources:
        raise NMTError(f"{path}: no sentence pairs")
    return sources, targets
