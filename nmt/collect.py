"""Collect attention from a model into `AlignmentRecord`s (teacher-forced).

Forced mode runs the decoder on a given target (a reference, or the model's own
translation for free mode: in eval mode the attention it computes is exactly
the one search saw). Row t of a raw matrix is the step that *predicts* target
piece t (the last row predicts EOS); columns are source pieces plus EOS.

Word-level matrices (`word_weights`) come from one reading of the raw weights:
RNN families have one map. For the Transformer the default is the "shifted"
reading of Chen et al. (2020): target piece t is read at the step whose *input*
is piece t (row t + 1), averaged over the heads of one layer.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from nmt.alignment import (
    AlignmentRecord,
    check_links_in_range,
    format_pharaoh,
    join_pieces,
    links_from_matrix,
    pieces_to_words,
    read_gold,
    reduce_to_words,
    save_alignments,
)
from nmt.data.batching import pad
from nmt.data.subwords import BOS, EOS, Vocab
from nmt.errors import NMTError
from nmt.models.base import Seq2Seq


@torch.no_grad()
def forced_weights(model: Seq2Seq, src_ids: list, tgt_ids: list, batch_size: int = 32
                   ) -> list[np.ndarray]:
    """Raw attention (L, H, T+1, S) per pair; src ids end in EOS, tgt ids do not."""
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
        _, attn = model(src, tgt_in, need_attn=True)  # (B, L, H, T, S)
        attn = attn.cpu()
        for row, i in enumerate(chunk):
            T, S = len(tgt_ids[i]) + 1, len(src_ids[i])
            out[i] = attn[row, :, :, :T, :S].float().numpy()
    return out


def reading(weights: np.ndarray, shifted: bool | None = None, layer: int | None = None
            ) -> np.ndarray:
    """One (T', S) map per target piece from raw (L, H, T+1, S) weights.

    Single-map families: the map without its EOS row. Multi-layer/head models:
    head average of `layer` (default: the penultimate layer), `shifted` by default.
    """
    L, H = weights.shape[:2]
    if L == 1 and H == 1 and not shifted:
        return weights[0, 0, :-1]
    layer = (L - 2 if L > 1 else 0) if layer is None else layer
    if not -L <= layer < L:
        raise NMTError(f"--layer {layer}: the model has {L} decoder layers (0..{L - 1})")
    mean = weights[layer].mean(0)  # (T+1, S)
    shifted = (L > 1 or H > 1) if shifted is None else shifted
    return mean[1:] if shifted else mean[:-1]


def word_matrix(weights: np.ndarray, src_pieces: list[str], tgt_pieces: list[str],
                shifted: bool | None = None, layer: int | None = None) -> np.ndarray:
    """Word-level (T_word, S_word) map of one reading; the EOS column is dropped."""
    src_word_of = pieces_to_words(src_pieces) + [-1]
    return reduce_to_words(reading(weights, shifted, layer), pieces_to_words(tgt_pieces),
                           src_word_of)


def make_record(index: int, vocab: Vocab, src: list[int], tgt: list[int], weights: np.ndarray,
                shifted: bool | None = None, layer: int | None = None,
                meta: dict | None = None, method: str = "argmax",
                threshold: float = 0.0) -> AlignmentRecord:
    """Subword weights plus their word-level reduction and argmax links."""
    src_pieces = vocab.src_pieces([i for i in src if i != EOS])
    tgt_pieces = vocab.tgt_pieces(list(tgt))
    src_word_of, tgt_word_of = pieces_to_words(src_pieces), pieces_to_words(tgt_pieces)
    words = word_matrix(weights, src_pieces, tgt_pieces, shifted, layer)
    return AlignmentRecord(
        index=index, src_tokens=src_pieces + ["</s>"], tgt_tokens=tgt_pieces + ["</s>"],
        weights=weights, src_words=join_pieces(src_pieces, src_word_of),
        tgt_words=join_pieces(tgt_pieces, tgt_word_of), word_weights=words,
        links=sorted(links_from_matrix(words, method, threshold)), meta=dict(meta or {}))


def collect(model: Seq2Seq, vocab: Vocab, src_ids: list, tgt_ids: list,
            indices: list[int] | None = None, **kwargs) -> list[AlignmentRecord]:
    weights = forced_weights(model, src_ids, tgt_ids)
    indices = list(range(len(src_ids))) if indices is None else indices
    return [make_record(i, vocab, list(s), list(t), w, **kwargs)
            for i, s, t, w in zip(indices, src_ids, tgt_ids, weights)]


def dump_split_alignments(model: Seq2Seq, vocab: Vocab, src_ids: list, tgt_ids: list,
                          path: Path, cfg) -> dict:
    """Forced attention of a whole split, saved in the `nmt align` format, plus its
    summary (AER against `<split>.gold` when the corpus has one, as the synthetic does)."""
    records = collect(model, vocab, src_ids, tgt_ids,
                      meta={"mode": "forced", "family": cfg.model.family, "run": cfg.name})
    save_alignments(path, records)
    path.with_suffix(".links").write_text(
        "".join(format_pharaoh(r.links) + "\n" for r in records), encoding="utf-8")
    gold_path = Path(cfg.data.root) / cfg.data.corpus / cfg.data.pair / f"{path.stem}.gold"
    gold = None
    if gold_path.is_file():
        gold = read_gold(gold_path)[:len(records)]  # evaluate --limit decodes a prefix
        check_links_in_range(gold, [len(r.src_words) for r in records],
                             [len(r.tgt_words) for r in records], gold_path)
    return alignment_summary(records, gold)


def dump_training_alignments(trainer, n: int) -> Path | None:
    """Attention of the first `n` validation sentences at this step (align/steps/)."""
    from nmt import distributed

    model = trainer.model
    if not model.has_attention or not distributed.is_main():
        return None
    d = trainer.data
    path = trainer.run.align / "steps" / f"step{trainer.progress.step:08d}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    records = collect(model, d.vocab, d.valid_src[:n], d.valid_tgt[:n],
                      meta={"mode": "forced", "step": trainer.progress.step})
    save_alignments(path, records)
    return path


def alignment_summary(records: list[AlignmentRecord], gold: list | None = None) -> dict:
    """Mean attention entropy (nats per target word), mass on EOS, and AER when gold exists.

    The diagonal baseline's AER is reported beside the model's so a low AER has context.
    """
    from nmt.alignment import alignment_error_rate, attention_entropy, diagonal_links

    summary = {
        "sentences": len(records),
        "entropy": float(np.mean([attention_entropy(r.word_weights) for r in records])),
        "eos_mass": float(np.mean([_eos_mass(r) for r in records])),
    }
    if gold is not None:
        links = [set(map(tuple, r.links)) for r in records]
        diagonal = [diagonal_links(len(r.src_words), len(r.tgt_words)) for r in records]
        scores = alignment_error_rate(links, gold)
        summary.update(aer=scores["aer"], precision=scores["precision"],
                       recall=scores["recall"],
                       diagonal_aer=alignment_error_rate(diagonal, gold)["aer"])
    return summary


def _eos_mass(record: AlignmentRecord) -> float:
    """Mean weight the subword-level map puts on the source EOS column."""
    matrix = record.weights.mean(axis=(0, 1))[:-1]  # (T, S), EOS row dropped
    return float(matrix[:, -1].mean()) if matrix.size else 0.0
