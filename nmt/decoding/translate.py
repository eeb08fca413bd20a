"""Batched decoding to text: length-sorted batches, n-best lists, source clipping."""

from __future__ import annotations

import torch

from nmt.core.config import DecodeConfig
from nmt.core.progress import tick
from nmt.core.tokens import EOS
from nmt.data.batching import pad
from nmt.data.subwords import Vocab
from nmt.decoding.search import beam_search, greedy, sample
from nmt.models.base import Seq2Seq

MAX_SOURCE = 1000  # longer inputs are cut to this many subwords before decoding


def decode_batch(model: Seq2Seq, src: torch.Tensor, cfg: DecodeConfig, beam: int,
                 n_best: int = 1, sampling=None) -> list[list[tuple[list[int], float]]]:
    """n-best (ids, score) per sentence; beam 1 runs greedy search; `sampling`
    (nmt.decoding.api.Sampling) draws one translation per sentence instead."""
    if sampling is not None:
        return [[hyp] for hyp in sample(model, src, cfg.max_len_ratio, cfg.max_len_offset,
                                        sampling.top_k, sampling.top_p, sampling.temperature,
                                        sampling.seed)]
    if beam == 1 and n_best == 1:
        return [[(ids, 0.0)] for ids in greedy(model, src, cfg.max_len_ratio, cfg.max_len_offset)]
    hyps = beam_search(model, src, beam, cfg.length_penalty, cfg.max_len_ratio,
                       cfg.max_len_offset, n_best)
    return [[(h.tokens, h.score) for h in sentence] for sentence in hyps]


def nbest_ids(model: Seq2Seq, src_ids: list, cfg: DecodeConfig, beam: int | None = None,
              n_best: int = 1, sampling=None) -> list[list[tuple[list[int], float]]]:
    """The search's own n-best (target ids without BOS/EOS, score) per sentence, decoded
    in length-sorted batches and returned in input order; with `sampling`
    (nmt.decoding.api.Sampling), one sample per sentence, from a stream seeded by
    sampling.seed and the sentence (the same in any batch, chunk or company).

    An empty source (EOS only) gives one empty hypothesis, so lines stay aligned.
    """
    beam = beam or cfg.beam
    model.eval()
    device = next(model.parameters()).device
    return by_length(src_ids, cfg.batch_size, lambda seqs: decode_batch(
        model, pad(seqs).to(device), cfg, beam, n_best, sampling),
        empty=lambda: [([], 0.0)])


def by_length(src_ids: list, batch_size: int, decode, empty) -> list:
    """`decode(sources)` over length-sorted batches of `batch_size` sources (each cut by
    `clip_source`), one result per source in input order; an empty source (EOS only) is
    not decoded and gets `empty()`. Ticks a progress bar (nmt.core.progress).

    `decode` returns the batch's results, or a callable that waits for them: an engine
    whose workers decode batches side by side (CTranslate2's) is handed every batch
    before the first is awaited."""
    out = [empty() if len(s) <= 1 else None for s in src_ids]
    todo = sorted((i for i, s in enumerate(src_ids) if len(s) > 1), key=lambda i: len(src_ids[i]))
    tick(len(src_ids) - len(todo))  # sentences done
    pending = []
    for start in range(0, len(todo), batch_size):
        chunk = todo[start:start + batch_size]
        results = decode([clip_source(src_ids[i]) for i in chunk])
        if callable(results):
            pending.append((chunk, results))
            continue
        _store(out, chunk, results)
    for chunk, wait in pending:
        _store(out, chunk, wait())
    return out


def _store(out: list, chunk: list, results: list) -> None:
    for i, result in zip(chunk, results, strict=True):
        out[i] = result
    tick(len(chunk))


def clip_source(ids: list[int]) -> list[int]:
    """Cut a source (ids ending in EOS) to MAX_SOURCE subwords, keeping its EOS."""
    ids = list(ids)
    return ids if len(ids) <= MAX_SOURCE else ids[:MAX_SOURCE - 1] + [EOS]


def translate_ids(model: Seq2Seq, vocab: Vocab, src_ids: list, cfg: DecodeConfig,
                  beam: int | None = None) -> list[str]:
    """The best translation of each encoded source, as text."""
    return [vocab.decode_tgt(hyps[0][0]) for hyps in nbest_ids(model, src_ids, cfg, beam)]


