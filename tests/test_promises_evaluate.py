"""Promises of nmt/decoding/evaluate.py: every setting the printed sacreBLEU signatures claim holds
for the scores themselves (cased, 13a tokenisation, exponential smoothing, one reference,
chrF with character 6-grams and no word n-grams), and BLEU by source length uses word
buckets with the stated boundaries and the same settings."""

from __future__ import annotations

import math

import pytest

from nmt.decoding.evaluate import bleu_by_length, bleu_chrf


def _fields(signature: str) -> dict[str, str]:
    return dict(part.split(":", 1) for part in signature.split("|"))


def test_the_signatures_claim_the_default_settings():
    """nmt.decoding.evaluate:bleu_chrf — "sacreBLEU defaults: cased, 13a tokenisation" with
    signatures: one reference, mixed case, 13a, exp smoothing; chrF: 6 character n-grams,
    no word n-grams (chrF, not chrF++), whitespace ignored."""
    out = bleu_chrf(["a dog runs ."], ["a dog runs ."])
    bleu, chrf = _fields(out["bleu_signature"]), _fields(out["chrf_signature"])
    assert {k: bleu[k] for k in ("nrefs", "case", "tok", "smooth", "eff")} == {
        "nrefs": "1", "case": "mixed", "tok": "13a", "smooth": "exp", "eff": "no"}
    assert {k: chrf[k] for k in ("nrefs", "case", "nc", "nw", "space")} == {
        "nrefs": "1", "case": "mixed", "nc": "6", "nw": "0", "space": "no"}
    assert out["bleu"] == 100.0 and out["chrf"] == 100.0


def test_scores_are_case_sensitive():
    """nmt.decoding.evaluate:bleu_chrf — case:mixed: a hypothesis differing only in case scores
    below a perfect one in BLEU and in chrF."""
    refs = ["The Dog runs over The Green Meadow"]
    same, lower = bleu_chrf(refs, refs), bleu_chrf([refs[0].lower()], refs)
    assert lower["bleu"] < same["bleu"] == 100.0
    assert lower["chrf"] < same["chrf"] == 100.0


def test_bleu_tokenises_with_13a():
    """nmt.decoding.evaluate:bleu_chrf — tok:13a splits punctuation off words, so "meadow." and
    "meadow ." are the same tokens (with no tokenisation they would not be)."""
    out = bleu_chrf(["a dog runs over the meadow."], ["a dog runs over the meadow ."])
    assert out["bleu"] == 100.0


def test_bleu_smooths_exponentially_by_hand():
    """nmt.decoding.evaluate:bleu_chrf — smooth:exp: a missing 4-gram match gives precision
    1 / (2 * count) instead of zero. hyp "the cat sat on mat", ref "the cat sat in mat":
    precisions 4/5, 2/4, 1/3 and (no match) 1/(2*2); same length, so no brevity penalty."""
    out = bleu_chrf(["the cat sat on mat"], ["the cat sat in mat"])
    expected = 100 * math.exp((math.log(4 / 5) + math.log(2 / 4) + math.log(1 / 3)
                               + math.log(1 / 4)) / 4)
    assert out["bleu"] == pytest.approx(round(expected, 2), abs=0.006)
    assert round(out["bleu"], 2) == out["bleu"] and round(out["chrf"], 2) == out["chrf"]


def test_both_scores_are_sacrebleus_to_two_decimals():
    """nmt.decoding.evaluate:bleu_chrf — the scores users compare across tools: sacreBLEU's corpus
    BLEU and chrF, each rounded to two decimals (not one: this pair's scores differ in the
    second decimal)."""
    import sacrebleu

    hyps, refs = ["the cat sat on mat", "a dog runs"], ["the cat sat in mat", "the dog ran"]
    bleu = sacrebleu.metrics.BLEU(force=True).corpus_score(hyps, [refs]).score
    chrf = sacrebleu.metrics.CHRF().corpus_score(hyps, [refs]).score
    assert round(bleu, 1) != round(bleu, 2) and round(chrf, 1) != round(chrf, 2)
    out = bleu_chrf(hyps, refs)
    assert (out["bleu"], out["chrf"]) == (round(bleu, 2), round(chrf, 2)) == (33.78, 53.64)


def test_bleu_is_corpus_level_not_a_mean_of_sentences():
    """nmt.decoding.evaluate:bleu_chrf — "Corpus BLEU": n-gram counts are summed over sentences
    (a perfect sentence plus a zero one is not the mean of 100 and 0)."""
    hyps = ["a b c d e f g h", "x"]
    refs = ["a b c d e f g h", "y"]
    out = bleu_chrf(hyps, refs)
    # 1-grams 8/9; 2-, 3- and 4-grams all from sentence 1: 7/7, 6/6, 5/5; 9 vs 9 tokens
    assert out["bleu"] == pytest.approx(100 * (8 / 9) ** 0.25, abs=0.006)  # not 50


def test_bleu_by_length_buckets_words_with_the_stated_boundaries():
    """nmt.decoding.evaluate:bleu_by_length — buckets of source length in words: 1-9, 10-19, 20-29,
    30-39, 40+ (a 10-word source is in 10-19, a 40-word one in 40+), empty buckets left
    out, each bucket scored with the same settings as bleu_chrf."""
    lengths = [9, 10, 19, 20, 40, 45]
    sources = [" ".join(["w"] * n) for n in lengths]
    hyps = ["a b c d", "a b c d", "a b c x", "The cat", "a b c d e", "a b c d e"]
    refs = ["a b c d", "a b c e", "a b c x", "the cat", "a b c d e", "a b c d f"]
    rows = bleu_by_length(sources, hyps, refs)
    assert [(r["bucket"], r["sentences"]) for r in rows] == [
        ("1-9", 1), ("10-19", 2), ("20-29", 1), ("40+", 2)]
    groups = [[0], [1, 2], [3], [4, 5]]
    for row, idx in zip(rows, groups):
        alone = bleu_chrf([hyps[i] for i in idx], [refs[i] for i in idx])["bleu"]
        assert row["bleu"] == alone
    assert rows[2]["bleu"] < 100.0  # cased, as bleu_chrf
