"""Scoring alignments: AER (Och & Ney 2003), the diagonal baseline, entropy and EOS mass.

These numbers describe attention weights; they do not prove what a model uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from nmt.align.records import AlignmentRecord
from nmt.core.errors import NMTError
from nmt.data.links import GoldAlignment, Link


def alignment_error_rate(
    predicted: Sequence[set[Link]], gold: Sequence[GoldAlignment]
) -> dict[str, float | int]:
    """Corpus-level precision, recall and AER (Och & Ney 2003), counts summed over sentences.

    precision = |A∩P| / |A|,  recall = |A∩S| / |S|,
    AER = 1 - (|A∩S| + |A∩P|) / (|A| + |S|).
    Zero denominators: precision = 0.0 if |A| = 0, recall = 0.0 if |S| = 0, and
    AER = 0.0 if |A| + |S| = 0 (nothing to predict and nothing predicted).
    """
    if len(predicted) != len(gold):
        raise NMTError(
            f"{len(predicted)} predicted alignments but {len(gold)} gold lines; "
            "align every sentence of the gold test set"
        )
    n_a = n_s = n_p = n_as = n_ap = 0
    for pred, g in zip(predicted, gold):
        a = set(pred)
        n_a += len(a)
        n_s += len(g.sure)
        n_p += len(g.possible)
        n_as += len(a & g.sure)
        n_ap += len(a & g.possible)
    return {
        "precision": n_ap / n_a if n_a else 0.0,
        "recall": n_as / n_s if n_s else 0.0,
        "aer": 1.0 - (n_as + n_ap) / (n_a + n_s) if n_a + n_s else 0.0,
        "sentences": len(gold),
        "predicted": n_a,
        "sure": n_s,
        "possible": n_p,
        "predicted_and_sure": n_as,
        "predicted_and_possible": n_ap,
    }


def attention_entropy(matrix: np.ndarray) -> float:
    """Mean row entropy in nats, H_j = -sum_i p_ji log p_ji over nonzero p (each row is first
    renormalised to sum to 1); all-zero rows are skipped; 0.0 if there are no rows."""
    a = np.clip(np.nan_to_num(np.asarray(matrix, dtype=np.float64)), 0.0, None)
    if a.ndim != 2:
        raise ValueError(f"attention matrix must be 2-D (T, S), got shape {a.shape}")
    total = a.sum(axis=1)
    a = a[total > 0] / total[total > 0, None]
    if a.shape[0] == 0:
        return 0.0
    logs = np.log(a, out=np.zeros_like(a), where=a > 0)
    return float(np.mean(-(a * logs).sum(axis=1)))


def mass_on(matrix: np.ndarray, columns: Sequence[int]) -> float:
    """Mean over target rows of the attention mass on ``columns``: mean_j sum_{i in C} A[j, i]
    (e.g. columns=[-1] for the EOS column); 0.0 for a matrix without rows."""
    a = np.asarray(matrix, dtype=np.float64)
    if a.shape[0] == 0:
        return 0.0
    bad = [c for c in columns if not -a.shape[1] <= c < a.shape[1]]
    if bad:
        raise ValueError(f"columns {bad} out of range for a matrix with {a.shape[1]} columns")
    cols = sorted({c % a.shape[1] for c in columns})
    return float(a[:, cols].sum(axis=1).mean())


def diagonal_links(src_len: int, tgt_len: int) -> set[Link]:
    """Diagonal baseline: target j is linked to source round(j * (S-1) / max(T-1, 1))."""
    if src_len <= 0 or tgt_len <= 0:
        return set()
    scale = (src_len - 1) / max(tgt_len - 1, 1)
    return {(min(math.floor(j * scale + 0.5), src_len - 1), j) for j in range(tgt_len)}


def alignment_summary(records: list[AlignmentRecord], gold: list | None = None) -> dict:
    """Mean attention entropy (nats per target word), mass on EOS, and AER when gold exists.

    The diagonal baseline's AER is reported beside the model's so a low AER has context.
    """
    summary = {
        "sentences": len(records),
        "entropy": float(np.mean([attention_entropy(r.word_weights) for r in records])),
        "eos_mass": float(np.mean([eos_mass(r) for r in records])),
    }
    if gold is not None:
        links = [set(map(tuple, r.links)) for r in records]
        diagonal = [diagonal_links(len(r.src_words), len(r.tgt_words)) for r in records]
        scores = alignment_error_rate(links, gold)
        summary.update(aer=scores["aer"], precision=scores["precision"],
                       recall=scores["recall"],
                       diagonal_aer=alignment_error_rate(diagonal, gold)["aer"])
    return summary


def eos_mass(record: AlignmentRecord) -> float:
    """Mean weight the subword-level map (head and layer average) puts on the source EOS."""
    return mass_on(record.weights.mean(axis=(0, 1))[:-1], [-1])  # EOS row dropped
