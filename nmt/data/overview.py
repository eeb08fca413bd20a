"""What the data root holds: `nmt data list` (every corpus folder, read from its manifest)
and `nmt data show` (one corpus's sizes, filter counts and sentence-length histograms).

Read-only: nothing here writes into a corpus folder. Split files are streamed one pair of
lines at a time and lengths are counted into fixed-size histograms, so memory does not
grow with the corpus ([data](../../docs/data.md#seeing-a-corpus)).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path

import numpy as np

from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.progress import counting, tick
from nmt.data.caches import leftovers
from nmt.data.corpora import corpus_dir, iter_lines

FIRST_SPLITS = ("train", "val", "test")  # listed first, the others after them by name
MAX_WORDS = 1024  # a longer sentence is counted in the last bin (totals and max stay exact)
JOINT_WORDS = 200  # side of the source-against-target histogram; longer in the last bin
CHUNK = 65536  # lengths gathered before each bincount


@dataclass(frozen=True)
class Manifest:
    """A corpus's manifest.json, old schema (source "dir:/path" | "hub:id") or new
    (source {"kind", "id", ...}, "filters", per-split "origin"), read into one shape."""

    pair: str
    created: str
    source: str  # one line: kind and id or paths
    seed: int | None
    lines: dict[str, int]  # split -> pairs
    origins: dict[str, str]  # split -> source | drawn (new schema only)
    filters: dict[str, tuple[str, int]]  # filter -> (setting, pairs dropped)


@dataclass
class CorpusFolder:
    name: str
    pair: str
    path: Path
    lines: dict[str, int]  # split -> pairs, from the manifest or counted in the files
    manifest: Manifest | None = None
    problem: str = ""  # why there is no readable manifest ("" when there is one)


def read_manifest(path: Path) -> Manifest:
    """Read and check a manifest; anything unreadable or of another shape is one line
    naming the file."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise NMTError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}, column {exc.colno}); "
                       "re-import the corpus") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise NMTError(f"{path}: cannot read ({exc}); re-import the corpus") from None
    try:
        return _parse(raw, path.parent.name)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise NMTError(f"{path}: not a corpus manifest ({exc}); re-import the corpus") from None


def _parse(raw: dict, folder: str) -> Manifest:
    _need(isinstance(raw, dict), "a JSON object")
    pair, created = raw.get("pair", folder), raw.get("created", "")
    _need(isinstance(pair, str) and isinstance(created, str), "'pair' and 'created' are text")
    _need(pair == folder, f"'pair' is {pair!r} but the folder is {folder!r}")
    splits = raw.get("splits", {})
    _need(isinstance(splits, dict), "'splits' is an object")
    for name, entry in splits.items():
        _need(isinstance(entry, dict) and _count(entry.get("lines")),
              f"splits.{name}.lines is a count")
    filters = raw.get("filters", {})
    _need(isinstance(filters, dict), "'filters' is an object")
    settings = {name: (_setting(entry, name), entry["dropped"]) for name, entry in filters.items()}
    if not filters:  # the old schema: empty training pairs dropped, counted per split
        dropped = sum(entry.get("dropped_empty", 0) for entry in splits.values())
        if any("dropped_empty" in entry for entry in splits.values()):
            settings = {"empty": ("on", dropped)}
    seed = raw.get("seed")
    _need(seed is None or _count(seed), "'seed' is a whole number")
    return Manifest(pair, created, _source(raw["source"]), seed,
                    {name: entry["lines"] for name, entry in splits.items()},
                    {name: entry["origin"] for name, entry in splits.items() if "origin" in entry},
                    settings)


def _need(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(f"expected: {what}")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _setting(entry: object, name: str) -> str:
    """A filter's setting as shown: on, off or its value (0 or false: off)."""
    _need(isinstance(entry, dict) and _count(entry.get("dropped")),
          f"filters.{name}.dropped is a count")
    value = entry["value"] if "value" in entry else entry.get("on", True)
    _need(isinstance(value, (int, float)), f"filters.{name} has 'on' or a numeric 'value'")
    return "off" if not value else "on" if value is True else f"{value:g}"


def _source(source: object) -> str:
    """One line for where the corpus came from: old "dir:/path", "hub:id", "synth:seed=N",
    or the new {"kind", "id" | "path" | "files": {path: sha256}, "config", "revision",
    "seed", "columns"}."""
    if isinstance(source, str):
        kind, sep, rest = source.partition(":")
        return f"{ {'hub': 'hf'}.get(kind, kind)} {rest}" if sep and kind.isalpha() else source
    _need(isinstance(source, dict) and isinstance(source.get("kind"), str),
          "'source' has a 'kind'")
    where = source.get("id") or source.get("path")
    if not where and isinstance(source.get("files"), dict) and source["files"]:
        paths = list(source["files"])
        where = (f"{os.path.commonpath(paths)} ({len(paths)} files)" if len(paths) > 2
                 else " ".join(paths))
    parts = [source["kind"], str(where or "")]
    for key in ("config", "revision", "seed"):
        if source.get(key) is not None:
            parts.append(f"{key} {source[key]}")
    if isinstance(source.get("columns"), list):
        parts.append(f"columns {','.join(map(str, source['columns']))}")
    return " ".join(p for p in parts if p)


def split_names(directory: Path, src: str, tgt: str) -> list[str]:
    """Splits with both `{split}.{src}` and `{split}.{tgt}` files in `directory`."""
    return ordered(p.name[: -len(src) - 1] for p in directory.glob(f"*.{src}")
                   if (directory / f"{p.name[: -len(src) - 1]}.{tgt}").is_file())


def ordered(splits: Iterable[str]) -> list[str]:
    """Split names with train, val and test first, the others after them by name."""
    return sorted(splits, key=lambda s: (FIRST_SPLITS.index(s) if s in FIRST_SPLITS
                                         else len(FIRST_SPLITS), s))


def missing_test_note(cfg: Config, trained: bool) -> str | None:
    """The line `nmt train` prints when data.test is not a split of the corpus (None when it
    is, or when the corpus is not there yet: training says so itself). Before training
    (`trained` False) it warns; after, it replaces the test evaluation, which would fail
    after a finished training: the run is kept and the line says how to evaluate it."""
    data = cfg.data
    directory = corpus_dir(Path(data.root), data.corpus, data.pair)
    have = split_names(directory, cfg.src_lang, cfg.tgt_lang)
    if data.test in have or data.train not in have:
        return None
    other = next((s for s in have if s.startswith("test")), None)
    what = f"the test split '{data.test}' is not in {directory} (it has: {', '.join(have)})"
    if not trained:
        return (f"note: {what}; training goes on, without the test evaluation at the end"
                + (f" (--set data.test={other} evaluates {other})" if other else ""))
    fix = (f"evaluate it with `nmt evaluate --run {cfg.run_dir} --split {other}`, or train "
           f"with --set data.test={other}" if other else
           f"import a test split (`nmt data import ... --test-size N`) and run `nmt evaluate "
           f"--run {cfg.run_dir} --split test`")
    return f"{what}: not evaluated; the run is kept in {cfg.run_dir}; {fix}"


def _count_lines(path: Path) -> int:
    """Lines of a file, read in 1 MiB blocks (never the whole file)."""
    count, last = 0, b"\n"
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            count, last = count + block.count(b"\n"), block[-1:]
    return count + (last != b"\n")


def _folder(name: str, pair: Path) -> CorpusFolder | None:
    langs = pair.name.split("-")
    if len(langs) != 2 or pair.name.startswith(".") or ".tmp" in pair.name:
        return None  # not a pair, or an import's temporary folder
    splits = split_names(pair, *langs)
    manifest_path = pair / "manifest.json"
    if not manifest_path.is_file() and not splits:
        return None
    folder = CorpusFolder(name, pair.name, pair, {}, problem="no manifest")
    if manifest_path.is_file():
        try:
            folder.manifest, folder.problem = read_manifest(manifest_path), ""
        except NMTError as exc:
            folder.problem = str(exc)
    counted = folder.manifest.lines if folder.manifest else {}
    folder.lines = counted or {s: _count_lines(pair / f"{s}.{langs[0]}") for s in splits}
    return folder


def find_corpora(root: Path) -> list[CorpusFolder]:
    """Every `NAME/PAIR/` folder under `root` holding a manifest or split files."""
    if not root.is_dir():
        raise NMTError(f"{root}: no such folder; pass the data root with --root")
    found = []
    for corpus in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for pair in sorted(p for p in corpus.iterdir()
                           if p.is_dir() and not p.name.startswith(".")):  # scratch
            if (folder := _folder(corpus.name, pair)) is not None:
                found.append(folder)
    return found


def _splits_text(lines: dict[str, int]) -> str:
    return ", ".join(f"{split} {lines[split]:,}" for split in ordered(lines)) or "no splits"


def list_corpora(root: Path) -> Iterator[str]:
    """`nmt data list`: one line per corpus folder; a folder without a readable manifest
    is listed with its split files counted, and says why. What killed commands left is
    swept first (a corpus a killed swap left aside is put back); a live one's is named."""
    live = leftovers(root) if root.is_dir() else []
    folders = find_corpora(root)
    if not folders:
        yield f"no corpora under {root}; import one with `nmt data import NAME --pair SRC-TGT ...`"
        yield from live
        return
    rows = [(f.name, f.pair, _splits_text(f.lines),
             f.manifest.source if f.manifest else f"[{f.problem}]",
             f.manifest.created if f.manifest else "") for f in folders]
    rows.insert(0, ("corpus", "pair", "splits (pairs)", "source", "created"))
    widths = [max(len(row[i]) for row in rows if not row[3].startswith("[")) for i in range(4)]
    for row in rows:
        yield "  ".join(cell.ljust(w) for cell, w in zip(row, [*widths, 0])).rstrip()
    yield from live


@dataclass
class SideStats:
    """One side of a split: totals and a histogram of words per sentence."""

    words: int = 0
    chars: int = 0
    longest: int = 0
    counts: np.ndarray = field(default_factory=lambda: np.zeros(MAX_WORDS + 1, np.int64))

    def add(self, lengths: list[int]) -> None:
        a = np.asarray(lengths, dtype=np.int64)
        self.words += int(a.sum())
        self.longest = max(self.longest, int(a.max(initial=0)))
        self.counts += np.bincount(np.minimum(a, MAX_WORDS), minlength=MAX_WORDS + 1)

    def summary(self, pairs: int) -> tuple[float, float, int]:
        """Mean, median and max words per sentence."""
        if not pairs:
            return 0.0, 0.0, 0
        cumulative = np.cumsum(self.counts)
        low, high = np.searchsorted(cumulative, [(pairs - 1) // 2 + 1, pairs // 2 + 1])
        return self.words / pairs, (low + high) / 2, self.longest


@dataclass
class SplitStats:
    pairs: int
    src: SideStats
    tgt: SideStats
    joint: np.ndarray | None  # (source, target) words, capped at JOINT_WORDS; train only


def split_stats(src_path: Path, tgt_path: Path, joint: bool = False,
                expected: int = 0) -> SplitStats:
    """Stream two line-aligned split files; sides of different lengths name both files."""
    src, tgt = SideStats(), SideStats()
    grid = np.zeros((JOINT_WORDS + 1) ** 2, np.int64) if joint else None
    pairs, lengths = 0, ([], [])
    with open(src_path, "rb") as s_handle, open(tgt_path, "rb") as t_handle, \
            counting(expected, f"reading {src_path.stem}"):
        for s, t in zip_longest(iter_lines(s_handle, src_path), iter_lines(t_handle, tgt_path)):
            if s is None or t is None:
                short, long_ = (src_path, tgt_path) if s is None else (tgt_path, src_path)
                raise NMTError(f"{short} ends at line {pairs:,} but {long_} goes on; a split "
                               "needs one line per pair on each side: re-import the corpus")
            pairs += 1
            src.chars, tgt.chars = src.chars + len(s), tgt.chars + len(t)
            lengths[0].append(len(s.split()))
            lengths[1].append(len(t.split()))
            if len(lengths[0]) == CHUNK:
                _flush(src, tgt, grid, lengths)
        _flush(src, tgt, grid, lengths)
    return SplitStats(pairs, src, tgt, None if grid is None else
                      grid.reshape(JOINT_WORDS + 1, JOINT_WORDS + 1))


def _flush(src: SideStats, tgt: SideStats, grid: np.ndarray | None,
           lengths: tuple[list[int], list[int]]) -> None:
    if not lengths[0]:
        return
    src.add(lengths[0])
    tgt.add(lengths[1])
    if grid is not None:
        s, t = (np.minimum(np.asarray(side), JOINT_WORDS) for side in lengths)
        grid += np.bincount(s * (JOINT_WORDS + 1) + t, minlength=grid.size)
    tick(len(lengths[0]))
    lengths[0].clear()
    lengths[1].clear()


def _choose_pair(root: Path, name: str, pair: str | None) -> tuple[Path, str]:
    """The folder `nmt data show NAME [--pair P]` reads, and the pair it reads it as."""
    pairs = sorted(f.pair for f in find_corpora(root) if f.name == name)
    if not pairs:
        raise NMTError(f"{root / name}: no corpus '{name}' under {root}; `nmt data list "
                       f"--root {root}` shows those there are")
    if pair is None:
        if len(pairs) > 1:
            raise NMTError(f"{root / name} holds {', '.join(pairs)}; choose one with --pair")
        pair = pairs[0]
    directory = corpus_dir(root, name, pair)  # de-en's folder serves en-de too
    if directory.name not in pairs:
        raise NMTError(f"{root / name}: no pair '{pair}' (it has: {', '.join(pairs)}); "
                       "choose one with --pair")
    return directory, pair


def show_corpus(root: Path, name: str, pair: str | None, out: Path | None) -> Iterator[str]:
    """`nmt data show`: the lines to print (sizes per split and side, the manifest's filter
    counts) and, last, where the length histograms went (default reports/data/NAME-PAIR-
    lengths.png: a read command never writes into the corpus folder)."""
    from nmt.core.plotting import plot_lengths  # start-up: matplotlib only when drawing

    directory, pair = _choose_pair(root, name, pair)
    src, tgt = pair.split("-")
    splits = split_names(directory, src, tgt)
    manifest, problem = None, ""
    if (directory / "manifest.json").is_file():
        try:
            manifest = read_manifest(directory / "manifest.json")
        except NMTError as exc:
            problem = str(exc)
    yield f"corpus {name}, pair {pair}: {directory}"
    if manifest:
        seed = f"; seed {manifest.seed}" if manifest.seed is not None else ""
        yield f"source: {manifest.source}; created {manifest.created or '?'}{seed}"
    else:
        yield f"manifest: {problem or 'none'}; sizes counted from the files"
    yield (f"{'split':<18}{'pairs':>11}  {'side':<6}{'words':>12}{'chars':>14}"
           f"{'mean':>8}{'median':>8}{'max':>7}   (words per sentence)")
    stats, joint = {}, _joint_split(splits)
    for split in splits:
        expected = manifest.lines.get(split, 0) if manifest else 0
        stats[split] = one = split_stats(directory / f"{split}.{src}", directory / f"{split}.{tgt}",
                                         joint=split == joint,
                                         expected=expected)
        label = split + (" (drawn)" if manifest and manifest.origins.get(split) == "drawn" else "")
        for side, lang, first in ((one.src, src, True), (one.tgt, tgt, False)):
            mean, median, longest = side.summary(one.pairs)
            head = f"{label:<18}{one.pairs:>11,}" if first else " " * 29
            yield (f"{head}  {lang:<6}{side.words:>12,}{side.chars:>14,}"
                   f"{mean:>8.1f}{median:>8.1f}{longest:>7,}")
        if manifest and split in manifest.lines and manifest.lines[split] != one.pairs:
            yield (f"  note: manifest.json says {split} has {manifest.lines[split]:,} pairs; "
                   f"the files hold {one.pairs:,}")
    yield from _filter_lines(manifest)
    if not stats:
        yield f"no split files {{split}}.{src} + {{split}}.{tgt} in {directory}: nothing to draw"
        return
    out = out or Path("reports") / "data" / f"{name}-{pair}-lengths.png"
    path = plot_lengths(stats[joint].joint, {s: (st.src.counts, st.tgt.counts, st.pairs)
                                             for s, st in stats.items()},
                        (src, tgt), joint, out, f"{name} {pair}: words per sentence")
    yield f"wrote {path} (lengths: {joint} source against target, and each split's two sides)"


def _joint_split(splits: list[str]) -> str:
    """The split drawn source against target: train, or the first there is."""
    return "train" if "train" in splits or not splits else splits[0]


def _filter_lines(manifest: Manifest | None) -> Iterator[str]:
    if manifest is None:
        return
    if not manifest.filters:
        yield "filters: none (the manifest records none)"
        return
    yield "filters on the training pairs (a pair is counted by the first filter that drops it):"
    for name, (setting, dropped) in manifest.filters.items():
        yield f"  {name:<12}{setting:<8}{dropped:>10,} dropped" if setting != "off" else \
            f"  {name:<12}off"
