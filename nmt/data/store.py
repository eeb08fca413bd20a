"""The encoded store: each split of a corpus as flat, memory-mapped token arrays.

One folder per split and vocabulary, `<vocab>/<split>.<checksum>/`, named by the split's
text files' sha256 (a changed file gets a new store). The digests are taken in the pass
that encodes (`source.json` records them), so a store holds the text its name says even
when the files are replaced while it is written; opening a store checks its record against
the digests the caller pinned (docs/data.md, "The run's data"). Per side, `src.npy`/`tgt.npy` hold
every sentence's ids one after another and `src_off.npy`/`tgt_off.npy` (int64, n + 1)
where each starts: sentence i is `flat[off[i]:off[i + 1]]`. The token dtype is uint16 when
the side's vocabulary has at most 65,536 pieces, int32 otherwise. Arrays are opened with
read-only shared maps (`Ragged`), so every process on the machine shares their pages
through the page cache, and a trainer drops its mappings after each batch (`release`): its
RSS holds what one batch reads, not every page an epoch has touched.

The store is written whole or not at all: chunks of lines are streamed from the text
files, encoded (by a pool of worker processes above PARALLEL_PAIRS pairs), appended to the
arrays in a private folder, and the folder is renamed into place under a lock. The workers
are spawned, so a script that encodes a large split guards its entry point with
`if __name__ == "__main__":`, as multiprocessing requires; a worker re-running an
unguarded script stops at `encode_split`, and the writer names the guard.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import multiprocessing
import os
import shutil
import signal
import sys
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import BinaryIO

import numpy as np

from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.locks import file_lock, signals_held
from nmt.core.progress import counting, tick
from nmt.core.scratch import die_with_parent, scratch, swap_in, sweep
from nmt.data.corpora import LiveCorpus, iter_lines
from nmt.data.folder import BLOCK, HashedLines
from nmt.data.ragged import (  # noqa: F401 - the store's reading side, named here too
    SIDES,
    SOURCE,
    Ragged,
    _blocks,
    _fits,
    _map,
    built_from,
    lengths_of,
    open_store,
)
from nmt.data.subwords import Vocab

PARALLEL_PAIRS = 200_000  # splits with more pairs are encoded by worker processes
CHUNK_LINES = 10_000  # lines per encoding task
WORKERS = max(1, min(os.cpu_count() or 1, 8))  # encoding processes above PARALLEL_PAIRS


def token_dtype(vocab_size: int) -> np.dtype:
    """The documented rule: uint16 while every id fits (<= 65,536 pieces), else int32."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.int32)


def scan(path: Path) -> tuple[str, int]:
    """A text file's sha256 and its line count (as `read_lines` splits it), streamed."""
    digest, lines, last = hashlib.sha256(), 0, b"\n"
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
            lines += block.count(b"\n")
            last = block[-1:]
    return digest.hexdigest(), lines + (last != b"\n")


def split_digest(src_sha: str, tgt_sha: str) -> str:
    """A split's short name: 12 hex digits of the hash of its two files' sha256."""
    return hashlib.sha256(src_sha.encode() + tgt_sha.encode()).hexdigest()[:12]


def encode_split(cfg: Config, vocab_dir: Path, split: str) -> tuple[Ragged, Ragged]:
    return encode_files(LiveCorpus.of(cfg).paths(split), vocab_dir, split)  # as imported


def encode_files(paths: tuple[Path, Path], vocab_dir: Path, split: str,
                 vocab: Vocab | None = None) -> tuple[Ragged, Ragged]:
    """The encoded (source, target) store of a split's two text files, built once per text
    and vocabulary in `vocab_dir` (`vocab`: the models there, when already loaded); a
    damaged or ill-fitting store is named on stderr and encoded again. The store is named
    by the digests of the bytes its encoding read; files replaced between the lookup and
    the encoding are a one-line error, and nothing is filed under the old name."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):  # what spawn checks
        raise SystemExit(f"encoding {split}: this is a worker process re-running a script "
                         "whose top level encodes or trains; put it under `if __name__ == "
                         "\"__main__\":` (docs/data.md)")
    (src_sha, n), (tgt_sha, m) = scan(paths[0]), scan(paths[1])
    if n != m:
        raise NMTError(f"{paths[0]} has {n} lines but {paths[1]} has {m}; parallel files "
                       "must have one line per sentence pair")
    if not n:
        raise NMTError(f"{paths[0]}: the corpus is empty")
    store = vocab_dir / f"{split}.{split_digest(src_sha, tgt_sha)}"
    vocab = vocab or Vocab.from_dir(vocab_dir)
    sides, problem = open_store(store, n, vocab, (src_sha, tgt_sha))
    if sides is not None:
        return sides
    if problem:
        print(f"{store}: {problem}; encoding {split} again", file=sys.stderr)
    with file_lock(vocab_dir / f".{split}.lock"):  # another process may be writing it
        sides, _ = open_store(store, n, vocab, (src_sha, tgt_sha))
        if sides is None:
            _write_store(store, paths, n, vocab, split, (src_sha, tgt_sha))
            sides, problem = open_store(store, n, vocab, (src_sha, tgt_sha))
            if sides is None:
                raise NMTError(f"{store}: {problem} right after writing it; check the disk")
    return sides


def _write_store(store: Path, paths: tuple[Path, Path], count: int, vocab: Vocab,
                 split: str, source: tuple[str, str]) -> None:
    dtypes = (token_dtype(vocab.src_size), token_dtype(vocab.tgt_size))
    read: list[HashedLines] = []
    chunks = encoded_chunks(paths, vocab, dtypes, count >= PARALLEL_PAIRS, read)
    write_store(store, chunks, count, dtypes, f"encoding {split}",
                lambda: _as_read(read, paths, source))
    store.with_name(f"{store.name}.npz").unlink(missing_ok=True)  # an older version's


def _as_read(read: list[HashedLines], paths: tuple[Path, Path], expected: tuple) -> tuple:
    """The digests of the bytes an encoding pass read, which must be those it looked up:
    files replaced half-way (a re-import) are refused rather than filed under a wrong key."""
    digests = tuple(lines.finish() for lines in read)
    if digests != tuple(expected):
        raise NMTError(f"{paths[0]}: the split's files changed while they were being encoded "
                       "(a re-import?); nothing was kept: run the command again")
    return digests


def write_store(store: Path, chunks: Iterable[tuple[np.ndarray, ...]], count: int,
                dtypes: tuple, label: str, source=None) -> None:
    """Write `count` pairs' encoded chunks ((src ids, src lengths, tgt ids, tgt lengths),
    in order) into a private folder, then rename it to `store` in one step; the caller
    holds the store's lock. `source`: called once the chunks are read, it returns the
    sha256 of the text they were read from (recorded in `source.json`), or raises to keep
    nothing. A killed writer's scratch folder is removed by the next one."""
    for stale in store.parent.glob(f"{store.name}.tmp*"):  # an older version's, pid-named
        shutil.rmtree(stale, ignore_errors=True)
    sweep(store.parent, store.name)
    try:
        with scratch(store) as tmp:
            _fill(tmp, store, chunks, count, dtypes, label, source)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:  # a generator's workers stop now, not when it is collected
            close()


def _fill(tmp: Path, store: Path, chunks, count: int, dtypes: tuple, label: str,
          source) -> None:
    """write_store's arrays, written into `tmp` and swapped in at `store`."""
    writers = [(_NpyWriter(tmp / f"{side}.npy", dtype), _Offsets(tmp / f"{side}_off.npy"))
               for side, dtype in zip(SIDES, dtypes)]
    with counting(count, label):
        for chunk in chunks:
            for (tokens, offsets), (flat, lengths) in zip(writers, (chunk[:2], chunk[2:])):
                tokens.append(flat)
                offsets.append(lengths)
            tick(len(chunk[1]))
    for tokens, offsets in writers:
        tokens.close()
        offsets.close()
    if source is not None:
        (tmp / SOURCE).write_text(json.dumps({"sha256": list(source())}) + "\n",
                                  encoding="utf-8")
    swap_in(tmp, store)  # a damaged store is left in tmp, removed with it


def sampled_chunks(paths: tuple[Path, Path], vocab: Vocab, keep: np.ndarray, alpha: float,
                   nbest: int, seed: int, read: list | None = None
                   ) -> Iterator[tuple[np.ndarray, ...]]:
    """`write_store`'s chunks of the pairs at line numbers `keep` (ascending) of the text
    files, each segmented by sampling (Vocab.sample_pairs): chunk c is seeded by `seed`
    and c alone, so writing it again draws the same. Lines are streamed, never held whole."""
    dtypes = (token_dtype(vocab.src_size), token_dtype(vocab.tgt_size))
    wanted = np.zeros(int(keep[-1]) + 1 if len(keep) else 0, dtype=bool)
    wanted[keep] = True
    for c, (src, tgt) in enumerate(_line_chunks(paths, read)):
        rows = np.flatnonzero(wanted[c * CHUNK_LINES:c * CHUNK_LINES + len(src)]).tolist()
        if rows:
            ids = vocab.sample_pairs([src[i] for i in rows], [tgt[i] for i in rows], alpha,
                                     nbest, (seed * 1_000_003 + c) % (2**32 - 1))
            yield (*_flat(ids[0], dtypes[0]), *_flat(ids[1], dtypes[1]))


def _flat(ids: list[list[int]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's sentences as one token array and their lengths."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum()))
    return flat, lengths


def encoded_chunks(paths: tuple[Path, Path], vocab: Vocab, dtypes: tuple, parallel: bool,
                   read: list | None = None) -> Iterator[tuple[np.ndarray, ...]]:
    """(src tokens, src lengths, tgt tokens, tgt lengths) of each chunk of lines, in order;
    `parallel`: encoded by a spawned pool, at most two chunks per worker in flight; a
    worker that dies (or cannot start) is a one-line NMTError, not a hang. `read` gets the
    files' HashedLines (their digests once read)."""
    chunks = _line_chunks(paths, read)
    if not parallel:
        for src, tgt in chunks:
            yield encode_chunk(vocab, src, tgt, dtypes)
        return
    workers = WORKERS
    pool = ProcessPoolExecutor(workers, multiprocessing.get_context("spawn"), _start_worker,
                               (tuple(map(str, vocab.paths)), dtypes, os.getpid()))
    finished = False
    try:
        waiting: deque = deque()
        for src, tgt in chunks:
            with signals_held():  # a submit may launch a worker: never cut mid-launch
                waiting.append(pool.submit(_worker_chunk, src, tgt))
            if len(waiting) >= 2 * workers:
                yield waiting.popleft().result()
        while waiting:
            yield waiting.popleft().result()
        finished = True
    except BrokenProcessPool:
        raise NMTError(f"{paths[0]}: an encoding worker process stopped before its chunk was "
                       "done (out of memory, killed, or a script without the `if __name__ == "
                       "\"__main__\":` guard that spawned workers need: docs/data.md)") from None
    finally:
        if not finished:  # stopped early (an error, a signal, the reader closed us): the
            for process in list((pool._processes or {}).values()):  # workers are killed
                process.kill()  # now, not waited for (concurrent.futures has no public way)
        pool.shutdown(wait=True, cancel_futures=True)


def encode_chunk(vocab: Vocab, src: list[str], tgt: list[str], dtypes: tuple
                 ) -> tuple[np.ndarray, ...]:
    return (*_flat(vocab.encode_src(src), dtypes[0]), *_flat(vocab.encode_tgt(tgt), dtypes[1]))


_WORKER: dict = {}  # a pool worker's vocabulary and dtypes


def _start_worker(models: tuple[str, str], dtypes: tuple, parent: int) -> None:
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the group: the parent
    _WORKER["vocab"], _WORKER["dtypes"] = Vocab(Path(models[0]), Path(models[1])), dtypes


def _worker_chunk(src: list[str], tgt: list[str]) -> tuple[np.ndarray, ...]:
    return encode_chunk(_WORKER["vocab"], src, tgt, _WORKER["dtypes"])


def _line_chunks(paths: tuple[Path, Path], read: list | None = None
                 ) -> Iterator[tuple[list[str], list[str]]]:
    """Lists of CHUNK_LINES source and target lines, read in lockstep (never a whole file);
    `read` gets the two files' HashedLines, whose digests are of the bytes read."""
    with open(paths[0], "rb") as src_file, open(paths[1], "rb") as tgt_file:
        hashed = HashedLines(src_file), HashedLines(tgt_file)
        if read is not None:
            read.extend(hashed)
        pairs = zip(iter_lines(hashed[0], paths[0]), iter_lines(hashed[1], paths[1]))
        while chunk := list(itertools.islice(pairs, CHUNK_LINES)):
            yield [s for s, _ in chunk], [t for _, t in chunk]
        for lines in hashed:
            lines.finish()  # a longer file's rest, while it is still open


class _NpyWriter:
    """A 1-D .npy file written by appending chunks; the header, whose size does not depend
    on the length for any length a disk holds, is written last."""

    def __init__(self, path: Path, dtype: np.dtype):
        self.dtype, self.count = np.dtype(dtype), 0
        self.handle: BinaryIO = open(path, "wb")
        self.size = self._header(0)  # rewritten by close() with the length

    def _header(self, length: int) -> int:
        self.handle.seek(0)
        np.lib.format.write_array_header_1_0(self.handle, {
            "descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
            "shape": (length,)})
        return self.handle.tell()

    def append(self, values: np.ndarray) -> None:
        self.handle.write(np.ascontiguousarray(values, dtype=self.dtype).tobytes())
        self.count += len(values)

    def close(self) -> None:
        end = self.handle.tell()
        if self._header(self.count) != self.size:  # pragma: no cover - 10**50 tokens
            raise NMTError(f"{self.handle.name}: header size changed; report this")
        self.handle.seek(end)
        self.handle.close()


class _Offsets(_NpyWriter):
    """The offsets of a side (int64, n + 1), appended from each chunk's lengths."""

    def __init__(self, path: Path):
        super().__init__(path, np.dtype(np.int64))
        self.end = 0
        super().append(np.zeros(1, np.int64))

    def append(self, lengths: np.ndarray) -> None:
        ends = self.end + np.cumsum(lengths, dtype=np.int64)
        if len(ends):
            self.end = int(ends[-1])
        super().append(ends)
