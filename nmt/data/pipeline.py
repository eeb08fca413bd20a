"""One import pipeline for every source: source -> normalise -> filters (training pairs
only) -> splits -> the corpus folder and its manifest (docs/data.md, "Import your own
corpus").

Memory stays flat: pass 1 streams the source, normalises each pair, drops what the
per-pair filters drop, writes evaluation splits straight to their files and training pairs
to a temporary file, and keeps 8 bytes per training pair: a keyed 64-bit hash of the
normalised pair (blake2b, the seed as key). numpy then finds the pairs also in val/test
and the duplicates (first occurrence kept), and draws missing val/test splits: the pairs
with the smallest hashes, so the same pairs land in the same split whatever the input
order and duplicates land together. Pass 2 streams the temporary file into the final
files, in input order. Two distinct pairs share a 64-bit hash with a chance of about
n^2 / 2^65 (one in a million at five million pairs).
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from nmt.core.errors import NMTError
from nmt.core.progress import rate
from nmt.data.corpora import BOM, normalise
from nmt.data.folder import SplitFiles, check_name, split_pair, staged, write_manifest
from nmt.data.hub import Hub
from nmt.data.sources import PRESETS, FilePair, Folder, Source, Tsv

NORMALISATION = "NFC, whitespace collapsed, BOM dropped"
ORDER = ("empty", "min_words", "max_words", "max_ratio", "same", "overlap", "duplicates")
LABELS = {"empty": "empty", "min_words": "too short", "max_words": "too long",
          "max_ratio": "over the length ratio", "same": "source = target",
          "overlap": "also in val/test", "duplicates": "duplicate"}
DROP, TRAIN, VAL, TEST = 0, 1, 2, 3  # a training pair's fate after pass 1
CHUNK = 1 << 20  # training hashes looked up in val/test at a time


@dataclass(frozen=True)
class Filters:
    """Filters on the training pairs, in ORDER; each pair is counted by the first that
    drops it. Words are spaces + 1 of the normalised text; the ratio is the longer side's
    words over the shorter's (Moses clean-corpus-n's default). 0 turns a number off."""

    empty: bool = True  # a side empty after normalising
    min_words: int = 1  # fewer words on a non-empty side
    max_words: int = 250  # more words on either side
    max_ratio: float = 9.0  # longer side / shorter side, in words
    same: bool = True  # source identical to target
    overlap: bool = True  # the pair is also in a val or test split
    duplicates: bool = True  # a repeat of an earlier training pair

    def __post_init__(self):
        if not 0 <= self.max_ratio < math.inf:  # the manifest is JSON: no Infinity, no NaN
            raise NMTError(f"--max-ratio {self.max_ratio}: use a finite number >= 0 (0: off)")

    def drop(self, src: str, tgt: str) -> str | None:
        """The first per-pair filter that drops (src, tgt), or None."""
        if self.empty and not (src and tgt):
            return "empty"
        words = (src.count(" ") + 1 if src else 0, tgt.count(" ") + 1 if tgt else 0)
        if self.min_words and any(0 < w < self.min_words for w in words):  # an empty side
            # is `empty`'s to drop or keep (--keep-empty), not a sentence too short
            return "min_words"
        if self.max_words and max(words) > self.max_words:
            return "max_words"
        if self.max_ratio and min(words) and max(words) > self.max_ratio * min(words):
            return "max_ratio"
        if self.same and src == tgt:
            return "same"
        return None

    def report(self, dropped: dict[str, int]) -> dict:
        """The manifest's "filters": each setting and how many training pairs it dropped."""
        key = {name: "on" if isinstance(value, bool) else "value"
               for name, value in asdict(self).items()}
        return {name: {key[name]: getattr(self, name), "dropped": dropped.get(name, 0)}
                for name in ORDER}


@dataclass
class Imported:
    """What an import wrote: its manifest, the folder, and how long it took."""

    manifest: dict
    folder: Path
    seconds: float
    pairs: int

    def lines(self) -> list[str]:
        """The summary `nmt data import` and `download` print."""
        filters = self.manifest["filters"]
        out = []
        for split, entry in self.manifest["splits"].items():
            note = " (drawn from the training pairs)" if entry.get("origin") == "drawn" else ""
            if split == "train":
                dropped = [f"{filters[n]['dropped']:,} {LABELS[n]}" for n in ORDER
                           if filters[n]["dropped"]]
                note = f" ({', '.join(dropped)} pairs dropped)" if dropped else ""
            out.append(f"{split}: {entry['lines']:,} pairs{note}")
        settings = " · ".join(_setting(n, filters[n]) for n in ORDER)
        out.append(f"training pairs dropped by filter: {settings}")
        speed = self.pairs / self.seconds if self.seconds else 0.0
        out.append(f"read {self.pairs:,} pairs in {self.seconds:.1f} s ({speed:,.0f} pairs/s)")
        out.append(f"wrote {self.folder}")
        if "val" not in self.manifest["splits"]:
            out.append("note: no 'val' split, which `nmt train` validates on (data.valid); "
                       "import again with --valid-size N to draw one from the training "
                       "pairs, or train with --set data.valid=SPLIT")
        return out


def _smallest_distinct(ranked: np.ndarray, count: int) -> np.ndarray:
    """The `count` smallest distinct values of an ascending array (a prefix suffices)."""
    size = count
    while True:
        head = np.unique(ranked[:size])
        if len(head) >= count or size >= len(ranked):
            return head[:count]
        size *= 2


def _setting(name: str, entry: dict) -> str:
    """`max_words 250: 3`, `same: 2`, or `min_words: off`."""
    value = entry.get("on", entry.get("value"))
    if not value:
        return f"{name}: off"
    shown = "" if isinstance(value, bool) else f" {value:g}"
    return f"{name}{shown}: {entry['dropped']:,}"


def run(name: str, pair: str, root: Path, source: Source, *, filters: Filters = Filters(),
        valid_size: int = 0, test_size: int = 0, seed: int = 1,
        preset: str | None = None, lowercase: bool = False) -> Imported:
    """Import `source` into `root/name/pair` in one step: everything or nothing. With
    `lowercase`, every split is lowercased after normalisation (the manifest says so)."""
    start = time.perf_counter()
    langs = split_pair(pair)
    if not -2**63 <= seed < 2**63:  # the draw's hash key is 8 bytes
        raise NMTError(f"--seed {seed}: use a whole number below 2**63")
    target = Path(root) / check_name(name) / pair
    names = source.split_names()
    if "train" not in names:
        raise NMTError(f"{source.label}: no split is called 'train' (it has: {', '.join(names)}); "
                       "name one with --split-map HUB_SPLIT=train")
    drawn = _drawn_splits(names, valid_size, test_size)
    with staged(target) as tmp:
        state = _Pass1(tmp, langs, filters, seed, lowercase)
        with rate("import", "pairs") as advance:
            state.read(source, advance)
        splits = state.finish(source, drawn)
        described = source.describe()
        if preset:
            described["preset"] = preset
        manifest = write_manifest(tmp, name, pair, described,
                                  normalisation=NORMALISATION + (", lowercased" * lowercase),
                                  seed=seed, filters=filters.report(state.dropped),
                                  splits=splits)
    return Imported(manifest, target, time.perf_counter() - start, state.pairs)


def _drawn_splits(names: list[str], valid_size: int, test_size: int) -> dict[str, int]:
    """The splits to draw from the training pairs: a size for a split the source lacks;
    for one it has, an error (its own split is kept as it is)."""
    drawn = {}
    for split, size, option in (("val", valid_size, "--valid-size"),
                                ("test", test_size, "--test-size")):
        if size < 0:
            raise NMTError(f"{option} {size}: must be 0 or more")
        if size and split in names:
            raise NMTError(f"{option} {size}: the source has its own '{split}' split, which is "
                           f"kept as it is; drop {option}")
        if size:
            drawn[split] = size
    return drawn


class _Pass1:
    """Pass 1's state: open split files, the training pairs' temporary file and hashes."""

    def __init__(self, folder: Path, langs: tuple[str, str], filters: Filters, seed: int,
                 lowercase: bool = False):
        self.folder, self.langs, self.filters = folder, langs, filters
        self.lowercase = lowercase
        self.key = seed.to_bytes(8, "little", signed=True)
        self.files: dict[str, SplitFiles] = {}
        self.boms: dict[str, int] = {}
        self.dropped: dict[str, int] = dict.fromkeys(ORDER, 0)
        self.train_hashes, self.eval_hashes = bytearray(), bytearray()
        self.pairs = 0

    def _hash(self, src: str, tgt: str) -> bytes:
        return hashlib.blake2b(f"{src}\t{tgt}".encode(), digest_size=8, key=self.key).digest()

    def read(self, source: Source, advance: Callable[[int], None]) -> None:
        train = open(self.folder / ".train.pass1", "w", encoding="utf-8", newline="")
        with train:
            for split, raw_src, raw_tgt in source:
                self.pairs += 1
                if not self.pairs % 4096:
                    advance(4096)
                split = split or "train"
                if raw_src.startswith(BOM) or raw_tgt.startswith(BOM):
                    self.boms[split] = (self.boms.get(split, 0) + raw_src.startswith(BOM)
                                        + raw_tgt.startswith(BOM))
                src, tgt = normalise(raw_src), normalise(raw_tgt)
                if self.lowercase:  # NFC again: lowering can decompose (U+0130)
                    src, tgt = normalise(src.lower()), normalise(tgt.lower())
                if split != "train":
                    if split not in self.files:
                        self.files[split] = SplitFiles(self.folder, split, self.langs)
                    self.files[split].write(src, tgt)
                    self.eval_hashes += self._hash(src, tgt)
                elif reason := self.filters.drop(src, tgt):
                    self.dropped[reason] += 1
                else:
                    train.write(f"{src}\t{tgt}\n")  # normalised text holds no tab or newline
                    self.train_hashes += self._hash(src, tgt)
        advance(self.pairs % 4096)

    def finish(self, source: Source, drawn: dict[str, int]) -> dict:
        """Pass 2: decide each training pair's fate, write train and the drawn splits."""
        fates = self._fates(source, drawn)
        out = {name: SplitFiles(self.folder, name, self.langs) for name in ("train", *drawn)}
        by_fate = {TRAIN: out["train"], VAL: out.get("val"), TEST: out.get("test")}
        temporary = self.folder / ".train.pass1"
        with open(temporary, encoding="utf-8", newline="\n") as lines:
            for fate, line in zip(fates, lines):
                if fate != DROP:
                    src, tgt = line[:-1].split("\t")
                    by_fate[fate].write(src, tgt)
        temporary.unlink()
        splits = {}
        for name, files in (*out.items(), *sorted(self.files.items())):
            entry = files.close()
            entry["origin"] = "drawn" if name in drawn else "source"
            entry["bom_stripped"] = self.boms.get(name, 0) if name not in drawn else 0
            splits[name] = entry
        return splits

    def _fates(self, source: Source, drawn: dict[str, int]) -> np.ndarray:
        """Each training pair's fate from the hashes alone, with a few arrays of at most 8
        bytes per pair: overlap, then duplicates (the first copy stays), then the draw."""
        hashes = np.frombuffer(self.train_hashes, dtype="<u8")
        fates = np.full(len(hashes), TRAIN, dtype=np.uint8)
        if self.filters.overlap and self.eval_hashes:
            held_out = np.unique(np.frombuffer(self.eval_hashes, dtype="<u8"))
            for start in range(0, len(hashes), CHUNK):
                part = hashes[start:start + CHUNK]
                at = np.minimum(np.searchsorted(held_out, part), len(held_out) - 1)
                fates[start:start + CHUNK][held_out[at] == part] = DROP
            self.dropped["overlap"] = int((fates == DROP).sum())
        order = np.argsort(hashes, kind="stable")  # equal hashes keep their input order
        order = order[fates[order] != DROP]
        ranked = hashes[order]  # the kept pairs' hashes, ascending
        repeat = ranked[1:] == ranked[:-1]
        if self.filters.duplicates:
            fates[order[1:][repeat]] = DROP
            self.dropped["duplicates"] = int(repeat.sum())
        left, want = len(ranked) - int(repeat.sum()), sum(drawn.values())
        del order, repeat
        if left <= want:
            raise NMTError(self._too_few(source, left, drawn))
        smallest, end = _smallest_distinct(ranked, want), 0
        for name, size in drawn.items():  # val takes the smallest hashes, test the next
            end += size
            fates[(fates == TRAIN) & (hashes <= smallest[end - 1])] = VAL if name == "val" \
                else TEST
        return fates

    def _too_few(self, source: Source, left: int, drawn: dict[str, int]) -> str:
        counts = ", ".join(f"{self.dropped[n]:,} {LABELS[n]}" for n in ORDER if self.dropped[n])
        if not left and 0 < self.dropped["empty"] == sum(self.dropped.values()):
            return f"{source.label}: every training pair has an empty side; nothing to train on"
        asked = " + ".join(f"{size:,} {name}" for name, size in drawn.items())
        return (f"{source.label}: {left:,} distinct training pairs left after the filters "
                f"({counts or 'none dropped'}), too few for {asked + ' and ' if asked else ''}"
                "training; see the filter switches of `nmt data import --help`")


def import_from(name: str, pair: str, root: Path, *, files: tuple[Path, Path] | None = None,
                from_dir: Path | None = None, tsv: Path | None = None, columns: str | None = None,
                hf: str | None = None, config: str | None = None, revision: str | None = None,
                split_map: str | None = None, fields: str | None = None, valid_size: int = 0,
                test_size: int = 0, seed: int = 1, filters: Filters = Filters(),
                extra_columns: bool = False, lowercase: bool = False) -> Imported:
    """`nmt data import`: exactly one of files, from_dir, tsv, hf; options as the CLI's."""
    check_name(name)
    src, tgt = split_pair(pair)
    given = [opt for opt, value in (("--files", files), ("--from", from_dir), ("--tsv", tsv),
                                    ("--hf", hf)) if value is not None]
    if len(given) != 1:
        got = f" (got {' and '.join(given)})" if given else ""
        raise NMTError(f"give exactly one source: --files SRC TGT, --from DIR, --tsv FILE or "
                       f"--hf ID{got}")
    for option, value, owner in (("--columns", columns, "--tsv"), ("--config", config, "--hf"),
                                 ("--revision", revision, "--hf"),
                                 ("--split-map", split_map, "--hf"), ("--fields", fields, "--hf"),
                                 ("--extra-columns", extra_columns or None, "--tsv")):
        if value is not None and owner != given[0]:
            raise NMTError(f"{option} goes with {owner}, not {given[0]}")
    if files is not None:
        source: Source = FilePair(*files)
    elif from_dir is not None:
        source = Folder(from_dir, src, tgt)
    elif tsv is not None:
        source = Tsv(tsv, src, tgt, _two(columns, "--columns"), extra_columns)
    else:
        source = Hub(hf, src, tgt, config=config, revision=revision,
                     split_map=_mapping(split_map), fields=_two(fields, "--fields"))
    return run(name, pair, root, source, filters=filters, valid_size=valid_size,
               test_size=test_size, seed=seed, lowercase=lowercase)


def download(corpus: str, pair: str, root: Path, from_dir: Path | None = None) -> Imported:
    """`nmt data download NAME`: run the preset NAME (sources.PRESETS) through `run`."""
    preset = PRESETS.get(corpus)
    if preset is None:
        raise NMTError(f"unknown corpus '{corpus}' for `nmt data download` (presets: "
                       f"{', '.join(PRESETS)}); import your own with `nmt data import {corpus} "
                       "--pair SRC-TGT` and --files, --from, --tsv or --hf (docs/data.md)")
    src, tgt = split_pair(pair)
    if src not in preset["langs"] or tgt not in preset["langs"]:
        raise NMTError(f"unknown language pair '{pair}' for {corpus}; use two of "
                       f"{', '.join(preset['langs'])} joined by '-', e.g. de-en")
    if from_dir is not None:
        source: Source = Folder(from_dir, src, tgt)
    elif pair in preset["hf"]:
        source = Hub(preset["hf"][pair], src, tgt, split_map=preset["split_map"])
    else:
        raise NMTError(f"{corpus} {pair} has no Hugging Face source; import local files with "
                       f"`nmt data download {corpus} --pair {pair} --from DIR`")
    return run(corpus, pair, root, source, filters=Filters(**preset["filters"]), preset=corpus)


def _two(text: str | None, option: str) -> tuple[str, str] | None:
    if text is None:
        return None
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise NMTError(f"{option} '{text}': give two names or indexes joined by ',', e.g. de,en")
    return parts[0], parts[1]


def _mapping(text: str | None) -> dict[str, str] | None:
    if text is None:
        return None
    pairs = [part.split("=") for part in text.split(",")]
    if not all(len(p) == 2 and all(x.strip() for x in p) for p in pairs):
        raise NMTError(f"--split-map '{text}': give hub=ours pairs joined by ',', e.g. "
                       "validation=val,test=test")
    return {hub.strip(): ours.strip() for hub, ours in pairs}
