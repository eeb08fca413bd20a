"""Length-bucketed batches under a token budget, padded with PAD = 0."""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from nmt.core.tokens import BOS, EOS, PAD


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



def filter_long(src: list[np.ndarray], tgt: list[np.ndarray], max_len: int) -> list[int]:
    """Indices of pairs whose sides are non-empty and at most `max_len` subwords."""
    return [i for i, (s, t) in enumerate(zip(src, tgt))
            if 1 < len(s) <= max_len + 1 and 0 < len(t) <= max_len]


def join_pairs(src: list[np.ndarray], tgt: list[np.ndarray], indices: list[int], most: int,
               seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Longer training examples: the pairs at `indices`, shuffled, cut into runs of 1..`most`
    (sizes drawn uniformly), each run joined into one pair. Every pair is used once; only
    the last source of a run keeps its EOS, so a joined source reads as one sentence."""
    order = list(indices)
    rng = random.Random(seed)
    rng.shuffle(order)
    joined_src, joined_tgt, start = [], [], 0
    while start < len(order):
        run = order[start:start + rng.randint(1, most)]
        start += len(run)
        joined_src.append(np.concatenate([src[i][:-1] for i in run[:-1]] + [src[run[-1]]]))
        joined_tgt.append(np.concatenate([tgt[i] for i in run]))
    return joined_src, joined_tgt


def token_batches(lengths: list[tuple[int, int]], batch_tokens: int, seed: int | None,
                  indices: list[int] | None = None) -> list[list[int]]:
    """Group indices into batches whose padded size (B * max len) stays under the budget.

    Pairs are sorted by length (with random tie-breaking when `seed` is given) so
    batches carry little padding; batch order is shuffled with the same seed.
    """
    order = list(range(len(lengths))) if indices is None else list(indices)
    rng = random.Random(seed)
    noise = {i: rng.random() for i in order} if seed is not None else {i: 0.0 for i in order}
    order.sort(key=lambda i: (lengths[i][1], lengths[i][0], noise[i]))
    batches, current, longest = [], [], 0
    for i in order:
        size = max(longest, lengths[i][0], lengths[i][1] + 1)
        if current and size * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, size = [], max(lengths[i][0], lengths[i][1] + 1)
        current.append(i)
        longest = size
    if current:
        batches.append(current)
    if seed is not None:
        rng.shuffle(batches)
    return batches


def iterate_batches(src: list[np.ndarray], tgt: list[np.ndarray], batches: list[list[int]],
                    guides: list | None = None):
    for idx in batches:
        yield collate([src[i] for i in idx], [tgt[i] for i in idx],
                      None if guides is None else [guides[i] for i in idx])
