"""Decoding a split or free text, and scoring it with sacreBLEU (BLEU, chrF)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from nmt.config import DecodeConfig
from nmt.data.batching import pad
from nmt.data.subwords import EOS, Vocab
from nmt.models.base import Seq2Seq
from nmt.search import beam_search, greedy

MAX_SOURCE = 1000  # longer inputs are cut to this many subwords before decoding
LENGTH_BUCKETS = ((1, 10), (10, 20), (20, 30), (30, 40), (40, 10_000))


def decode_batch(model: Seq2Seq, src: torch.Tensor, cfg: DecodeConfig, beam: int,
                 n_best: int = 1) -> list[list[tuple[list[int], float]]]:
    """n-best (ids, score) per sentence; beam 1 runs greedy search."""
    if beam == 1 and n_best == 1:
        return [[(ids, 0.0)] for ids in greedy(model, src, cfg.max_len_ratio, cfg.max_len_offset)]
    hyps = beam_search(model, src, beam, cfg.length_penalty, cfg.max_len_ratio,
                       cfg.max_len_offset, n_best)
    return [[(h.tokens, h.score) for h in sentence] for sentence in hyps]


def translate_nbest(model: Seq2Seq, vocab: Vocab, src_ids: list, cfg: DecodeConfig,
                    beam: int | None = None, n_best: int = 1
                    ) -> list[list[tuple[str, float]]]:
    """Translate encoded sentences in length-sorted batches, returned in input order.

    An empty source (EOS only) gives an empty translation, so lines stay aligned.
    """
    beam = beam or cfg.beam
    model.eval()
    out: list[list[tuple[str, float]]] = [[("", 0.0)] for _ in src_ids]
    todo = sorted((i for i, s in enumerate(src_ids) if len(s) > 1), key=lambda i: len(src_ids[i]))
    for start in range(0, len(todo), cfg.batch_size):
        chunk = todo[start:start + cfg.batch_size]
        seqs = [_clip(src_ids[i]) for i in chunk]
        src = pad(seqs).to(next(model.parameters()).device)
        for i, hyps in zip(chunk, decode_batch(model, src, cfg, beam, n_best)):
            out[i] = [(vocab.decode_tgt(ids), score) for ids, score in hyps]
    return out


def _clip(ids) -> list[int]:
    ids = list(ids)
    return ids if len(ids) <= MAX_SOURCE else ids[:MAX_SOURCE - 1] + [EOS]


def translate_ids(model: Seq2Seq, vocab: Vocab, src_ids: list, cfg: DecodeConfig,
                  beam: int | None = None) -> list[str]:
    return [nbest[0][0] for nbest in translate_nbest(model, vocab, src_ids, cfg, beam)]


def bleu_chrf(hyps: list[str], refs: list[str]) -> dict:
    """Corpus BLEU and chrF (sacreBLEU defaults: cased, 13a tokenisation) with signatures."""
    import sacrebleu

    bleu = sacrebleu.metrics.BLEU(force=True)  # synthetic text is tokenised by design
    chrf = sacrebleu.metrics.CHRF()
    b, c = bleu.corpus_score(hyps, [refs]), chrf.corpus_score(hyps, [refs])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2),
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}


def bleu_by_length(sources: list[str], hyps: list[str], refs: list[str]) -> list[dict]:
    """BLEU per source-length bucket in words (Bahdanau et al. 2015, Figure 2)."""
    import sacrebleu

    bleu = sacrebleu.metrics.BLEU(force=True)  # same settings as bleu_chrf
    rows = []
    lengths = np.array([len(s.split()) for s in sources])
    for low, high in LENGTH_BUCKETS:
        idx = np.nonzero((lengths >= low) & (lengths < high))[0]
        if len(idx) == 0:
            continue
        score = bleu.corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]]).score
        label = f"{low}-{high - 1}" if high < 10_000 else f"{low}+"
        rows.append({"bucket": label, "sentences": len(idx), "bleu": round(score, 2)})
    return rows


def evaluate_run(run_path: Path, split: str, beam: int | None = None,
                 limit: int = 0, align: bool = True) -> dict:
    """Decode a split of the run's corpus, write hyps/scores.json, dump its attention."""
    from nmt.collect import dump_split_alignments
    from nmt.data.corpora import load_split
    from nmt.run import RunDir, load_run

    cfg, vocab, model, _ = load_run(run_path)
    run = RunDir(run_path)
    sources, refs = load_split(Path(cfg.data.root), cfg.data.corpus, cfg.data.pair, split)
    src_ids = vocab.encode_src(sources)
    if limit:
        sources, refs, src_ids = sources[:limit], refs[:limit], src_ids[:limit]
    beam = beam or cfg.decode.beam
    tick = time.perf_counter()
    hyps = translate_ids(model, vocab, src_ids, cfg.decode, beam)
    seconds = time.perf_counter() - tick
    run.hyps.mkdir(parents=True, exist_ok=True)
    (run.hyps / f"{split}.txt").write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    entry = {**bleu_chrf(hyps, refs), "beam": beam, "sentences": len(hyps),
             "sentences_per_s": round(len(hyps) / max(seconds, 1e-9), 2),
             "by_length": bleu_by_length(sources, hyps, refs)}
    if align and model.has_attention:
        entry["alignment"] = dump_split_alignments(model, vocab, src_ids, vocab.encode_tgt(refs),
                                                   run.align / f"{split}.npz", cfg)
    run.write_scores(split, entry)
    return entry
