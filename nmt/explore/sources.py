"""Where the explorer's panels come from: record sets saved in the npz alignment format.

A *record set* is one npz file of `AlignmentRecord`s: `runs/<name>/align/<split>.npz`
(written by `nmt evaluate` and at the end of `nmt train`), or `<out>/<name>.npz` written by
`nmt align` (the same folder may hold more files, e.g. attribution matrices or symmetrised
links, each telling its method in the records' `meta`). Each set becomes one panel titled
by run and method. A set whose records carry links but no weights (meta `kind: links`, or an
all-zero `word_weights`) is a link-only set and is shown as a 0/1 matrix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmt.align.extract import DEFAULT_METHOD
from nmt.align.io import load_alignments
from nmt.align.records import AlignmentRecord
from nmt.core.errors import NMTError
from nmt.core.rundir import RunDir
from nmt.data.links import GoldAlignment, read_gold
from nmt.data.pin import gold_of
from nmt.models import MODELS
from nmt.models.opus import is_opus
from nmt.models.published import is_published, resolve
from nmt.models.runs import check_one_pair, load_config


@dataclass
class RecordSet:
    """One panel's records, by sentence index."""

    name: str  # the run (folder or file stem)
    method: str  # attention, or what meta["method"] says (saliency, grow-diag-final, eflomal...)
    path: Path
    records: dict[int, AlignmentRecord]
    links_only: bool = False

    @property
    def title(self) -> str:
        same = self.name == self.method.split(" (")[0]  # eflomal.npz of method eflomal
        return self.method if same else f"{self.name} · {self.method}"


@dataclass
class Sources:
    """Everything the explorer shows: the record sets, gold links by sentence, and notes."""

    sets: list[RecordSet]
    split: str | None
    gold: dict[int, GoldAlignment] = field(default_factory=dict)
    gold_path: Path | None = None
    notes: list[str] = field(default_factory=list)


def links_matrix(links: list[tuple[int, int]], shape: tuple[int, int]) -> np.ndarray:
    """0/1 matrix (T, S) with a 1 at (j, i) for every link (i, j) inside the shape."""
    m = np.zeros(shape, dtype=np.float32)
    for i, j in links:
        if 0 <= j < shape[0] and 0 <= i < shape[1]:
            m[j, i] = 1.0
    return m


def is_links_only(rec: AlignmentRecord) -> bool:
    """True for a record of hard links only: meta says so (kind: links), or its word matrix
    is empty or exactly the 0/1 matrix of its links (e.g. eflomal, symmetrised links)."""
    kind = str(rec.meta.get("kind", "")).lower()
    if kind == "links" or rec.meta.get("links_only"):
        return True
    shape = rec.word_weights.shape
    return bool(rec.links) and (not np.any(rec.word_weights) or np.array_equal(
        rec.word_weights, links_matrix(rec.links, shape)))


def load_set(path: Path, name: str | None = None) -> RecordSet:
    """One npz file as a record set; the title's run is `name` or the file's stem."""
    records = load_alignments(path)
    if not records:
        raise NMTError(f"{path}: holds no sentences; re-run the export")
    meta = records[0].meta
    method = str(meta.get("method") or DEFAULT_METHOD)
    stem = path.stem
    if stem.endswith("." + method):  # e.g. bahdanau.saliency.npz
        stem = stem[: -len(method) - 1]
    if meta.get("symmetrize"):
        method = f"{method} ({meta['symmetrize']})"
    return RecordSet(name=name or stem, method=method, path=path,
                     records={rec.index: rec for rec in records},
                     links_only=all(is_links_only(rec) for rec in records))


def _run_sets(run: Path, split: str | None, sources: Sources) -> list[RecordSet]:
    """The record set of a run directory's `align/<split>.npz` (none without attention)."""

    cfg = load_config(run)
    split = split or sources.split or cfg.data.test
    sources.split = sources.split or split
    npz = RunDir(run).align / f"{split}.npz"
    if not npz.is_file():
        if not MODELS[cfg.model.family].has_attention:
            sources.notes.append(f"{run.name}: {cfg.model.family} has no attention; left out "
                                 "(align it with `nmt align --method saliency`)")
            return []
        folder = resolve(run)
        if is_published(folder) or is_opus(folder):  # never written
            kind, first = ("an OPUS-MT", "--run runs/NAME ") if is_opus(folder) else ("a published", "")
            raise NMTError(f"{run}: {kind} model holds no alignments; write them with "
                           f"`nmt align {first}--run {run} --split {split} --out DIR` and pass "
                           "--align-dir DIR")
        raise NMTError(f"{npz}: no alignments of split {split!r}; write them with "
                       f"`nmt evaluate --run {run} --split {split}`")
    if sources.gold_path is None:
        sources.gold_path = gold_of(cfg, split)
    return [load_set(npz, run.name)]


def _dir_sets(folder: Path) -> list[RecordSet]:
    """Every npz file of an `nmt align` output folder, one set each."""
    files = sorted(folder.glob("*.npz"))
    if not files:
        raise NMTError(f"{folder}: no .npz alignment files; write them with `nmt align --out "
                       f"{folder}`")
    return [load_set(path) for path in files]


def find_sources(runs: list[Path], split: str | None = None, align_dirs: list[Path] = (),
                 gold: Path | None = None, one_based: bool = False) -> Sources:
    """Record sets of run directories, npz files and `nmt align` folders, plus gold links.

    Gold: `gold` if given, else the corpus's `<split>.gold` of the first run directory.
    """
    if not runs and not align_dirs:
        raise NMTError("nothing to explore: give run directories or --align-dir folders, "
                       "e.g. nmt explore runs/demo/* --out explore.html")
    sources = Sources(sets=[], split=split)
    kinds = [(path, "npz" if path.is_file() and path.suffix == ".npz" else "dir" if (
        path.is_dir() and not (path / "config.yaml").is_file() and any(path.glob("*.npz")))
        else "run") for path in map(Path, runs)]
    check_one_pair([(str(p), load_config(p)) for p, kind in kinds if kind == "run"],
                   "the explorer shows every run on the first one's sentences: give runs of "
                   "one corpus and pair", corpus=True)
    for path, kind in kinds:
        if kind == "npz":
            sources.sets.append(load_set(path))
        elif kind == "dir":
            sources.sets += _dir_sets(path)
        else:
            sources.sets += _run_sets(path, split, sources)
    for folder in map(Path, align_dirs):
        if not folder.is_dir():
            raise NMTError(f"--align-dir {folder}: not a folder; pass an `nmt align --out` folder")
        sources.sets += _dir_sets(folder)
    if not sources.sets:
        raise NMTError("nothing to explore: none of the runs has alignments (fixed_context "
                       "only?); pass runs with attention or --align-dir folders")
    _unique_titles(sources.sets)
    sources.gold_path = gold or sources.gold_path
    if sources.gold_path is not None:
        sources.gold = _gold_by_index(sources, one_based if gold else False)
    return sources


def _unique_titles(sets: list[RecordSet]) -> None:
    """Two panels with one title (same run name in two places) get their folder prepended."""
    titles = [s.title for s in sets]
    for s in sets:
        if titles.count(s.title) > 1:
            s.name = f"{s.path.parent.name}/{s.name}"


def _gold_by_index(sources: Sources, one_based: bool) -> dict[int, GoldAlignment]:
    """Gold line k belongs to sentence index k; every link must fit its sentence's words."""
    path = sources.gold_path
    lines = read_gold(path, one_based)
    out: dict[int, GoldAlignment] = {}
    for index, (src_words, tgt_words) in sentence_words(sources.sets).items():
        if index >= len(lines):
            raise NMTError(f"{path}: {len(lines)} lines, but the alignments hold sentence "
                           f"{index}; pass the gold file of the aligned sentences")
        for i, j in sorted(lines[index].possible):
            if i >= len(src_words) or j >= len(tgt_words):
                hint = "" if one_based else " (1-based file? add --one-based)"
                raise NMTError(f"{path}:{index + 1}: link {i}-{j} is outside sentence {index} "
                               f"({len(src_words)} source, {len(tgt_words)} target words){hint}")
        out[index] = lines[index]
    return out


def sentence_words(sets: list[RecordSet]) -> dict[int, tuple[list[str], list[str]]]:
    """Source and target words of every sentence index, from the first set that has it."""
    words: dict[int, tuple[list[str], list[str]]] = {}
    for s in sets:
        for index, rec in s.records.items():
            words.setdefault(index, (rec.src_words, rec.tgt_words))
    return dict(sorted(words.items()))
