"""Corpora: reading and finding what an import wrote, and the synthetic corpus.

Every corpus lives under `data/<corpus>/<pair>/` as `{split}.{lang}` UTF-8
files, one sentence per line, plus `manifest.json` (source, filters, split sizes,
checksums), written by the import pipeline (nmt/data/pipeline.py). Line i of one language
is the translation of line i of the other, so one import serves both directions: en-de
reads data/<corpus>/de-en/ when only that exists (`corpus_dir`).
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import shutil
import sys
import unicodedata
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.data.folder import lock, sha256_file, staged, write_manifest
from nmt.data.sources import BOM, PRESETS
from nmt.data.synth import SOURCE_LANG, TARGET_LANG, write_synth

SYNTH_PAIR = "src-tgt"
SYNTH_REVERSE = "tgt-src"  # the same corpus the other way round, gold links flipped


def read_lines(path: Path) -> list[str]:
    """Read a UTF-8 text file (optionally .gz); errors name the file and line."""
    return read_hashed(path)[0]


def read_hashed(path: Path) -> tuple[list[str], str]:
    """`read_lines` and the sha256 of the bytes that one read took (of a .gz, its
    decompressed text): what a cache built from the lines is keyed by."""
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
    return ([_decode(line, path, number) for number, line in enumerate(lines, 1)],
            hashlib.sha256(raw).hexdigest())


def head_lines(path: Path, count: int) -> list[str]:
    """The first `count` lines of a text file as `read_lines` gives them, without reading
    the rest."""
    with open(path, "rb") as handle:
        return [_decode(line.removesuffix(b"\n"), path, number)
                for number, line in enumerate(itertools.islice(handle, count), 1)]


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


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    """Read two line-aligned files; different line counts name both files and counts."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise NMTError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; "
                       "parallel files must have one line per sentence pair")
    if not src:
        raise NMTError(f"{src_path}: the corpus is empty")
    return src, tgt


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


def ensure_synth(root: Path, seed: int = 1234, sizes: dict[str, int] | None = None,
                 force: bool = False) -> Path:
    """Generate the embedded synthetic corpus unless its files are already there (`force`:
    again; written whole or not at all, as an import is, so a reader sees the old corpus or
    the new one), and keep its reverse direction (`synth/tgt-src`) derived from it."""
    out = root / "synth" / SYNTH_PAIR
    if force or not _synth_done(out):
        with lock(out):  # another process may be generating it
            if force or not _synth_done(out):
                with staged(out) as tmp:
                    _write_synth(tmp, seed, sizes)
    _ensure_reverse(out, root / "synth" / SYNTH_REVERSE)
    return out


def _synth_done(out: Path) -> bool:
    return (out / "manifest.json").is_file() or (out / f"train.{SOURCE_LANG}").is_file()


def _write_synth(folder: Path, seed: int, sizes: dict[str, int] | None) -> None:
    counts = write_synth(folder, seed=seed, sizes=sizes)
    splits = {split: {"lines": n, "origin": "source", "bom_stripped": 0, "gold": f"{split}.gold",
                      "sha256": {lang: sha256_file(folder / f"{split}.{lang}")
                                 for lang in (SOURCE_LANG, TARGET_LANG)}}
              for split, n in counts.items()}
    write_manifest(folder, "synth", SYNTH_PAIR, {"kind": "synth", "seed": seed, "sizes": counts},
                   normalisation="none: generated text", seed=None, filters={}, splits=splits)


def _ensure_reverse(forward: Path, reverse: Path) -> None:
    """`reverse` = `forward` with the same text files and every gold link i-j as j-i;
    re-derived whenever the forward corpus's manifest changes (e.g. after --force)."""
    stamp = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(forward.glob("*"))
                                    if p.suffix in (".src", ".tgt", ".gold"))).hexdigest()
    manifest = reverse / "manifest.json"

    def current() -> bool:
        return manifest.is_file() and json.loads(manifest.read_text()).get("from") == stamp

    if current():
        return
    with lock(reverse):  # a racing process writes the same: one does, the other reads it
        if current():
            return
        with staged(reverse) as tmp:  # swept by the next writer if this one is killed
            for path in sorted(forward.glob("*.gold")):
                lines = read_lines(path)
                (tmp / path.name).write_text("".join(" ".join(
                    f"{j}-{i}" for i, j in (link.split("-") for link in line.split())) + "\n"
                    for line in lines), encoding="utf-8")
                for lang in ("src", "tgt"):
                    shutil.copyfile(forward / f"{path.stem}.{lang}", tmp / f"{path.stem}.{lang}")
            (tmp / "manifest.json").write_text(json.dumps(
                {"source": f"reverse of {forward}", "pair": SYNTH_REVERSE, "from": stamp}) + "\n")


def load_split(root: Path, corpus: str, pair: str, split: str) -> tuple[list[str], list[str]]:
    """Load a prepared split; a missing corpus says which `nmt data` command makes it."""
    return read_parallel(*split_paths(root, corpus, pair, split))


def split_paths(root: Path, corpus: str, pair: str, split: str) -> tuple[Path, Path]:
    """The source and target files of a prepared split, checked to exist (a missing corpus
    says which `nmt data` command makes it); read by `load_split` or streamed."""
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
                           f"(it has: {', '.join(splits)}); name one of those (data.valid, "
                           "data.test, --split), or draw it at import: `nmt data import` "
                           "with --valid-size N / --test-size N")
        verb = (f"`nmt data download {corpus} --pair {pair} [--from DIR]`" if corpus in PRESETS
                else f"`nmt data import {corpus} --pair {pair} --files SRC TGT` (or --from, "
                     "--tsv, --hf: docs/data.md)")
        hint = (f"import {corpus} {pair} (or {tgt}-{src}: one import serves both directions) "
                f"with {verb}, or check data.corpus / data.pair in the config")
        raise NMTError(f"{missing}: not found; {hint}")
    return src_path, tgt_path


CACHE = ".cache"  # data/.cache/: spm/ (vocabularies and stores), links/ (a teacher's)


def cache_root(root: Path | str) -> Path:
    """The caches of a data root, kept outside every corpus folder, so that a re-import
    (which replaces the folder whole) deletes nothing a run or a cache reader uses; named
    by content, removed by `nmt data gc`."""
    return Path(root) / CACHE


class LiveCorpus:
    """The split files of a corpus as imported (`data/NAME/PAIR/`), which a re-import
    replaces: what `nmt data prepare` and `nmt data links` read. A run reads its pin
    instead (nmt.data.pin.Pin, the same methods)."""

    def __init__(self, root: Path | str, corpus: str, pair: str):
        self.root, self.corpus, self.pair = Path(root), corpus, pair
        self.langs = tuple(pair.split("-"))
        self.cache = cache_root(root)

    @classmethod
    def of(cls, cfg: Config) -> LiveCorpus:
        return cls(cfg.data.root, cfg.data.corpus, cfg.data.pair)

    @property
    def folder(self) -> Path:
        return corpus_dir(self.root, self.corpus, self.pair)

    def paths(self, split: str) -> tuple[Path, Path]:
        return split_paths(self.root, self.corpus, self.pair, split)

    def load(self, split: str) -> tuple[list[str], list[str]]:
        return read_parallel(*self.paths(split))

    def gold(self, split: str) -> Path | None:
        path = self.folder / f"{split}.gold"
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
