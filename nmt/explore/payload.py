"""The explorer's data: word-level matrices per sentence and panel, quantised and compact.

Every matrix is word level, (T_word, S_word), on one colour scale 0..1, stored as uint8
(round(255 * w), clipped to 0..255) and base64; all views of one panel and sentence are
concatenated row-major in one string that the page decodes only when it shows the sentence.

Views. A single-map set (RNN families, attributions, link sets) has one view: the saved
`word_weights` (or the 0/1 matrix of its links). A multi-layer/head set (the Transformer)
has one view per reading (naive, shifted) x decoder layer x head (head slot 0 = the head
average, slot h + 1 = head h), computed with the project's reading and word reduction
(`nmt.align.words.word_matrix`); view index = offset + (r * L + l) * (H + 1) + slot, where
offset = 1 when the saved matrix matches none of them and is kept as view 0.

AER (Och & Ney 2003) per sentence and view, against the gold when there is gold: the saved
links for the saved view, argmax links of the view's matrix otherwise.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import numpy as np

from nmt.align.metrics import alignment_error_rate
from nmt.align.records import AlignmentRecord
from nmt.align.words import links_from_matrix, word_matrix
from nmt.data.links import GoldAlignment
from nmt.explore.sources import RecordSet, Sources, links_matrix, sentence_words

READINGS = ("naive", "shifted")


@dataclass
class PanelSpec:
    """What the page needs to know about one panel besides its matrices."""

    title: str
    name: str
    method: str
    kind: str  # "soft" (weights) | "links" (hard links shown as 0/1)
    layers: int = 1  # > 1 or heads > 1: the panel has layer/head/reading views
    heads: int = 1
    saved: bool = True  # view 0 is the saved matrix
    default: int = 0  # view shown first

    def to_json(self) -> dict:
        return dict(vars(self))


def variant_matrices(rec: AlignmentRecord) -> list[np.ndarray] | None:
    """Word matrices of every reading x layer x head slot, in view order; None when the
    record has a single map or its pieces do not reduce to its words."""
    n_layers, n_heads = rec.weights.shape[:2]
    if n_layers * n_heads == 1:
        return None
    src, tgt = rec.src_tokens[:-1], rec.tgt_tokens[:-1]  # drop the EOS token
    shape = (len(rec.tgt_words), len(rec.src_words))
    out = []
    try:
        for shifted in (False, True):
            for layer in range(n_layers):
                out.append(word_matrix(rec.weights, src, tgt, shifted, layer,
                                       word_of=rec.word_of))  # head average
                out += [word_matrix(rec.weights[:, h:h + 1], src, tgt, shifted, layer,
                                    word_of=rec.word_of) for h in range(n_heads)]
    except ValueError:
        return None
    return out if all(m.shape == shape for m in out) else None


def panel_spec(rs: RecordSet) -> PanelSpec:
    """Kind and views of a set, from its first record: the default view is the variant that
    reproduces the saved matrix (then the saved one is not stored twice)."""
    spec = PanelSpec(title=rs.title, name=rs.name, method=rs.method,
                     kind="links" if rs.links_only else "soft")
    first = rs.records[min(rs.records)]
    variants = None if rs.links_only else variant_matrices(first)
    if variants is None:
        return spec
    spec.layers, spec.heads = first.weights.shape[:2]
    saved = first.word_weights
    match = next((k for k, m in enumerate(variants) if np.allclose(m, saved, atol=1e-4)), None)
    if match is None:
        spec.saved, spec.default = True, 0
    else:
        spec.saved, spec.default = False, match
    return spec


def quantise(matrices: list[np.ndarray]) -> str:
    """uint8 (0..255 for weights 0..1) of every matrix, concatenated, base64."""
    raw = b"".join(np.clip(np.rint(np.nan_to_num(m) * 255), 0, 255).astype(np.uint8).tobytes()
                   for m in matrices)
    return base64.b64encode(raw).decode("ascii")


def sentence_aer(links: set, gold: GoldAlignment | None) -> float | None:
    return None if gold is None else round(alignment_error_rate([links], [gold])["aer"], 4)


def panel_views(rec: AlignmentRecord, spec: PanelSpec, gold: GoldAlignment | None) -> dict:
    """The matrices (base64) and per-view AER of one record."""
    shape = (len(rec.tgt_words), len(rec.src_words))
    if spec.kind == "links":
        return {"m": quantise([links_matrix(rec.links, shape)]),
                "aer": [sentence_aer(set(rec.links), gold)]}
    views, aer = [], []
    if spec.saved:
        views.append(rec.word_weights)
        aer.append(sentence_aer(set(rec.links), gold))
    if spec.layers * spec.heads > 1:
        variants = variant_matrices(rec)
        if variants is None or len(variants) != 2 * spec.layers * (spec.heads + 1):
            return {"note": "no layer/head weights for this sentence"}
        views += variants
        if gold is not None:
            aer += [sentence_aer(links_from_matrix(m), gold) for m in variants]
    return {"m": quantise(views), "aer": aer if gold is not None else None}


def gold_json(gold: GoldAlignment) -> dict:
    return {"s": sorted(map(list, gold.sure)),
            "p": sorted(map(list, gold.possible - gold.sure))}


def build_payload(sources: Sources, title: str) -> dict:
    """The JSON document the page reads: panels, then one entry per sentence."""
    specs = [panel_spec(rs) for rs in sources.sets]
    sentences = []
    for index, (src, tgt) in sentence_words(sources.sets).items():
        gold = sources.gold.get(index)
        panels = []
        for rs, spec in zip(sources.sets, specs):
            rec = rs.records.get(index)
            if rec is None:
                panels.append({"note": "sentence not in this set"})
            elif (rec.src_words, rec.tgt_words) != (src, tgt):
                panels.append({"note": "other words (a free-mode translation?)"})
            else:
                panels.append(panel_views(rec, spec, gold))
        entry = {"i": index, "src": src, "tgt": tgt, "p": panels}
        if gold is not None:
            entry["gold"] = gold_json(gold)
        sentences.append(entry)
    return {"title": title, "split": sources.split, "readings": list(READINGS),
            "gold": str(sources.gold_path) if sources.gold else None,
            "panels": [s.to_json() for s in specs], "sentences": sentences,
            "notes": sources.notes}
