"""Collect attention from a model into `AlignmentRecord`s (teacher-forced).

Forced mode runs the decoder on a given target (a reference, or the model's own
translation for free mode: in eval mode the attention it computes is exactly
the one search saw). Row t of a raw matrix is the step that *predicts* target
piece t (the last row predicts EOS); columns are source pieces plus EOS.

Word-level matrices (`word_weights`) come from one reading of the raw weights
(nmt.align.words.reading): RNN families have one map; for the Transformer the
default is the mean over every layer and head, read naively like every family
(`alignment_reading`); the "shifted" reading of Chen et al. (2020), target piece t
read at the step whose *input* is piece t (row t + 1), is an option.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from nmt.align.attribution import saliency_weights
from nmt.align.guided import reading_of
from nmt.align.io import load_gold, save_alignments, write_links
from nmt.align.metrics import alignment_summary
from nmt.align.names import ATTENTION, SALIENCY
from nmt.align.records import AlignmentRecord
from nmt.align.spans import GoldWords
from nmt.align.words import (
    join_pieces,
    links_from_matrix,
    pieces_to_words,
    record_matrix,
    word_matrix,
)
from nmt.core.config import Config
from nmt.core.errors import NMTError
from nmt.core.progress import tick
from nmt.core.tokens import BOS, EOS, EOS_PIECE
from nmt.data.batching import pad
from nmt.data.pin import gold_of
from nmt.data.subwords import Vocab
from nmt.models.base import Seq2Seq


@torch.no_grad()
def forced_weights(model: Seq2Seq, src_ids: list, tgt_ids: list, batch_size: int = 32,
                   full_context: bool = False) -> list[np.ndarray]:
    """Raw attention (L, H, T+1, S) per pair; src ids end in EOS, tgt ids do not;
    `full_context`: the model's `full_context_attention` (guided.full_context)."""
    if not model.has_attention:
        raise NMTError("this run's model (fixed_context) has no attention to export: the "
                       "whole source is one vector, which is the point of that baseline")
    model.eval()
    out: list[np.ndarray] = [None] * len(src_ids)  # type: ignore[list-item]
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        device = next(model.parameters()).device
        src = pad([list(src_ids[i]) for i in chunk]).to(device)
        tgt_in = pad([list(tgt_ids[i]) for i in chunk], prefix=BOS).to(device)
        _, attn, _ = model(src, tgt_in, need_attn=True, full_context=full_context)
        attn = attn.cpu()
        for row, i in enumerate(chunk):
            T, S = len(tgt_ids[i]) + 1, len(src_ids[i])
            out[i] = attn[row, :, :, :T, :S].float().numpy()
        tick(len(chunk))  # sentences done, for a progress bar (nmt.core.progress)
    return out


def make_record(index: int, vocab: Vocab, src: list[int], tgt: list[int], weights: np.ndarray,
                shifted: bool | None = None, layer: int | None = None,
                meta: dict | None = None, links: str = "argmax",
                threshold: float = 0.0, heads: int | None = None,
                null: bool = False, gold: GoldWords | None = None) -> AlignmentRecord:
    """Subword weights plus their word-level reduction and hard links (`links`: argmax or
    threshold, nmt.align.words.links_from_matrix). `null` (a guided run taught the NULL
    word, guided.null_word): the links come from the map that keeps the source EOS as a word,
    and a target word whose argmax (or threshold) lands there gets no link. `gold`: the
    pair's words are a gold's tokens, each piece going to those it covers (nmt.align.spans);
    otherwise "▁" starts a word."""
    src_pieces = vocab.src_pieces([i for i in src if i != EOS])
    tgt_pieces = vocab.tgt_pieces(list(tgt))
    if gold is not None:
        src_words, tgt_words, word_of = gold.src_words, gold.tgt_words, gold.word_of
    else:
        src_words = join_pieces(src_pieces, pieces_to_words(src_pieces))
        tgt_words, word_of = join_pieces(tgt_pieces, pieces_to_words(tgt_pieces)), None
    read = dict(shifted=shifted, layer=layer, heads=heads, word_of=word_of)
    words = word_matrix(weights, src_pieces, tgt_pieces, **read)
    if null:
        with_null = word_matrix(weights, src_pieces, tgt_pieces, null=null, **read)
        found = {(i, j) for i, j in links_from_matrix(with_null, links, threshold)
                 if i < words.shape[1]}
    else:
        found = links_from_matrix(words, links, threshold)
    return AlignmentRecord(
        index=index, src_tokens=src_pieces + [EOS_PIECE], tgt_tokens=tgt_pieces + [EOS_PIECE],
        weights=weights, src_words=src_words, tgt_words=tgt_words, word_weights=words,
        links=sorted(found), meta=dict(meta or {}), word_of=word_of)


def reread(rec: AlignmentRecord, shifted: bool | None = None, layer: int | None = None
           ) -> AlignmentRecord:
    """`rec` with its word map and argmax links recomputed from its saved raw weights, so a
    record saved under an earlier default follows the reading asked for now."""
    words = record_matrix(rec, shifted, layer)
    return dataclasses.replace(rec, word_weights=words, links=sorted(links_from_matrix(words)))


# How alignments are read from a model, by name: the one list of methods (the CLI, the
# config of `nmt align`, the server and its page take their names from here). Each gives
# the raw (L, H, T+1, S) weights of every pair; make_record turns them into words and links.
METHODS = {
    ATTENTION: forced_weights,
    SALIENCY: lambda model, src_ids, tgt_ids, full_context=False: saliency_weights(
        model, src_ids, tgt_ids),
}
DEFAULT_METHOD = ATTENTION


def method_for(model: Seq2Seq) -> str:
    """The method a model is read with by default: its attention, or saliency without."""
    return DEFAULT_METHOD if model.has_attention else SALIENCY


def default_shifted(model: Seq2Seq, method: str, shifted: bool | None) -> bool:
    """The reading of `method`'s matrices: attention follows the family's own default
    (`model.alignment_reading`; naive for every family, measured for the Transformer)
    unless `shifted` is given; attributions have one row per predicted piece and are
    always read naively."""
    if method != DEFAULT_METHOD:
        if shifted:
            raise NMTError(f"--reading shifted applies to attention only; {method} rows "
                           "already belong to the piece they predict: drop --reading")
        return False
    return model.alignment_reading == "shifted" if shifted is None else shifted


def collect(model: Seq2Seq, vocab: Vocab, src_ids: list, tgt_ids: list,
            method: str = DEFAULT_METHOD, shifted: bool | None = None,
            full_context: bool = False, weights: list | None = None,
            gold: list | None = None, **kwargs) -> list[AlignmentRecord]:
    """Forced matrices of every pair as records (subword and word level, hard links):
    `method` "attention" (the model's weights; `full_context`: without the decoder's
    causal mask, guided.full_context) or "saliency" (nmt.align.attribution);
    `meta["method"]` records which. `weights` (one (L, H, T+1, S) array per pair): maps a
    decoding engine already returned (nmt.decoding.engines), read the same way. `gold`
    (one `GoldWords` per pair): the words are a gold's tokens (nmt.align.spans)."""
    if method not in METHODS:
        raise NMTError(f"unknown alignment method {method!r}; use one of {', '.join(METHODS)}")
    if weights is None:
        weights = METHODS[method](model, src_ids, tgt_ids, full_context=full_context)
    shifted = default_shifted(model, method, shifted)
    kwargs["meta"] = {**kwargs.get("meta", {}), "method": method}
    gold = gold or [None] * len(src_ids)
    return [make_record(i, vocab, list(s), list(t), w, shifted=shifted, gold=g, **kwargs)
            for i, (s, t, w, g) in enumerate(zip(src_ids, tgt_ids, weights, gold))]


def dump_split_alignments(model: Seq2Seq, vocab: Vocab, src_ids: list, tgt_ids: list,
                          path: Path, cfg: Config) -> dict:
    """Forced attention of a whole split, saved in the `nmt align` format, plus its
    summary (AER against `<split>.gold` when the corpus has one, as the synthetic does)."""

    records = collect(model, vocab, src_ids, tgt_ids, **reading_of(cfg),
                      meta={"mode": "forced", "family": cfg.model.family, "run": cfg.name})
    save_alignments(path, records)
    write_links(path.with_suffix(".links"), records)
    gold = gold_of(cfg, path.stem)
    entries = load_gold(gold, records, prefix=True) if gold is not None else None  # --limit
    return alignment_summary(records, entries)


def dump_training_alignments(model: Seq2Seq, vocab: Vocab, src_ids: list, tgt_ids: list,
                             path: Path, step: int) -> Path | None:
    """Attention of a few validation sentences at one training step (align/steps/)."""
    if not model.has_attention:
        return None
    records = collect(model, vocab, src_ids, tgt_ids, meta={"mode": "forced", "step": step})
    save_alignments(path, records)
    return path
