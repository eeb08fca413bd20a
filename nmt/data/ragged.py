"""Reading an encoded store (nmt.data.store writes them): its arrays as shared read-only
maps, checked to hold a split's pairs within the vocabulary and, given the digests a run
pinned, to have been built from that text (docs/data.md, "The run's data")."""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from nmt.core.errors import one_line

SIDES = ("src", "tgt")
SOURCE = "source.json"  # the sha256 of the text files a store was built from, as read


class Ragged:
    """Sentences of one side as a flat token array and its offsets (n + 1): `len`, an int
    index gives sentence i as an int32 array, a slice gives a view of the same arrays.
    `maps`: the shared file maps the arrays view (`release`); `folder`: the store's."""

    def __init__(self, flat: np.ndarray, offsets: np.ndarray, maps: tuple = (),
                 folder: Path | None = None):
        self.flat, self.offsets, self.maps, self.folder = flat, offsets, maps, folder

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError("a Ragged slice takes every sentence (step 1)")
            return Ragged(self.flat, self.offsets[start:max(stop, start) + 1], self.maps,
                          self.folder)
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"sentence {i} of {len(self)}")
        return np.asarray(self.flat[self.offsets[i]:self.offsets[i + 1]], dtype=np.int32)

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def lengths(self) -> np.ndarray:
        """Every sentence's length (int64), from the offsets alone."""
        return np.diff(self.offsets)

    def release(self) -> None:
        """Unmap the pages this process has read (madvise DONTNEED; the arrays stay valid):
        they stay in the page cache, and the next read maps them again."""
        for mapped in self.maps:
            if hasattr(mmap, "MADV_DONTNEED"):  # not on Windows
                mapped.madvise(mmap.MADV_DONTNEED)


def lengths_of(side) -> np.ndarray:
    """The lengths of a side's sentences: a store's from its offsets, a list's one by one."""
    if hasattr(side, "lengths"):
        return np.asarray(side.lengths(), dtype=np.int64)
    return np.fromiter((len(s) for s in side), dtype=np.int64, count=len(side))


def open_store(store: Path, count: int, vocab, source: tuple[str, str] | None = None
               ) -> tuple[tuple | None, str]:
    """((source, target), "") when `store` holds `count` pairs of ids within the vocabulary
    (`vocab`: anything with src_size and tgt_size) and, given `source` (the text files'
    sha256), records that it was built from that text;
    (None, why not) otherwise ("" when there is no store at all)."""
    if not store.is_dir():
        return None, ""
    if source is not None and (made := built_from(store)) != tuple(source):
        return None, ("unreadable (its source.json)" if made is None and (store / SOURCE).exists()
                      else "records no source digest (an older version's)" if made is None else
                      f"was built from other text (sha256 {made[0][:12]}/{made[1][:12]}, "
                      f"not {source[0][:12]}/{source[1][:12]})")
    sides = []
    for side, size in zip(SIDES, (vocab.src_size, vocab.tgt_size)):
        try:
            flat, offsets = _map(store / f"{side}.npy"), _map(store / f"{side}_off.npy")
            fits = _fits(flat, offsets, count, size)
        except (OSError, ValueError, EOFError) as exc:  # missing, cut, not an array
            return None, f"unreadable ({one_line(exc)})"
        if not fits:
            return None, f"does not hold this split's {count:,} encoded pairs"
        sides.append(Ragged(flat.array, offsets.array,
                            tuple(m.map for m in (flat, offsets) if m.map is not None), store))
    return (sides[0], sides[1]), ""


def built_from(store: Path) -> tuple[str, str] | None:
    """The sha256 of the (source, target) text a store recorded it was built from."""
    try:
        record = json.loads((store / SOURCE).read_text(encoding="utf-8"))
        return record["sha256"][0], record["sha256"][1]
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None


class _Mapped(NamedTuple):
    path: Path
    start: int  # where the values begin in the file
    array: np.ndarray  # read-only, a view of `map`
    map: mmap.mmap | None  # None for an empty array


def _map(path: Path) -> _Mapped:
    """A 1-D .npy file (header read by numpy.lib.format) as a view of a shared read-only
    map of the file."""
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                  else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = header(handle)
        start = handle.tell()
        if len(shape) != 1 or fortran:
            raise ValueError(f"{path.name} holds a {len(shape)}-D array, not 1-D")
        size = os.fstat(handle.fileno()).st_size
        if start + shape[0] * dtype.itemsize > size:
            raise ValueError(f"{path.name} is cut short")
        if not shape[0]:
            return _Mapped(path, start, np.zeros(0, dtype), None)
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    return _Mapped(path, start, np.frombuffer(mapped, dtype, shape[0], start), mapped)


def _fits(flat: _Mapped, offsets: _Mapped, count: int, size: int) -> bool:
    """Whether the arrays are `count` sentences of ids below `size` (not another version's
    file or a hand's edit); read block by block from the files."""
    tokens, ends = flat.array, offsets.array
    if not (len(ends) == count + 1 and np.issubdtype(tokens.dtype, np.integer)
            and np.issubdtype(ends.dtype, np.integer)):
        return False
    last = None
    for block in _blocks(offsets):  # from 0, never falling, to the number of tokens
        if (block[0] != 0 if last is None else block[0] < last) or (np.diff(block) < 0).any():
            return False
        last = block[-1]
    if last != len(tokens):
        return False
    return all(block.min() >= 0 and block.max() < size for block in _blocks(flat))


def _blocks(mapped: _Mapped, rows: int = 1 << 22) -> Iterator[np.ndarray]:
    """A mapped array's values in blocks, read from its file rather than through the map,
    so a check leaves none of its pages in this process's memory."""
    dtype = mapped.array.dtype
    left = mapped.array.nbytes
    with open(mapped.path, "rb") as handle:
        handle.seek(mapped.start)
        while left > 0 and (block := handle.read(min(left, rows * dtype.itemsize))):
            left -= len(block)
            yield np.frombuffer(block, dtype=dtype)
