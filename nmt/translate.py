"""Batched decoding to text: length-sorted batches, n-best lists, source clipping."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TextIO

import torch

from nmt.config import DecodeConfig
from nmt.data.batching import pad
from nmt.data.subwords import Vocab
from nmt.errors import NMTError
from nmt.models.base import Seq2Seq
from nmt.progress import tick
from nmt.search import beam_search, greedy
from nmt.tokens import EOS

MAX_SOURCE = 1000  # longer inputs are cut to this many subwords before decoding
CHUNK_LINES = 1000  # `translate_lines` reads, decodes and yields this many lines at a time


def decode_batch(model: Seq2Seq, src: torch.Tensor, cfg: DecodeConfig, beam: int,
                 n_best: int = 1) -> list[list[tuple[list[int], float]]]:
    """n-best (ids, score) per sentence; beam 1 runs greedy search."""
    if beam == 1 and n_best == 1:
        return [[(ids, 0.0)] for ids in greedy(model, src, cfg.max_len_ratio, cfg.max_len_offset)]
    hyps = beam_search(model, src, beam, cfg.length_penalty, cfg.max_len_ratio,
                       cfg.max_len_offset, n_best)
    return [[(h.tokens, h.score) for h in sentence] for sentence in hyps]


def nbest_ids(model: Seq2Seq, src_ids: list, cfg: DecodeConfig, beam: int | None = None,
              n_best: int = 1) -> list[list[tuple[list[int], float]]]:
    """The search's own n-best (target ids without BOS/EOS, score) per sentence, decoded
    in length-sorted batches and returned in input order.

    An empty source (EOS only) gives one empty hypothesis, so lines stay aligned.
    """
    beam = beam or cfg.beam
    model.eval()
    out: list[list[tuple[list[int], float]]] = [[([], 0.0)] for _ in src_ids]
    todo = sorted((i for i, s in enumerate(src_ids) if len(s) > 1), key=lambda i: len(src_ids[i]))
    tick(len(src_ids) - len(todo))  # sentences done, for a progress bar (nmt.progress)
    for start in range(0, len(todo), cfg.batch_size):
        chunk = todo[start:start + cfg.batch_size]
        seqs = [clip_source(src_ids[i]) for i in chunk]
        src = pad(seqs).to(next(model.parameters()).device)
        for i, hyps in zip(chunk, decode_batch(model, src, cfg, beam, n_best)):
            out[i] = hyps
        tick(len(chunk))
    return out


def translate_nbest(model: Seq2Seq, vocab: Vocab, src_ids: list, cfg: DecodeConfig,
                    beam: int | None = None, n_best: int = 1
                    ) -> list[list[tuple[str, float]]]:
    """`nbest_ids` as text."""
    return [[(vocab.decode_tgt(ids), score) for ids, score in hyps]
            for hyps in nbest_ids(model, src_ids, cfg, beam, n_best)]


def clip_source(ids: list[int]) -> list[int]:
    """Cut a source (ids ending in EOS) to MAX_SOURCE subwords, keeping its EOS."""
    ids = list(ids)
    return ids if len(ids) <= MAX_SOURCE else ids[:MAX_SOURCE - 1] + [EOS]


def translate_ids(model: Seq2Seq, vocab: Vocab, src_ids: list, cfg: DecodeConfig,
                  beam: int | None = None) -> list[str]:
    return [nbest[0][0] for nbest in translate_nbest(model, vocab, src_ids, cfg, beam)]


def translate_lines(model: Seq2Seq, vocab: Vocab, lines: Iterable[str], cfg: DecodeConfig,
                    beam: int | None = None, n_best: int | None = None,
                    chunk: int = CHUNK_LINES) -> Iterator[list[list[tuple[str, float]]]]:
    """Translate a stream of lines `chunk` at a time (length-sorted batches inside each
    chunk), yielding each chunk's n-best lists in input order as soon as it is decoded:
    output starts after the first chunk and memory does not grow with the input.

    `n_best` defaults to `cfg.n_best`, `beam` to `cfg.beam` (at least `n_best`).
    """
    n_best = n_best or cfg.n_best
    if beam is not None and n_best > beam:
        raise NMTError(f"--n-best {n_best} is larger than --beam {beam}; a beam of k keeps "
                       "at most k hypotheses")
    beam = beam or max(cfg.beam, n_best)
    lines = iter(lines)
    while block := list(islice(lines, chunk)):
        yield translate_nbest(model, vocab, vocab.encode_src(block), cfg, beam, n_best)


def write_nbest(chunks: Iterable[list[list[tuple[str, float]]]], out: TextIO,
                n_best: int) -> None:
    """One line per sentence, or `n_best` lines `text<TAB>score` (padded with empty ones),
    flushed after every chunk."""
    for chunk in chunks:
        for nbest in chunk:
            if n_best == 1:
                out.write(nbest[0][0] + "\n")
            else:
                for text, score in nbest + [("", 0.0)] * (n_best - len(nbest)):
                    out.write(f"{text}\t{score:.4f}\n")
        out.flush()
