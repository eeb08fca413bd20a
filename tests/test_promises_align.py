"""Promises of nmt/align's docstrings that no other test pinned: how AER counts links
(sets of (source, target), S ⊆ P, precision against P, recall against S), the edge cases
of entropy, mass, diagonal and hard links, the gold reader's conventions, the summary's
numbers and the teacher's AER."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from nmt.align.attribution import _chunks
from nmt.align.bidirectional import flip_record, symmetrized_records
from nmt.align.extract import forced_weights
from nmt.align.io import load_gold
from nmt.align.metrics import (
    alignment_error_rate,
    alignment_summary,
    attention_entropy,
    diagonal_links,
    eos_mass,
    mass_on,
)
from nmt.align.records import AlignmentRecord
from nmt.align.words import links_from_matrix, reading, word_matrix
from nmt.core.errors import NMTError
from nmt.data.corpora import read_pairs
from nmt.data.links import format_pharaoh, read_gold
from nmt.training.guided import teacher_aer
from tests.conftest import tiny_model
from tests.test_alignment import gold

# ------------------------------------------------------------------------------------ AER


def test_aer_counts_each_predicted_link_once_and_in_source_target_order():
    """nmt.align.metrics:alignment_error_rate — A is a set (a link predicted twice counts
    once) of (source, target) links: the transposed links of an asymmetric gold miss."""
    g = [gold({(0, 1), (2, 0)})]
    twice = alignment_error_rate([[(0, 1), (0, 1), (2, 0)]], g)
    assert twice["predicted"] == 2 and twice["aer"] == 0.0
    flipped = alignment_error_rate([{(1, 0), (0, 2)}], g)
    assert flipped["aer"] == 1.0 and flipped["precision"] == 0.0


def test_aer_takes_precision_against_possible_and_recall_against_sure():
    """nmt.align.metrics:alignment_error_rate — precision = |A∩P|/|A| (S ⊆ P, so a sure hit
    counts there too), recall = |A∩S|/|S|, AER = 1 - (|A∩S| + |A∩P|)/(|A| + |S|). Here
    S = {0-0, 1-1}, P = S ∪ {1-0, 2-2}, A = {0-0, 1-0, 2-1}: |A∩S| = 1, |A∩P| = 2; a
    possible link left unpredicted (2-2) costs nothing."""
    r = alignment_error_rate([{(0, 0), (1, 0), (2, 1)}], [gold({(0, 0), (1, 1)}, {(1, 0), (2, 2)})])
    assert r["precision"] == pytest.approx(2 / 3)
    assert r["recall"] == pytest.approx(1 / 2)
    assert r["aer"] == pytest.approx(1 - 3 / 5)
    assert r["possible"] == 4  # |P| counts the sure links too
    # predicting every possible link: precision 1, recall 1, AER 0 (not penalised for P \ S)
    everything = alignment_error_rate([{(0, 0), (1, 1), (1, 0), (2, 2)}],
                                      [gold({(0, 0), (1, 1)}, {(1, 0), (2, 2)})])
    assert everything["aer"] == 0.0 and everything["precision"] == 1.0


def test_aer_with_gold_of_only_possible_links():
    """nmt.align.metrics:alignment_error_rate — zero denominators: |S| = 0 gives recall 0.0,
    and AER = 1 - |A∩P| / |A| (still defined since |A| > 0)."""
    r = alignment_error_rate([{(0, 0), (1, 1)}], [gold(set(), {(0, 0)})])
    assert r["recall"] == 0.0 and r["precision"] == pytest.approx(0.5)
    assert r["aer"] == pytest.approx(0.5)


def test_gold_reader_conventions(tmp_path: Path):
    """nmt.align.io:read_gold — S ⊆ P (a sure link is also possible), lower-case -s/-p, a
    UTF-8 byte-order mark is ignored, one_based shifts every index down by 1, a link
    listed as both possible and sure is sure; docs/alignment.md: "with Pharaoh gold every
    link is sure"."""
    path = tmp_path / "gold.txt"
    path.write_text("\ufeff0-0 1-2-p 2-1-s 3p3 3-3\n", encoding="utf-8")
    [g] = read_gold(path)
    assert g.sure == {(0, 0), (2, 1), (3, 3)}
    assert g.possible == {(0, 0), (2, 1), (3, 3), (1, 2)}
    path.write_text("1-1 2-3-P\n", encoding="utf-8")
    [one] = read_gold(path, one_based=True)
    assert one.sure == {(0, 0)} and one.possible == {(0, 0), (1, 2)}
    path.write_text("0-0 1-2 2-1\n", encoding="utf-8")  # Pharaoh: every link is sure
    [pharaoh] = read_gold(path)
    assert pharaoh.sure == pharaoh.possible == {(0, 0), (1, 2), (2, 1)}
    aer = alignment_error_rate([{(0, 0), (1, 1)}], [pharaoh])["aer"]
    assert aer == pytest.approx(1 - 2 * 1 / (2 + 3))  # all sure: 1 - 2|A∩S| / (|A| + |S|)


def test_load_gold_with_prefix_takes_the_first_lines_only(tmp_path: Path):
    """nmt.align.io:load_gold — with `prefix` the file may have more lines than records
    (a --limit): the first ones are used, still checked to lie inside the pairs."""
    path = tmp_path / "gold.txt"
    path.write_text("0-0\n1-0\n9-9\n", encoding="utf-8")
    records = [_record(["a", "b"], ["x"]), _record(["a", "b"], ["x"])]
    assert [g.sure for g in load_gold(path, records, prefix=True)] == [{(0, 0)}, {(1, 0)}]
    with pytest.raises(NMTError, match="3 lines"):
        load_gold(path, records)


def test_pharaoh_output_is_sorted_numerically_and_deduplicated():
    """nmt.align.io:format_pharaoh — sorted (by source, then target, as numbers),
    space-separated i-j."""
    assert format_pharaoh([(10, 2), (2, 10), (2, 3), (2, 3)]) == "2-3 2-10 10-2"
    assert format_pharaoh([]) == ""


def test_read_pairs_needs_one_separator_per_line(tmp_path: Path):
    """nmt.align.io:read_pairs — `source ||| target` lines, stripped; errors name the file
    and line; an empty file is an error."""
    path = tmp_path / "pairs.txt"
    path.write_text("ein Hund ||| a dog \n", encoding="utf-8")
    assert read_pairs(path) == (["ein Hund"], ["a dog"])
    path.write_text("ein ||| a\nzwei ||| b ||| c\n", encoding="utf-8")
    with pytest.raises(NMTError, match=r"pairs\.txt:2: expected"):
        read_pairs(path)
    path.write_text("", encoding="utf-8")
    with pytest.raises(NMTError, match="no sentence pairs"):
        read_pairs(path)


def test_teacher_aer_treats_every_teacher_link_as_sure():
    """nmt.align.guided:teacher_aer — AER against the teacher's links, all sure: with
    A = {0-0, 1-1}, T = {0-0, 2-1}: 1 - 2 * 1 / (2 + 2)."""
    records = [SimpleNamespace(links=[(0, 0), (1, 1)])]
    assert teacher_aer(records, [{(0, 0), (2, 1)}, {(5, 5)}]) == pytest.approx(0.5)


# ----------------------------------------------------------------------------- diagnostics


def test_attention_entropy_renormalises_rows_and_ignores_bad_cells():
    """nmt.align.metrics:attention_entropy — each row first renormalised to sum to 1 (NaN
    read as 0, negatives clipped), all-zero rows skipped; a non-2-D input is refused."""
    a = np.array([[2.0, 2.0, 0.0], [np.nan, 3.0, -1.0], [0.0, 0.0, 0.0]])
    assert attention_entropy(a) == pytest.approx(math.log(2) / 2)  # rows: log 2 and 0
    assert attention_entropy(np.zeros((3, 4))) == 0.0
    with pytest.raises(ValueError, match="2-D"):
        attention_entropy(np.ones(4))


def test_mass_on_counts_each_column_once_and_is_zero_without_rows():
    """nmt.align.metrics:mass_on — mean over rows of the mass on the set of columns (-1 and
    S-1 are the same column, counted once); 0.0 for a matrix without rows."""
    b = np.array([[0.2, 0.8], [0.6, 0.4]])
    assert mass_on(b, [-1, 1]) == pytest.approx(0.6)
    assert mass_on(np.zeros((0, 3)), [-1]) == 0.0


def test_diagonal_baseline_edges():
    """nmt.align.metrics:diagonal_links — round(j (S-1) / max(T-1, 1)): one source word
    takes every target word; one target word links to source 0; empty sides give none."""
    assert diagonal_links(1, 3) == {(0, 0), (0, 1), (0, 2)}
    assert diagonal_links(5, 1) == {(0, 0)}
    assert diagonal_links(3, 0) == set() and diagonal_links(0, 0) == set()
    assert diagonal_links(5, 3) == {(0, 0), (2, 1), (4, 2)}  # the last target to the last source


def _record(src_words, tgt_words, word_weights=None, links=(), weights=None):
    s, t = len(src_words), len(tgt_words)
    if weights is None:
        weights = np.full((1, 1, t + 1, s + 1), 1.0 / (s + 1))
    if word_weights is None:
        word_weights = np.full((t, s), 1.0 / s)
    return AlignmentRecord(0, [*src_words, "</s>"], [*tgt_words, "</s>"], weights,
                           list(src_words), list(tgt_words), word_weights, list(links))


def test_alignment_summary_reports_the_models_and_the_diagonals_aer():
    """nmt.align.metrics:alignment_summary — mean entropy and EOS mass over records, and
    with gold the AER, precision and recall of the records' links plus the diagonal
    baseline's AER; eos_mass drops the EOS row and reads the EOS column."""
    weights = np.zeros((2, 1, 3, 3))  # 2 layers, T + 1 = 3 rows, S + EOS = 3 columns
    weights[:, 0, 0] = [0.5, 0.3, 0.2]
    weights[:, 0, 1] = [0.1, 0.5, 0.4]
    weights[:, 0, 2] = [0.0, 0.0, 1.0]  # the EOS row: left out
    one = _record(["a", "b"], ["x", "y"], np.eye(2)[::-1].copy(), [(1, 0), (0, 1)], weights)
    two = _record(["a"], ["x"], np.ones((1, 1)), [(0, 0)])
    golds = [gold({(0, 0), (1, 1)}), gold({(0, 0)})]
    summary = alignment_summary([one, two], golds)
    assert summary["sentences"] == 2
    assert summary["entropy"] == pytest.approx(0.0)
    assert eos_mass(one) == pytest.approx(0.3)
    assert summary["eos_mass"] == pytest.approx((0.3 + 0.5) / 2)
    assert summary["aer"] == pytest.approx(1 - 2 / 6)  # |A| = |S| = 3, one hit each
    assert summary["precision"] == pytest.approx(1 / 3)
    assert summary["recall"] == pytest.approx(1 / 3)
    assert summary["diagonal_aer"] == 0.0  # the diagonal is this gold
    assert "aer" not in alignment_summary([one, two])


# ------------------------------------------------------------------------------ hard links


def test_hard_links_of_degenerate_matrices():
    """nmt.align.words:links_from_matrix — links are (source, target); no rows or no
    columns give no links; NaN cells count as 0 (a row of NaN gets no link)."""
    assert links_from_matrix(np.zeros((0, 3))) == set()
    assert links_from_matrix(np.zeros((3, 0))) == set()
    a = np.array([[np.nan, np.nan], [np.nan, 0.7]])
    assert links_from_matrix(a) == {(1, 1)}
    assert links_from_matrix(a, "threshold", 0.5) == {(1, 1)}
    assert links_from_matrix(np.array([[0.2, 0.0, 0.8]])) == {(2, 0)}


def test_reading_uses_the_first_heads_of_a_layer_and_word_matrix_drops_eos():
    """nmt.align.words:reading — `heads`: the mean of the first `heads` heads of `layer`;
    a single-map family's one map, whatever `layer` and `heads` say (shifted: from row 1);
    word_matrix — the word-level map of one reading with the EOS column dropped (rows
    renormalised over real words)."""
    w = np.zeros((2, 3, 3, 3))  # L = 2, H = 3, T + 1 = 3, S = 2 + EOS
    w[1, 0] = 0.2
    w[1, 1] = 0.4
    w[1, 2] = 9.0  # the third head: not among the first two
    np.testing.assert_allclose(reading(w, layer=1, heads=2), np.full((2, 3), 0.3))
    single = np.zeros((1, 1, 3, 3))
    single[0, 0, :, :] = [[0.6, 0.2, 0.2], [0.1, 0.1, 0.8], [0.0, 0.0, 1.0]]
    words = word_matrix(single, ["▁a", "▁b"], ["▁x", "▁y"])
    assert words.shape == (2, 2)
    np.testing.assert_allclose(words, [[0.75, 0.25], [0.5, 0.5]])
    for layer, heads in ((None, None), (-2, 1), (3, 2)):  # a single map whatever they say
        np.testing.assert_array_equal(reading(single, layer=layer, heads=heads), single[0, 0, :-1])
    np.testing.assert_array_equal(reading(single, shifted=True), single[0, 0, 1:])


def test_forced_weights_refuse_a_model_without_attention():
    """nmt.align.extract:forced_weights — the fixed-context family has no attention to
    export: a one-line NMTError that says so (saliency is the way to align it)."""
    with pytest.raises(NMTError, match="no attention to export"):
        forced_weights(tiny_model("fixed_context"), [[5, 6, 3]], [[7]])


def test_a_reverse_record_flips_into_the_forward_order_and_symmetrises():
    """nmt.align.bidirectional:flip_record — the reverse run's record in forward order: the
    word map transposed, links flipped, words swapped; symmetrized_records — the links of
    `symmetrize` as a 0/1 (T, S) map with an empty EOS row and column; differing word
    counts are refused."""
    reverse = _record(["x", "y", "z"], ["a", "b"], np.array([[0.1, 0.2, 0.7], [0.6, 0.3, 0.1]]),
                      [(2, 0), (0, 1)])  # reverse: source x y z (our target), target a b
    flipped = flip_record(reverse)
    assert (flipped.src_words, flipped.tgt_words) == (["a", "b"], ["x", "y", "z"])
    np.testing.assert_allclose(flipped.word_weights, reverse.word_weights.T)
    assert sorted(flipped.links) == [(0, 2), (1, 0)] and flipped.meta["direction"] == "reverse"
    forward = _record(["a", "b"], ["x", "y", "z"], np.full((3, 2), 0.5), [(1, 0), (0, 2)])
    [both] = symmetrized_records([forward], [flipped], "intersection", {})
    assert both.links == [(0, 2), (1, 0)]
    expected = np.zeros((3, 2))
    expected[2, 0] = expected[0, 1] = 1.0
    np.testing.assert_array_equal(both.word_weights, expected)
    assert both.weights.shape == (1, 1, 4, 3) and both.weights[0, 0, -1].sum() == 0
    with pytest.raises(NMTError, match="different words"):
        symmetrized_records([forward], [reverse], "union", {})


def test_saliency_chunks_respect_both_limits_and_keep_every_sentence():
    """nmt.align.attribution:_chunks — consecutive runs of `order` with at most `sentences`
    sentences and count x widest x longest <= `cells`; a sentence too big alone still makes
    a chunk, and every sentence comes out once, in order."""
    order = [0, 1, 2, 3, 4]
    widths, lengths = [2, 2, 3, 3, 10], [2, 3, 3, 4, 10]
    chunks = list(_chunks(order, widths, lengths, sentences=2, cells=30))
    assert [i for c in chunks for i in c] == order
    for chunk in chunks:
        assert len(chunk) <= 2
        if len(chunk) > 1:
            assert len(chunk) * max(widths[i] for i in chunk) * max(lengths[i] for i in chunk) <= 30
    assert [4] in chunks  # 10 x 10 > 30: alone
    assert list(_chunks(order, widths, lengths, sentences=1, cells=10**6)) == [[i] for i in order]
