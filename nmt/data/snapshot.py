"""A snapshot of a corpus's splits as imported: hard links to its files (text, gold,
manifest) made under the corpus's lock, so no import exchanges the folder half-way, and the
digests of the bytes linked. What a run's pin (nmt.data.pin) is made from."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from nmt.core.errors import NMTError
from nmt.core.scratch import link_or_copy
from nmt.data.corpora import LiveCorpus, normalise
from nmt.data.folder import lock
from nmt.data.store import scan


def pair_hashes(sources: list[str], targets: list[str]) -> np.ndarray:
    """Each pair's 8-byte hash of its normalised text (the import's test for a repeat)."""
    return np.frombuffer(b"".join(
        hashlib.blake2b(f"{normalise(s)}\t{normalise(t)}".encode(), digest_size=8).digest()
        for s, t in zip(sources, targets)), dtype="<u8")


def manifest_shas(folder: Path, split: str, langs: tuple) -> tuple[str, str] | None:
    try:
        entry = json.loads((folder / "manifest.json").read_text())["splits"][split]["sha256"]
        return entry[langs[0]], entry[langs[1]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def has_split(live: LiveCorpus, split: str) -> bool:
    try:
        live.paths(split)
    except NMTError:
        return False
    return True


def link_splits(live: LiveCorpus, splits: list[str], into: Path) -> dict:
    """Hard links to the splits' files (and gold, and the manifest) under the corpus's
    lock, so no import exchanges the folder half-way; then each linked file is hashed:
    the digests are of the bytes pinned, whatever happens to the corpus next."""
    paths = {split: live.paths(split) for split in splits}
    folder = live.folder
    with lock(folder):
        for split, pair in paths.items():
            for lang, path in zip(live.langs, pair):
                link_or_copy(path, into / f"{split}.{lang}")
            if (gold := folder / f"{split}.gold").is_file():
                link_or_copy(gold, into / gold.name)
        if (folder / "manifest.json").is_file():
            link_or_copy(folder / "manifest.json", into / "manifest.json")
    shas = {}
    for split in splits:
        (src_sha, n), (tgt_sha, m) = (scan(into / f"{split}.{lang}") for lang in live.langs)
        if n != m:
            raise NMTError(f"{paths[split][0]} has {n} lines but {paths[split][1]} has {m}; "
                           "parallel files must have one line per sentence pair")
        if not n:
            raise NMTError(f"{paths[split][0]}: the corpus is empty")
        shas[split] = {"lines": n, "sha256": dict(zip(live.langs, (src_sha, tgt_sha)))}
    return shas
