"""Alignment records in files: the npz export with its readable index, Pharaoh link files
of records, and the gold of a record set."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from nmt.align.metrics import attention_entropy
from nmt.align.records import AlignmentRecord
from nmt.core.errors import NMTError
from nmt.core.rundir import replace_text
from nmt.core.scratch import replace_file
from nmt.data.links import GoldAlignment, check_links_in_range, format_pharaoh, read_gold


def load_gold(path: Path, records: Sequence[AlignmentRecord], one_based: bool = False,
              prefix: bool = False) -> list[GoldAlignment]:
    """Gold links for `records`, checked to lie inside each sentence pair's words. With
    `prefix` (a --limit aligned only the first sentences) the file may have more lines."""
    gold = read_gold(path, one_based)
    gold = gold[:len(records)] if prefix else gold
    check_links_in_range(gold, [len(r.src_words) for r in records],
                         [len(r.tgt_words) for r in records], path)
    return gold


def write_links(path: Path, records: Sequence[AlignmentRecord]) -> None:
    """One Pharaoh line of word links per record."""
    replace_text(path, "".join(format_pharaoh(r.links) + "\n" for r in records))


_FORMAT = "nmt-alignments-v1"
_TEXT_FIELDS = ("index", "src_tokens", "tgt_tokens", "src_words", "tgt_words", "links", "meta",
                "word_of")


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
            **{k: v for k, v in fields.items() if k not in ("links", "word_of")},
            "weights_shape": list(rec.weights.shape),
            "word_weights_shape": list(rec.word_weights.shape),
            "links": format_pharaoh(rec.links),
            "entropy": attention_entropy(rec.word_weights),
        })
    arrays["records"] = np.array(texts, dtype=np.str_)
    path_npz.parent.mkdir(parents=True, exist_ok=True)
    # a file handle stops numpy from renaming the path
    replace_file(path_npz, lambda handle: np.savez_compressed(handle, **arrays))
    index_doc = {"format": _FORMAT, "arrays": path_npz.name, "records": index}
    replace_text(path_npz.with_suffix(".json"),
                 json.dumps(index_doc, ensure_ascii=False, indent=1) + "\n")


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


