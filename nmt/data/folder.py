"""The corpus folder `data/<corpus>/<pair>/`: safe names, written whole or not at all, and
its `manifest.json` (docs/data.md, "The corpus folder").

An import writes into a private folder beside the target (`data/NAME/.PAIR.tmp-XXXX`) and
puts it in place in one step when everything is written: the old folder is renamed aside,
the new one renamed in, the old one deleted. An interrupted or refused import leaves no
half corpus, and a re-import leaves no stale split (nor the old folder's caches, which are
keyed by checksums and rebuilt when needed).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nmt.core.errors import NMTError
from nmt.core.locks import file_lock

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
    """A private empty folder beside `target`, put in `target`'s place in one step when the
    block ends without an error; removed otherwise (with any parent the call created)."""
    made = [p for p in (target.parent, *target.parent.parents) if not p.exists()]
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _fresh(target)
    try:
        yield tmp
        with lock(target):
            _swap(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        for folder in made:  # innermost first; only folders still empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def _fresh(target: Path) -> Path:
    """A new folder `.NAME.tmp-XXXXXXXX` beside `target` (mode as the umask says, unlike
    tempfile.mkdtemp's private 0700, so the corpus folder is made as any other)."""
    while True:
        tmp = target.with_name(f".{target.name}.tmp-{secrets.token_hex(4)}")
        try:
            tmp.mkdir()
            return tmp
        except FileExistsError:
            continue


def _swap(new: Path, target: Path) -> None:
    old = None
    if target.exists() or target.is_symlink():
        old = target.with_name(f".{target.name}.old-{new.name.rsplit('-', 1)[-1]}")
        target.rename(old)
    try:
        new.rename(target)
    except BaseException:
        if old is not None:
            old.rename(target)  # put the old corpus back
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


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
