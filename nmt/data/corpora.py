"""Corpora: a registry, hub download, local import, and the normalised layout.

Every corpus lives under `data/<corpus>/<pair>/` as `{split}.{lang}` UTF-8
files, one sentence per line, plus `manifest.json` (source, split sizes,
checksums). Line i of one language is the translation of line i of the other, so
one import serves both directions: en-de reads data/<corpus>/de-en/ when only that
exists (`corpus_dir`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import time
import unicodedata
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from nmt.core.config import Config
from nmt.core.errors import NMTError, one_line
from nmt.data.synth import SOURCE_LANG, TARGET_LANG, write_synth


@dataclass(frozen=True)
class CorpusInfo:
    langs: tuple[str, ...]  # languages the corpus has
    hub: dict[str, str]  # pair -> Hugging Face dataset id (pairs without one need --from)
    hub_splits: dict[str, str]  # hub split name -> our split name
    description: str


CORPORA: dict[str, CorpusInfo] = {
    "multi30k": CorpusInfo(
        langs=("en", "de", "fr", "cs"),
        hub={"de-en": "bentrevett/multi30k", "en-de": "bentrevett/multi30k"},
        hub_splits={"train": "train", "validation": "val", "test": "test_2016_flickr"},
        description="Multi30k task 1 (Flickr30k captions); fr/cs pairs import with --from",
    ),
}
SYNTH_PAIR = "src-tgt"
SYNTH_REVERSE = "tgt-src"  # the same corpus the other way round, gold links flipped
BOM = "\ufeff"  # a byte-order mark: metadata some editors put first in a file, never text
_SPLIT_RE = re.compile(r"^(train|val|valid|dev|test[\w-]*)$")


def read_lines(path: Path) -> list[str]:
    """Read a UTF-8 text file (optionally .gz); errors name the file and line."""
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            raw = handle.read()
    except FileNotFoundError:
        raise NMTError(f"{path}: file not found") from None
    except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt .gz
        raise NMTError(f"{path}: cannot read ({exc})") from None
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [_decode(line, path, number) for number, line in enumerate(lines, 1)]


def iter_lines(handle: BinaryIO | TextIO, name: str | Path) -> Iterator[str]:
    """Lines of a stream (stdin, a file being written...) one at a time, checked like
    `read_lines`; a byte-order mark at the start is dropped."""
    for number, line in enumerate(handle, 1):
        text = _decode(line.removesuffix(b"\n" if isinstance(line, bytes) else "\n"), name,
                       number)
        yield text.removeprefix(BOM) if number == 1 else text


@contextmanager
def line_source(path: Path | None) -> Iterator[Iterator[str]]:
    """Lazily read lines of `path` (optionally .gz), or of stdin when `path` is None."""
    if path is None:
        yield iter_lines(getattr(sys.stdin, "buffer", sys.stdin), "<stdin>")  # bytes if we can
        return
    try:
        handle = (gzip.open if path.suffix == ".gz" else open)(path, "rb")
    except FileNotFoundError:
        raise NMTError(f"{path}: file not found") from None
    except OSError as exc:  # a directory, no permission...
        raise NMTError(f"{path}: cannot read ({exc.strerror or exc})") from None
    with handle:
        try:
            yield iter_lines(handle, path)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:  # a corrupt .gz
            raise NMTError(f"{path}: cannot read ({exc})") from None


def _decode(line: bytes | str, path: str | Path, number: int) -> str:
    try:
        text = line if isinstance(line, str) else line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NMTError(f"{path}:{number}: invalid UTF-8 at byte {exc.start}; "
                       "re-encode the file as UTF-8") from None
    if "\x00" in text:
        raise NMTError(f"{path}:{number}: contains a NUL byte; is this a text file?")
    return text


def normalise(text: str) -> str:
    """Drop a leading byte-order mark, NFC-normalise, drop the line ending and collapse
    runs of whitespace."""
    return " ".join(unicodedata.normalize("NFC", text.removeprefix(BOM)).split())


def _file_for(directory: Path, split: str, lang: str) -> Path | None:
    for name in (f"{split}.{lang}", f"{split}.{lang}.gz"):
        if (directory / name).is_file():
            return directory / name
    return None


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    """Read two line-aligned files; different line counts name both files and counts."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise NMTError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; "
                       "parallel files must have one line per sentence pair")
    if not src:
        raise NMTError(f"{src_path}: the corpus is empty")
    return src, tgt


def _check_pair(corpus: str, pair: str) -> tuple[str, str]:
    if corpus not in CORPORA:
        raise NMTError(f"unknown corpus '{corpus}'; choose one of: {', '.join(CORPORA)} "
                       "(or `nmt data synth` for the synthetic corpus)")
    parts = pair.split("-")
    langs = CORPORA[corpus].langs
    if len(parts) != 2 or parts[0] == parts[1] or not all(p in langs for p in parts):
        raise NMTError(f"unknown language pair '{pair}' for {corpus}; use two of "
                       f"{', '.join(langs)} joined by '-', e.g. de-en")
    return parts[0], parts[1]


def write_corpus(out: Path, splits: dict[str, tuple[list[str], list[str]]], src: str, tgt: str,
                 source: str, train_split: str = "train") -> dict:
    """Normalise and write splits plus a manifest; empty training pairs are dropped."""
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"source": source, "pair": f"{src}-{tgt}", "created": time.strftime("%F %T"),
                "splits": {}}
    for split, (src_lines, tgt_lines) in splits.items():
        boms = sum(line.startswith(BOM) for line in (*src_lines, *tgt_lines))
        pairs = [(normalise(s), normalise(t)) for s, t in zip(src_lines, tgt_lines)]
        dropped = 0
        if split == train_split:
            kept = [p for p in pairs if p[0] and p[1]]
            dropped, pairs = len(pairs) - len(kept), kept
        entry = {"lines": len(pairs), "dropped_empty": dropped, "bom_stripped": boms, "sha256": {}}
        for lang, column in ((src, 0), (tgt, 1)):
            text = "".join(p[column] + "\n" for p in pairs)
            (out / f"{split}.{lang}").write_text(text, encoding="utf-8")
            entry["sha256"][lang] = hashlib.sha256(text.encode()).hexdigest()
        manifest["splits"][split] = entry
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def import_corpus(corpus: str, pair: str, from_dir: Path, root: Path) -> dict:
    """Import local raw files `{split}.{lang}[.gz]` (train, val, test*) from `from_dir`."""
    src, tgt = _check_pair(corpus, pair)
    if not from_dir.is_dir():
        raise NMTError(f"{from_dir}: directory not found")
    names = sorted({p.name.split(".")[0] for p in from_dir.iterdir()})
    splits = {}
    for split in (n for n in names if _SPLIT_RE.match(n)):
        src_path, tgt_path = _file_for(from_dir, split, src), _file_for(from_dir, split, tgt)
        if src_path is None and tgt_path is None:
            continue
        if src_path is None or tgt_path is None:
            have, miss = (tgt_path, src) if src_path is None else (src_path, tgt)
            raise NMTError(f"{have} has no partner: {from_dir}/{split}.{miss}[.gz] is missing")
        splits[split] = read_parallel(src_path, tgt_path)
    if "train" not in splits:
        raise NMTError(f"{from_dir}: no train.{src} / train.{tgt} (.gz) files found")
    if not any(normalise(s) and normalise(t) for s, t in zip(*splits["train"])):
        raise NMTError(f"{_file_for(from_dir, 'train', src)}: every training pair has an empty "
                       "side; nothing to train on")
    return write_corpus(root / corpus / pair, splits, src, tgt, f"dir:{from_dir.resolve()}")


def download_corpus(corpus: str, pair: str, root: Path) -> dict:
    """Download through Hugging Face `datasets` (needs network access to the hub)."""
    src, tgt = _check_pair(corpus, pair)
    info = CORPORA[corpus]
    hub_id = info.hub.get(pair)
    if hub_id is None:
        raise NMTError(f"{corpus} {pair} has no Hugging Face source; import local files with "
                       f"`nmt data download {corpus} --pair {pair} --from DIR`")
    try:
        import datasets  # start-up: datasets (seconds to import) only for a hub download

        data = datasets.load_dataset(hub_id)
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one clear line
        raise NMTError(f"could not fetch '{hub_id}' from the Hugging Face hub ({one_line(exc)}); "
                       f"import local files instead with --from DIR") from None
    splits = {}
    for hub_split, ours in info.hub_splits.items():
        if hub_split in data:
            rows = data[hub_split]
            splits[ours] = (list(rows[src]), list(rows[tgt]))
    return write_corpus(root / corpus / pair, splits, src, tgt, f"hub:{hub_id}")


def corpus_dir(root: Path, corpus: str, pair: str) -> Path:
    """The folder of `pair`; an import of the reverse pair serves it too (the files are
    `{split}.{lang}`, the same for both directions), so `de-en` needs no second import to
    train en-de. Not for gold-aligned corpora (links are directional: synth has both)."""
    forward = root / corpus / pair
    parts = pair.split("-")
    if corpus == "synth" or len(parts) != 2 or _holds_corpus(forward, parts[0]):
        return forward
    reverse = root / corpus / f"{parts[1]}-{parts[0]}"
    if _holds_corpus(reverse, parts[0]) and not any(reverse.glob("*.gold")):
        return reverse
    return forward


def _holds_corpus(directory: Path, lang: str) -> bool:
    return (directory / "manifest.json").is_file() or any(directory.glob(f"*.{lang}"))


def ensure_synth(root: Path, seed: int = 1234, sizes: dict[str, int] | None = None) -> Path:
    """Generate the embedded synthetic corpus unless its files are already there, and keep
    its reverse direction (`synth/tgt-src`) derived from it."""

    out = root / "synth" / SYNTH_PAIR
    if not ((out / "manifest.json").is_file() or (out / f"train.{SOURCE_LANG}").is_file()):
        counts = write_synth(out, seed=seed, sizes=sizes)
        manifest = {"source": f"synth:seed={seed}", "pair": f"{SOURCE_LANG}-{TARGET_LANG}",
                    "created": time.strftime("%F %T"),
                    "splits": {s: {"lines": n, "gold": f"{s}.gold"} for s, n in counts.items()}}
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    _ensure_reverse(out, root / "synth" / SYNTH_REVERSE)
    return out


def _ensure_reverse(forward: Path, reverse: Path) -> None:
    """`reverse` = `forward` with the same text files and every gold link i-j as j-i;
    re-derived whenever the forward corpus's manifest changes (e.g. after --force)."""
    stamp = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(forward.glob("*"))
                                    if p.suffix in (".src", ".tgt", ".gold"))).hexdigest()
    manifest = reverse / "manifest.json"
    if manifest.is_file() and json.loads(manifest.read_text()).get("from") == stamp:
        return
    tmp = reverse.with_name(f"{reverse.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for path in sorted(forward.glob("*.gold")):
        lines = read_lines(path)
        (tmp / path.name).write_text("".join(
            " ".join(f"{j}-{i}" for i, j in (link.split("-") for link in line.split())) + "\n"
            for line in lines), encoding="utf-8")
        for lang in ("src", "tgt"):
            shutil.copyfile(forward / f"{path.stem}.{lang}", tmp / f"{path.stem}.{lang}")
    (tmp / "manifest.json").write_text(json.dumps(
        {"source": f"reverse of {forward}", "pair": SYNTH_REVERSE, "from": stamp}) + "\n")
    shutil.rmtree(reverse, ignore_errors=True)  # stale; a racing process writes the same
    try:
        tmp.rename(reverse)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def load_split(root: Path, corpus: str, pair: str, split: str) -> tuple[list[str], list[str]]:
    """Load a prepared split; a missing corpus says which `nmt data` command makes it."""
    if corpus == "synth":
        ensure_synth(root)
    directory = corpus_dir(root, corpus, pair)
    src, tgt = pair.split("-")
    src_path, tgt_path = directory / f"{split}.{src}", directory / f"{split}.{tgt}"
    if not src_path.is_file() or not tgt_path.is_file():
        missing = src_path if not src_path.is_file() else tgt_path
        splits = sorted(p.name[:-len(src) - 1] for p in directory.glob(f"*.{src}"))
        if splits and split not in splits:
            raise NMTError(f"{missing}: not found; split '{split}' is not in {directory} "
                           f"(it has: {', '.join(splits)})")
        hint = (f"import {corpus} {pair} (or {tgt}-{src}: one import serves both directions) "
                f"with `nmt data download {corpus} --pair {pair} [--from DIR]`"
                if corpus in CORPORA else "check data.corpus / data.pair in the config")
        raise NMTError(f"{missing}: not found; {hint}")
    return read_parallel(src_path, tgt_path)


def corpus_gold(cfg: Config, split: str) -> Path | None:
    """The corpus's own gold alignments for `split` (`<split>.gold`), if it has them."""
    path = corpus_dir(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair) / f"{split}.gold"
    return path if path.is_file() else None


def read_pairs(path: Path) -> tuple[list[str], list[str]]:
    """`source ||| target` lines; errors name the file and line."""
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
