"""Scoring translations with sacreBLEU (BLEU, chrF, BLEU by source length), and
`evaluate_run`: decode a split of a trained run, score it, dump its attention."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import sacrebleu

from nmt.align.extract import dump_split_alignments
from nmt.core.errors import NMTError
from nmt.core.progress import counting
from nmt.core.rundir import RunDir, replace_text
from nmt.data.folder import sha256_file
from nmt.data.pin import scoring_split
from nmt.decoding.api import load
from nmt.decoding.engines import engine_label
from nmt.models.opus import NO_CORPUS
from nmt.models.published import is_published
from nmt.models.runs import checkpoint_path

LENGTH_BUCKETS = ((1, 10), (10, 20), (20, 30), (30, 40), (40, 10_000))


def bleu_chrf(hyps: list[str], refs: list[str]) -> dict:
    """Corpus BLEU and chrF (sacreBLEU defaults: cased, 13a tokenisation) with signatures."""
    bleu = sacrebleu.metrics.BLEU(force=True)  # synthetic text is tokenised by design
    chrf = sacrebleu.metrics.CHRF()
    b, c = bleu.corpus_score(hyps, [refs]), chrf.corpus_score(hyps, [refs])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2),
            "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}


def bleu_by_length(sources: list[str], hyps: list[str], refs: list[str]) -> list[dict]:
    """BLEU per source-length bucket in words (Bahdanau et al. 2015, Figure 2)."""
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

    return evaluate_model(load(run_path), split, beam, limit, align)


def evaluate_model(model, split: str, beam: int | None = None, limit: int = 0,
                   align: bool = True, write: bool = True) -> dict:
    """Decode a split of the corpus of `model` (an `nmt.decoding.api.Model`: one run or an
    ensemble, on its engine), score it and, with `write`, save hyps/<split>.txt, the
    attention of the split and the entry in the run's scores.json. The entry names the
    engine; only PyTorch in float32 writes: the run's own figures stay its own. A published
    model's folder (`nmt publish`, or the Hub's cache) is never written: its stamp would
    no longer hold."""

    cfg, vocab, module = model.cfg, model.vocab, model.module
    if cfg.data.corpus == NO_CORPUS:
        raise NMTError(f"{model.path}: a model trained elsewhere (OPUS-MT) has no corpus here "
                       "to evaluate on; `nmt compare runs/NAME MODEL` shows its attention and "
                       "AER on a run's split, `nmt translate` gives its translations to score")
    run = RunDir(model.path)
    sources, refs, scored = scoring_split(cfg, model.path, split)
    src_ids = vocab.encode_src(sources)
    if limit:
        sources, refs, src_ids = sources[:limit], refs[:limit], src_ids[:limit]
    beam = beam or cfg.decode.beam
    tick = time.perf_counter()
    with counting(len(src_ids), f"decoding {split}"):  # a bar on a terminal
        nbest, _ = model.engine.nbest(src_ids, cfg.decode, beam)
        hyps = [vocab.decode_tgt(h[0][0]) for h in nbest]
    seconds = time.perf_counter() - tick
    entry = {**bleu_chrf(hyps, refs), "beam": beam, "sentences": len(hyps),
             "sentences_per_s": round(len(hyps) / max(seconds, 1e-9), 2),
             "engine": engine_label(model.engine), "data": scored,
             "by_length": bleu_by_length(sources, hyps, refs)}
    if not write or entry["engine"] != "pytorch" or is_published(model.path):
        return entry
    # Which weights scored it: `nmt publish` cards only the entries of the checkpoint it
    # publishes (a later `evaluate --checkpoint last` must not label the best one).
    entry["checkpoint"] = model.checkpoint
    entry["checkpoint_sha256"] = sha256_file(checkpoint_path(model.path, model.checkpoint))
    run.hyps.mkdir(parents=True, exist_ok=True)
    replace_text(run.hyps / f"{split}.txt", "".join(h + "\n" for h in hyps))
    if align and module.has_attention:
        with counting(len(src_ids), f"aligning {split}"):
            entry["alignment"] = dump_split_alignments(
                module, vocab, src_ids, vocab.encode_tgt(refs), run.align / f"{split}.npz", cfg)
    run.write_scores(split, entry)
    return entry
