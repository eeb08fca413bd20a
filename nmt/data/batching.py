"""Length-bucketed batches under a token budget, padded with PAD = 0."""

from __future__ import annotations

import random
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from nmt.core.tokens import BOS, EOS, PAD
from nmt.data.store import lengths_of


@dataclass
class Batch:
    src: torch.Tensor  # (B, S) source ids ending in EOS, PAD after
    tgt_in: torch.Tensor  # (B, T) BOS + target ids
    tgt_out: torch.Tensor  # (B, T) target ids + EOS
    guide: torch.Tensor | None = None  # (B, T, S) teacher targets (guided alignment)

    def to(self, device: torch.device) -> Batch:
        if self.src.device == device:
            return self
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device),
                     None if self.guide is None else self.guide.to(device))

    @property
    def n_tokens(self) -> int:
        return int((self.tgt_out != PAD).sum())


def pad(seqs: list[np.ndarray] | list[list[int]], prefix: int | None = None,
        suffix: int | None = None) -> torch.Tensor:
    """Stack sequences into a (B, L) PAD-filled tensor, optionally adding BOS/EOS."""
    extra = (prefix is not None) + (suffix is not None)
    width = max(len(s) for s in seqs) + extra
    out = torch.full((len(seqs), width), PAD, dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids = ([prefix] if prefix is not None else []) + list(seq)
        ids += [suffix] if suffix is not None else []
        out[row, :len(ids)] = torch.as_tensor(ids, dtype=torch.long)
    return out


def collate(src: list[np.ndarray], tgt: list[np.ndarray], guides: list | None = None
            ) -> Batch:
    """A padded batch; `guides`: each pair's (T+1, S) teacher targets or None
    (nmt.align.guided), padded with zeros to (B, T, S)."""
    batch = Batch(src=pad(src), tgt_in=pad(tgt, prefix=BOS), tgt_out=pad(tgt, suffix=EOS))
    if guides is not None:
        batch.guide = pad_guides(guides, batch.tgt_out.size(1), batch.src.size(1))
    return batch


def pad_guides(guides: list, tgt_width: int, src_width: int) -> torch.Tensor:
    """(B, T, S) zero-padded teacher targets of a batch (None: a zero matrix)."""
    out = torch.zeros(len(guides), tgt_width, src_width)
    for row, g in enumerate(guides):
        if g is not None:
            out[row, :g.shape[0], :g.shape[1]] = torch.from_numpy(g)
    return out


def pair_lengths(src, tgt) -> np.ndarray:
    """(n, 2) source and target lengths of the pairs (a store's from its offsets)."""
    return np.stack([lengths_of(src), lengths_of(tgt)], axis=1)


def filter_long(src, tgt, max_len: int) -> np.ndarray:
    """Indices of pairs whose sides are non-empty and at most `max_len` subwords."""
    s, t = lengths_of(src), lengths_of(tgt)
    keep = np.flatnonzero((s > 1) & (s <= max_len + 1) & (t > 0) & (t <= max_len))
    return keep.astype(np.int32) if len(s) < 2**31 else keep


class Joined:
    """One side of `join_pairs`' examples as a view: example j joins the pairs
    `order[starts[j]:starts[j + 1]]` of `side` when it is read (nothing is copied)."""

    def __init__(self, side, order: np.ndarray, starts: np.ndarray, source: bool):
        self.side, self.order, self.starts, self.source = side, order, starts, source

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, j: int) -> np.ndarray:
        run = self.order[self.starts[j]:self.starts[j + 1]]
        if not self.source:
            return np.concatenate([self.side[i] for i in run])
        return np.concatenate([self.side[i][:-1] for i in run[:-1]] + [self.side[run[-1]]])

    def __iter__(self):
        return (self[j] for j in range(len(self)))

    def release(self) -> None:
        if hasattr(self.side, "release"):
            self.side.release()

    def lengths(self) -> np.ndarray:
        """Every example's length from the pairs' lengths (a source run loses an EOS per
        joint)."""
        total = np.add.reduceat(lengths_of(self.side)[self.order], self.starts[:-1])
        return total - (np.diff(self.starts) - 1) if self.source else total


def join_pairs(src, tgt, indices, most: int, seed: int) -> tuple[Joined, Joined]:
    """Longer training examples: the pairs at `indices`, shuffled, cut into runs of 1..`most`
    (sizes drawn uniformly), each run joined into one pair. Every pair is used once; only
    the last source of a run keeps its EOS, so a joined source reads as one sentence."""
    order = array("q")  # 8 bytes a pair, not a list: random.shuffle takes any mutable
    order.frombytes(np.asarray(indices, dtype=np.int64).tobytes())  # sequence, and draws
    rng = random.Random(seed)  # what it drew for the list
    rng.shuffle(order)
    starts = array("q", [0])
    while starts[-1] < len(order):
        starts.append(min(starts[-1] + rng.randint(1, most), len(order)))
    order_arr, starts_arr = np.frombuffer(order, np.int64), np.frombuffer(starts, np.int64)
    return Joined(src, order_arr, starts_arr, True), Joined(tgt, order_arr, starts_arr, False)


class Batches(Sequence):
    """Token batches held as arrays, not lists: `order` holds every pair's index, batch
    after batch; batch k is `order[bounds[k]:bounds[k + 1]]`, and they are read in the
    order `perm`. Item k is a list of pair indices; with `world` > 1 (`shard`), only rows
    `rank`, `rank + world`, ... of each batch (or a stand-in row: `real`). See docs/data.md (memory at scale)."""

    def __init__(self, order: np.ndarray, bounds: np.ndarray, perm: np.ndarray,
                 rank: int = 0, world: int = 1):
        self.order, self.bounds, self.perm = order, bounds, perm
        self.rank, self.world = rank, world

    def __len__(self) -> int:
        return len(self.perm)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        b = int(self.perm[k])
        rows = self.order[self.bounds[b]:self.bounds[b + 1]]
        mine = rows[self.rank::self.world]
        if not len(mine):  # fewer rows than ranks: a stand-in row, trained with weight 0
            mine = rows[self.rank % len(rows):][:1]
        return mine.tolist()

    def real(self, k: int) -> bool:
        """Whether this rank's rows of batch k are its own (False: a stand-in for a batch
        with fewer rows than ranks, whose loss counts 0, so that every rank still steps)."""
        b = int(self.perm[k])
        return self.rank < self.bounds[b + 1] - self.bounds[b]

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(
            a == list(b) for a, b in zip(self, other))

    __hash__ = None

    def __repr__(self) -> str:
        return f"Batches({len(self)} batches, rank {self.rank} of {self.world})"

    def sizes(self) -> np.ndarray:
        """Every batch's number of pairs (whole batches, before sharding), in read order."""
        return np.diff(self.bounds)[self.perm]

    def shard(self, rank: int, world: int) -> Batches:
        """Rank `rank` of `world`: rows rank, rank + world, ... of every batch, so every
        rank steps through the same global batches and every pair is trained once an
        epoch; a rank past a small batch's rows gets a stand-in row (`real` is False)."""
        if world == 1:
            return self
        return Batches(self.order, self.bounds, self.perm, rank, world)


def token_batches(lengths, batch_tokens: int, seed: int | None, indices=None) -> Batches:
    """Group indices into batches whose padded size (B * max len) stays under the budget.

    `lengths`: (n, 2) source and target lengths (`pair_lengths`, or a list of pairs).
    Pairs are sorted by length (with random tie-breaking when `seed` is given) so
    batches carry little padding; batch order is shuffled with the same seed.
    """
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
    index = np.int32 if len(lengths) < 2**31 else np.int64
    order = (np.arange(len(lengths), dtype=index) if indices is None
             else np.asarray(indices, dtype=index).reshape(-1))
    rng = random.Random(seed)
    noise = (np.fromiter((rng.random() for _ in range(len(order))), float, len(order))
             if seed is not None else np.zeros(len(order)))
    src, tgt = lengths[order, 0], lengths[order, 1]
    sort = np.lexsort((noise, src, tgt))  # stable: ties keep the order of `indices`
    del noise
    order = order[sort]
    widths = np.maximum(src[sort], tgt[sort] + 1)
    del src, tgt, sort
    bounds = np.asarray(_cuts(widths, batch_tokens), dtype=np.int64)
    perm = list(range(len(bounds) - 1))
    if seed is not None:
        rng.shuffle(perm)  # draws depend on the length only: the same as shuffling the lists
    return Batches(order, bounds, np.asarray(perm, dtype=np.int64))


def _cuts(widths: np.ndarray, batch_tokens: int) -> list[int]:
    """Where the sorted pairs are cut: a batch grows while (rows + 1) * its widest row
    stays within the budget (one row always fits). Walks the runs of equal widths, so
    its cost grows with the distinct widths and the batches rather than the pairs."""
    cuts, count, longest = [0], 0, 0
    change = np.flatnonzero(np.diff(widths)) + 1
    starts = np.concatenate([[0], change]).tolist()
    stops = np.concatenate([change, [len(widths)]]).tolist()
    for a, b, width in zip(starts, stops, widths[starts].tolist()):
        k = a
        while k < b:
            size = max(longest, width)
            if count and size * (count + 1) > batch_tokens:
                cuts.append(k)
                count, size = 0, width
            room = max(batch_tokens // size - count, 1)  # rows that still fit at `size`
            take = min(room, b - k)
            count += take
            k += take
            longest = size
    cuts.append(len(widths))
    return cuts


def iterate_batches(src, tgt, batches, guides: list | None = None):
    """Each batch of pair indices collated; a store's sides then `release` the pages they
    were read from (nmt.data.store), so reading an epoch does not map the whole store."""
    for idx in batches:
        batch = collate([src[i] for i in idx], [tgt[i] for i in idx],
                        None if guides is None else [guides[i] for i in idx])
        for side in (src, tgt):
            if hasattr(side, "release"):
                side.release()
        yield batch
