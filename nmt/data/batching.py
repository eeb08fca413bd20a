"""Length-bucketed batches under a token budget, padded with PAD = 0."""

from __future__ import annotations

import random
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
    return np.flatnonzero((s > 1) & (s <= max_len + 1) & (t > 0) & (t <= max_len))


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

    def lengths(self) -> np.ndarray:
        """Every example's length from the pairs' lengths (a source run loses an EOS per
        joint)."""
        total = np.add.reduceat(lengths_of(self.side)[self.order], self.starts[:-1])
        return total - (np.diff(self.starts) - 1) if self.source else total


def join_pairs(src, tgt, indices, most: int, seed: int) -> tuple[Joined, Joined]:
    """Longer training examples: the pairs at `indices`, shuffled, cut into runs of 1..`most`
    (sizes drawn uniformly), each run joined into one pair. Every pair is used once; only
    the last source of a run keeps its EOS, so a joined source reads as one sentence."""
    order = [int(i) for i in indices]
    rng = random.Random(seed)
    rng.shuffle(order)
    starts = [0]
    while starts[-1] < len(order):
        starts.append(min(starts[-1] + rng.randint(1, most), len(order)))
    order_arr, starts_arr = np.asarray(order, np.int64), np.asarray(starts, np.int64)
    return Joined(src, order_arr, starts_arr, True), Joined(tgt, order_arr, starts_arr, False)


def token_batches(lengths, batch_tokens: int, seed: int | None, indices=None
                  ) -> list[list[int]]:
    """Group indices into batches whose padded size (B * max len) stays under the budget.

    `lengths`: (n, 2) source and target lengths (`pair_lengths`, or a list of pairs).
    Pairs are sorted by length (with random tie-breaking when `seed` is given) so
    batches carry little padding; batch order is shuffled with the same seed.
    """
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
    order = (np.arange(len(lengths)) if indices is None
             else np.asarray(indices, dtype=np.int64).reshape(-1))
    rng = random.Random(seed)
    noise = (np.fromiter((rng.random() for _ in range(len(order))), float, len(order))
             if seed is not None else np.zeros(len(order)))
    src, tgt = lengths[order, 0], lengths[order, 1]
    sort = np.lexsort((noise, src, tgt))  # stable: ties keep the order of `indices`
    order = order[sort]
    widths = np.maximum(src[sort], tgt[sort] + 1).tolist()
    cuts, count, longest = [0], 0, 0
    for k, width in enumerate(widths):
        size = max(longest, width)
        if count and size * (count + 1) > batch_tokens:
            cuts.append(k)
            count, size = 0, width
        count += 1
        longest = size
    cuts.append(len(widths))
    batches = [order[a:b].tolist() for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    if seed is not None:
        rng.shuffle(batches)
    return batches


def iterate_batches(src: list[np.ndarray], tgt: list[np.ndarray], batches: list[list[int]],
                    guides: list | None = None):
    for idx in batches:
        yield collate([src[i] for i in idx], [tgt[i] for i in idx],
                      None if guides is None else [guides[i] for i in idx])
