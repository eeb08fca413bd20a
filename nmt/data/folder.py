"""The corpus folder `data/<corpus>/<pair>/`: safe names, written whole or not at all, and
its `manifest.json` (docs/data.md, "The corpus folder").

An import writes into a private folder beside the target (`data/NAME/.PAIR.tmp-XXXX`,
owned as nmt.core.scratch says) and exchanges it with the old folder in one step when
everything is written, then deletes the old one. An interrupted, killed or refused import
leaves no half corpus (the next import sweeps what a killed one left), and a re-import
leaves no stale split. Caches live outside the corpus folder (`data/.cache/`), so a
re-import deletes nothing a run reads.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from nmt.core.errors import NMTError
from nmt.core.locks import file_lock
from nmt.core.scratch import restore, scratch, swap_in, sweep

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a corpus name
SAFE_LANG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_]*")  # no '-': it joins the pair's two codes
SAFE_SPLIT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # no '.': it ends at `.{lang}`
BLOCK = 1 << 20  # bytes hashed at a time


def check_name(name: str) -> str:
    if not SAFE_NAME.fullmatch(name):
        raise NMTError(f"corpus name '{name}' is not a safe folder name; use letters, digits "
                       "and _ . - (starting with a letter or digit)")
    return name


def split_pair(pair: str) -> tuple[str, str]:
    """`de-en` -> ("de", "en"); the codes are file suffixes, so they must be safe names."""
    parts = pair.split("-")
    if len(parts) != 2 or parts[0] == parts[1] or not all(map(SAFE_LANG.fullmatch, parts)):
        raise NMTError(f"language pair '{pair}' must be two different codes joined by '-', "
                       "e.g. de-en (letters, digits and _ only: pt_BR-en)")
    return parts[0], parts[1]


def check_split(split: str, where: str) -> str:
    if not SAFE_SPLIT.fullmatch(split):
        raise NMTError(f"{where}: split name '{split}' cannot name a file; use letters, digits, "
                       "_ and - (map it with --split-map)")
    return split


class HashedLines:
    """A binary file's lines, hashed as they are read: `finish()` reads what is left and
    gives the sha256 of the whole file as this one pass read it."""

    def __init__(self, handle: BinaryIO):
        self.handle, self.hash, self.digest = handle, hashlib.sha256(), None

    def __iter__(self) -> Iterator[bytes]:
        for line in self.handle:
            self.hash.update(line)
            yield line

    def finish(self) -> str:
        if self.digest is None:
            while block := self.handle.read(BLOCK):
                self.hash.update(block)
            self.digest = self.hash.hexdigest()
        return self.digest


def sha256_file(path: Path) -> str:
    """The file's sha256, read in blocks (never the whole file at once)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def lock(target: Path):
    """The lock around replacing `target` (kept beside it: lock files are never deleted)."""
    return file_lock(target.parent / f".{target.name}.lock")


@contextmanager
def staged(target: Path) -> Iterator[Path]:
    """A private empty folder beside `target` (nmt.core.scratch), put in `target`'s place in
    one step when the block ends without an error; removed otherwise (with any parent the
    call created), and by the next writer if this process is killed. The old folder goes
    when the new one is in; at every instant `target` holds one of them, whole."""
    made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    if any(target.parent.glob(f".{target.name}.old-*")):  # a swap killed half-way
        with lock(target):
            restore(target)
    sweep(target.parent, target.name)  # what killed writers left
    try:
        with scratch(target) as tmp:
            yield tmp
            with lock(target):
                swap_in(tmp, target)  # tmp now holds the old folder, removed on leaving
    except BaseException:
        for folder in made:  # innermost first; only folders still empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise


class SplitFiles:
    """The two files `{split}.{src}` and `{split}.{tgt}` of one split, written a pair at a
    time (normalised text holds no newline)."""

    def __init__(self, folder: Path, split: str, langs: tuple[str, str]):
        self.paths = {lang: folder / f"{split}.{lang}" for lang in langs}
        self.handles = [open(p, "w", encoding="utf-8", newline="") for p in self.paths.values()]
        self.lines = 0

    def write(self, src: str, tgt: str) -> None:
        self.handles[0].write(src + "\n")
        self.handles[1].write(tgt + "\n")
        self.lines += 1

    def close(self) -> dict:
        """Close both files; the split's manifest entry (lines and checksums)."""
        for handle in self.handles:
            handle.close()
        return {"lines": self.lines,
                "sha256": {lang: sha256_file(path) for lang, path in self.paths.items()}}


def write_manifest(folder: Path, corpus: str, pair: str, source: dict, *, normalisation: str,
                   seed: int | None, filters: dict, splits: dict) -> dict:
    """Write `manifest.json` (the schema of docs/data.md) and return it."""
    manifest = {"corpus": corpus, "pair": pair, "created": time.strftime("%F %T"),
                "source": source, "normalisation": normalisation, "seed": seed,
                "filters": filters, "splits": splits}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False)
                                          + "\n", encoding="utf-8")
    return manifest
