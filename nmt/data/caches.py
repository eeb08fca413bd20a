"""The data root's leftovers and caches: what `nmt data list` sweeps and names, and what
`nmt data gc` removes (docs/data.md, "Caches and `nmt data gc`").

Caches live in `data/.cache/` and are named by content: `spm/<key>/` (a vocabulary, its
`options.json` holding the training files' sha256) with its stores `<split>.<digest>/`,
and `links/<pair>.eflomal-<key>/` (a teacher's links, its `settings.json` holding the
digests they were computed from). A cache is referenced by a corpus whose split files have
those checksums (its manifest), or by a run whose pin names them (`runs/*/corpus/
pinned.json`); a run's pin holds hard links of its own, so removing a cache never takes
bytes from a run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from nmt.core.locks import file_lock
from nmt.core.scratch import remove, restore, sweep
from nmt.data.corpora import cache_root
from nmt.data.folder import sha256_file
from nmt.data.store import split_digest


def sweep_root(root: Path, dry_run: bool = False) -> tuple[list[Path], list[Path]]:
    """Remove what killed writers left under the data root (import, store, vocabulary and
    links scratch folders, and a corpus folder a killed swap left aside); returns (what it
    removed, or with `dry_run` what it would remove, changing nothing; the scratch paths
    live processes still own)."""
    dead: list[Path] = []
    alive: list[Path] = []
    root = Path(root)
    if not root.is_dir():
        return dead, alive

    def take(parent: Path) -> None:
        gone, live = sweep(parent, dry_run=dry_run)
        dead.extend(gone)
        alive.extend(live)

    for corpus in (p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for aside in corpus.glob(".*.old-*"):
            target = corpus / aside.name[1:].split(".old-")[0]
            if dry_run:  # restore() removes an aside whose corpus is there, else puts it back
                dead += [aside] if target.exists() else []
                continue
            with file_lock(corpus / f".{target.name}.lock"):
                restore(target)
        take(corpus)
    cache = cache_root(root)
    for folder in (cache / "spm", cache / "links"):
        take(folder)
        if folder.name == "spm" and folder.is_dir():
            for vocab in (p for p in folder.iterdir() if p.is_dir()):
                take(vocab)
    return dead, alive


def _referenced(root: Path, runs: list[Path]) -> tuple[set, set, set]:
    """(pairs of training-file checksums, split digests, vocabulary model checksums) that
    some corpus under `root` or some run under `runs` holds."""
    files, digests, models = set(), set(), set()
    for manifest in Path(root).glob("*/*/manifest.json"):
        if manifest.parent.name.startswith("."):
            continue
        try:
            splits = json.loads(manifest.read_text())["splits"]
            for split, entry in splits.items():
                shas = list(entry["sha256"].values())
                files.add(frozenset(shas))
                digests.add(split_digest(*shas))
                digests.add(split_digest(*reversed(shas)))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    for runs_dir in runs:
        for pinned in Path(runs_dir).glob("*/corpus/pinned.json"):
            try:
                record = json.loads(pinned.read_text())
                langs = record["langs"]
                for entry in record["splits"].values():
                    shas = [entry["sha256"][lang] for lang in langs]
                    files.add(frozenset(shas))
                    digests.add(split_digest(*shas))
                models.update(record.get("vocab", {}).values())
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
    return files, digests, models


def _size(path: Path) -> int:
    """Bytes that removing `path` frees: files no other name links to."""
    if path.is_file():
        stat = path.stat()
        return stat.st_size if stat.st_nlink == 1 else 0
    return sum(_size(p) for p in path.rglob("*") if p.is_file())


def collect(root: Path, runs: list[Path], dry_run: bool = False) -> Iterator[str]:
    """`nmt data gc`: remove the caches under `root/.cache` that no corpus under `root` and
    no run under `runs` references; one line per removed cache, then the total freed."""
    cache = cache_root(root)
    found, alive = sweep_root(root, dry_run=True)
    dead = {path: _size(path) for path in found}  # measured before they go
    if not dry_run:
        alive = sweep_root(root)[1]
    files, digests, models = _referenced(root, runs)
    gone, kept = list(dead.values()), 0
    for path in dead:
        yield f"{'would remove' if dry_run else 'removed'} {path} (left by a killed command)"
    for vocab in sorted((cache / "spm").glob("*")) if (cache / "spm").is_dir() else []:
        if not vocab.is_dir() or vocab.name.startswith("."):
            continue
        with file_lock(vocab.parent / ".lock"):
            used = _vocab_used(vocab, files, models)
            stores = [p for p in vocab.iterdir() if p.is_dir() and not p.name.startswith(".")]
            if not used:  # its stores go with it
                yield _drop(vocab, dry_run, gone)
                continue
            kept += 1
            for store in stores:
                if store.name.rsplit(".", 1)[-1] not in digests:
                    yield _drop(store, dry_run, gone)
    for links in sorted((cache / "links").glob("*")) if (cache / "links").is_dir() else []:
        if not links.is_dir() or links.name.startswith("."):
            continue
        try:
            used = set(json.loads((links / "settings.json").read_text())["digests"].values())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            used = None  # written before digests were recorded: unknown, kept
        if used is None or used & digests:
            kept += 1
            continue
        yield _drop(links, dry_run, gone)
    for path in alive:
        yield f"in use: {path} (its process is alive)"
    verb = "would free" if dry_run else "freed"
    yield (f"{verb} {sum(gone) / 2**20:,.1f} MiB in {len(gone)} cache folder(s); kept {kept} that a "
           f"corpus or run references")


def _drop(path: Path, dry_run: bool, gone: list[int]) -> str:
    """Remove a cache folder (unless `dry_run`), adding the bytes it frees to `gone`; the
    line that says so."""
    gone.append(_size(path))
    if not dry_run:
        remove(path)
    return f"{'would remove' if dry_run else 'removed'} {path}"


def _vocab_used(vocab: Path, files: set, models: set) -> bool:
    try:
        key = json.loads((vocab / "options.json").read_text())
        if frozenset((key["src"], key["tgt"])) in files:
            return True
    except (OSError, ValueError, KeyError, TypeError):
        pass
    shas = {sha256_file(p) for p in vocab.glob("*.model")}
    return bool(shas) and shas <= models


def leftovers(root: Path) -> list[str]:
    """`nmt data list`'s last lines: scratch folders it could not sweep (a live writer's)."""
    return [f"in progress: {path} (a live process writes it)" for path in sweep_root(root)[1]]
