"""Where an import's sentence pairs come from: parallel files, a folder of splits, a TSV, a
Hugging Face dataset (nmt/data/hub.py; docs/data.md, "Import your own corpus").

A source yields `(split, source line, target line)` one pair at a time (split None: the
training pairs of a source without splits), raw: normalising and filtering come after
(nmt/data/pipeline.py). Text files are read as bytes and split on b"\\n" only, since
`\\r`, U+2028 and friends end lines for some tools and not for others, and decoded
strictly; every error names the file and line. `split_names()` says, before reading, which
splits the source has. `describe()` is the manifest's "source" entry.

`PRESETS` are named imports, data and not code: `nmt data download NAME` runs one.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from nmt.core.errors import NMTError, one_line
from nmt.data.folder import sha256_file

BOM = "\ufeff"  # a byte-order mark: metadata some editors put first in a file, never text

Pair = tuple[str | None, str, str]

PRESETS: dict[str, dict] = {
    # Multi30k task 1 (Flickr30k captions), imported as published (only empty training
    # pairs dropped) so that figures stay comparable; fr and cs pairs import with --from.
    "multi30k": {
        "langs": ["en", "de", "fr", "cs"],
        "hf": {"de-en": "bentrevett/multi30k", "en-de": "bentrevett/multi30k"},
        "split_map": {"validation": "val", "test": "test_2016_flickr"},
        "filters": {"min_words": 0, "max_words": 0, "max_ratio": 0.0, "same": False,
                    "overlap": False, "duplicates": False},
    },
}
SPLIT_NAMES = {"train": "train", "validation": "val", "valid": "val", "dev": "val",
               "test": "test"}  # a source's split -> ours (hub and folder); others keep theirs
SPLIT_FILE = re.compile(r"(train|(?:val|valid|validation|dev|test)(?:[0-9_-][A-Za-z0-9_-]*)?)"
                        r"\.([A-Za-z0-9_]+)(\.gz|\.xz)?")  # `--from`: {split}.{lang}[.gz|.xz]
BREAKS = {"\r": "CARRIAGE RETURN", "\x0b": "LINE TABULATION", "\x0c": "FORM FEED",
          "\x85": "NEXT LINE", "\u2028": "LINE SEPARATOR", "\u2029": "PARAGRAPH SEPARATOR"}
_BREAK = re.compile("[\x0b\x0c\x85\u2028\u2029]|\r(?!\\Z)")  # a final \r: a CRLF file's


class Source(Protocol):
    label: str  # what an error about the training pairs names: a file, or the dataset's id

    def split_names(self) -> list[str]: ...
    def describe(self) -> dict: ...
    def __iter__(self) -> Iterator[Pair]: ...


class _Hashing(io.RawIOBase):
    """A file's raw bytes as they are read, hashed on the way (sha256), so a source's
    checksum is of the bytes the import read, in the same pass (a pipe is read once)."""

    def __init__(self, handle):
        self.handle, self.digest = handle, hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = self.handle.readinto(buffer)
        if count:
            self.digest.update(memoryview(buffer)[:count])
        return count

    def rest(self) -> str:
        """Hash what is left unread (a decompressor may stop before the file's end)."""
        while block := self.handle.read(1 << 20):
            self.digest.update(block)
        return self.digest.hexdigest()

    def close(self) -> None:
        self.handle.close()
        super().close()


def _open(path: Path):
    """(a binary line reader of `path`, decompressed by its suffix; its _Hashing of the raw
    bytes)."""
    try:
        raw = _Hashing(open(path, "rb"))
    except FileNotFoundError:
        raise NMTError(f"{path}: file not found") from None
    except OSError as exc:  # a directory, no permission...
        raise NMTError(f"{path}: cannot read ({exc.strerror or exc})") from None
    wrap = {".gz": lambda f: gzip.GzipFile(fileobj=f, mode="rb"),
            ".xz": lambda f: lzma.LZMAFile(f, "rb")}.get(path.suffix)
    buffered = io.BufferedReader(raw, 1 << 20)
    return (wrap(buffered) if wrap else buffered), raw


class Lines:
    """The lines of one text file (.gz and .xz too), split on b"\\n" only and decoded as
    strict UTF-8. `number` is the last line read; `first_break` the first (line,
    character) that other tools would count as a line break."""

    def __init__(self, path: Path):
        self.path, self.number = path, 0
        self.first_break: tuple[int, str] | None = None
        self.sha256: str | None = None  # of the file's raw bytes, once read to its end

    def __iter__(self) -> Iterator[str]:
        handle, raw = _open(self.path)
        with handle, raw:
            try:
                for line in handle:
                    self.number += 1
                    yield self._decode(line[:-1] if line.endswith(b"\n") else line)
            except (EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError) as exc:
                raise NMTError(f"{self.path}: cannot read ({one_line(exc)})") from None
            self.sha256 = raw.rest()
        if self.number == 0:
            raise NMTError(f"{self.path}: the file is empty")

    def _decode(self, raw: bytes) -> str:
        where = f"{self.path}:{self.number}"
        if self.number == 1:
            _check_not_utf16(raw, where)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NMTError(f"{where}: invalid UTF-8 at byte {exc.start}; re-encode the file as "
                           "UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
        if "\x00" in text:
            raise NMTError(f"{where}: holds a NUL byte at character {text.index(chr(0))}; "
                           "is this a text file?")
        if self.first_break is None and (found := _BREAK.search(text)):
            self.first_break = (self.number, found.group())
        return text


def _check_not_utf16(raw: bytes, where: str) -> None:
    head = raw[:1000]
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or (len(head) > 1 and
                                                  head.count(0) * 4 >= len(head)):
        raise NMTError(f"{where}: looks like UTF-16 (a byte-order mark or every other byte "
                       "NUL); re-encode the file as UTF-8 (e.g. iconv -f utf-16 -t utf-8)")


def _mismatch(a: Lines, b: Lines) -> NMTError:
    """Different line counts; point at the first line either file has a break character in."""
    message = (f"{a.path} has {a.number:,} lines but {b.path} has {b.number:,}; parallel "
               "files need one line per sentence pair")
    breaks = sorted((f.first_break[0], i, f) for i, f in enumerate((a, b)) if f.first_break)
    if breaks:
        number, _, lines = breaks[0]
        char = lines.first_break[1]
        message += (f"; line {number:,} of {lines.path} holds a U+{ord(char):04X} "
                    f"{BREAKS[char]}, which some tools count as a line break")
    else:
        message += "; no line holds a stray line-break character, so a line is missing or " \
                   "added on one side"
    return NMTError(message)


class FilePair:
    """`--files SRC TGT`: two line-aligned files, read in lockstep."""

    def __init__(self, src: Path, tgt: Path, split: str | None = None):
        self.paths, self.split = (Path(src), Path(tgt)), split
        self.label = str(self.paths[0])
        self.read: dict[str, str] = {}  # each file's sha256, of the bytes iterating read

    def split_names(self) -> list[str]:
        return [self.split or "train"]

    def describe(self) -> dict:
        return {"kind": "files", "files": file_hashes(self.paths, self.read)}

    def __iter__(self) -> Iterator[Pair]:
        a, b = Lines(self.paths[0]), Lines(self.paths[1])
        yield from self._pairs(a, b)
        for lines in (a, b):
            self.read[str(lines.path.resolve())] = lines.sha256

    def _pairs(self, a: Lines, b: Lines) -> Iterator[Pair]:
        lines_a, lines_b = iter(a), iter(b)
        for src in lines_a:
            tgt = next(lines_b, None)
            if tgt is None:  # b ended first: count a's remaining lines
                for _ in lines_a:
                    pass
                raise _mismatch(a, b)
            yield self.split, src, tgt
        if next(lines_b, None) is not None:
            for _ in lines_b:
                pass
            raise _mismatch(a, b)


def file_hashes(paths, read: dict[str, str]) -> dict[str, str]:
    """Each file's sha256 as the import read it (`read`); one it has not read yet is hashed
    now."""
    out = {}
    for path in map(Path, paths):
        key = str(path.resolve())
        out[key] = read.get(key) or sha256_file(path)
    return out


class Folder:
    """`--from DIR`: `{split}.{lang}[.gz|.xz]` files, splits named as found: train, and
    val, valid, validation, dev, test, each alone or with a suffix (dev2, test_2016_flickr);
    valid, validation and dev become val, as a hub dataset's do (SPLIT_NAMES)."""

    def __init__(self, directory: Path, src: str, tgt: str):
        self.directory, self.langs = Path(directory), (src, tgt)
        if not self.directory.is_dir():
            raise NMTError(f"{self.directory}: directory not found")
        self.files = self._find()
        self.label = str(self.files["train"][src])
        self.read: dict[str, str] = {}

    def _find(self) -> dict[str, dict[str, Path]]:
        found: dict[str, dict[str, Path]] = {}
        for path in sorted(self.directory.iterdir()):
            match = SPLIT_FILE.fullmatch(path.name)
            if not match or match[2] not in self.langs:
                continue
            have = found.setdefault(match[1], {})
            if match[2] in have:
                raise NMTError(f"{have[match[2]]} and {path} hold the same split; keep one")
            have[match[2]] = path
        for split, have in found.items():
            if len(have) == 1:
                (lang, path), = have.items()
                miss = self.langs[1 - self.langs.index(lang)]
                raise NMTError(f"{path} has no partner: {self.directory}/{split}.{miss}"
                               "[.gz|.xz] is missing")
        if "train" not in found:
            src, tgt = self.langs
            raise NMTError(f"{self.directory}: no train.{src} / train.{tgt} (.gz, .xz) files "
                           "found")
        ours: dict[str, str] = {}  # our split -> the files' name for it
        for name in found:
            split = SPLIT_NAMES.get(name, name)
            if split in ours:
                raise NMTError(f"{self.directory}: {ours[split]}.* and {name}.* are both the "
                               f"'{split}' split; keep one, or rename the other (e.g. {name}2)")
            ours[split] = name
        return {split: found[name] for split, name in ours.items()}

    def split_names(self) -> list[str]:
        return list(self.files)

    def describe(self) -> dict:
        return {"kind": "dir", "path": str(self.directory.resolve()),
                "files": file_hashes((p for f in self.files.values() for p in f.values()),
                                     self.read)}

    def __iter__(self) -> Iterator[Pair]:
        for split, paths in self.files.items():
            pair = FilePair(paths[self.langs[0]], paths[self.langs[1]], split)
            yield from pair
            self.read.update(pair.read)


class Tsv:
    """`--tsv FILE`: one pair per row, tab-separated, unquoted (as translation memories
    export it). Columns by header name (a first row holding both language codes is a
    header) or by 0-based index; default: the language codes' columns, else 0 and 1.
    A row with more cells than the header (or, without one, the first row) is refused,
    naming its line: a stray tab would shift the target. `extra_columns` allows them."""

    def __init__(self, path: Path, src: str, tgt: str, columns: tuple[str, str] | None = None,
                 extra_columns: bool = False):
        self.path, self.langs, self.columns = Path(path), (src, tgt), columns
        self.extra_columns = extra_columns
        self.label = str(self.path)
        self.sha256: str | None = None

    def split_names(self) -> list[str]:
        return ["train"]

    def describe(self) -> dict:
        read = {str(self.path.resolve()): self.sha256} if self.sha256 else {}
        return {"kind": "tsv", "files": file_hashes([self.path], read),
                "columns": list(self.columns) if self.columns else None}

    def __iter__(self) -> Iterator[Pair]:
        # str.split("\t") is what csv.reader(delimiter="\t", quoting=QUOTE_NONE) does with
        # no escape character, except that csv would also end a row at a stray \r.
        lines = Lines(self.path)
        rows = iter(lines)
        first = next(rows).split("\t")
        # A header is matched without its byte-order mark and in any case ("DE", "de").
        columns, header = self._resolve([cell.removeprefix(BOM).strip().casefold()
                                         for cell in first])
        width = len(first)
        if not header:
            yield self._pair(first, columns, 1, width)
        for text in rows:
            yield self._pair(text.split("\t"), columns, lines.number, width)
        self.sha256 = lines.sha256

    def _resolve(self, first: list[str]) -> tuple[tuple[int, int], bool]:
        header = all(lang.casefold() in first for lang in self.langs)
        wanted = self.columns or (self.langs if header else ("0", "1"))
        indexes = []
        for name in (name.casefold() for name in wanted):
            if name.isdigit():
                indexes.append(int(name))
            elif name in first:
                indexes.append(first.index(name))
                header = True
            else:
                raise NMTError(f"{self.path}:1: no column named '{name}' in the header "
                               f"({', '.join(first)}); name a column or give its 0-based index")
        return (indexes[0], indexes[1]), header

    def _pair(self, cells: list[str], columns: tuple[int, int], number: int,
              width: int) -> Pair:
        need = max(columns)
        if len(cells) <= need:
            raise NMTError(f"{self.path}:{number}: has {len(cells)} column(s) but column {need} "
                           "(0-based) is needed; is the file tab-separated?")
        if len(cells) > width and not self.extra_columns:
            raise NMTError(f"{self.path}:{number}: has {len(cells)} cells but the first row has "
                           f"{width}: a tab inside a sentence would shift the columns; fix the "
                           "row, or pass --extra-columns if the extra cells are meant")
        return None, cells[columns[0]], cells[columns[1]]
