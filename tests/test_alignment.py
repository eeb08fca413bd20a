"""Tests for nmt.align (io, words, metrics): gold files, AER, subword reduction, links, diagnostics, export."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from nmt.align.io import load_alignments, save_alignments
from nmt.align.metrics import alignment_error_rate, attention_entropy, diagonal_links, mass_on
from nmt.align.records import AlignmentRecord
from nmt.align.words import join_pieces, links_from_matrix, pieces_to_words, reduce_to_words
from nmt.core.errors import NMTError
from nmt.data.links import (
    GoldAlignment,
    check_links_in_range,
    format_pharaoh,
    parse_pharaoh,
    read_gold,
)


def gold(sure: set, possible: set = frozenset()) -> GoldAlignment:
    return GoldAlignment(frozenset(sure), frozenset(set(possible) | set(sure)))


def write(tmp_path: Path, text: str, name: str = "gold.talp") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------ read_gold


def test_read_gold_formats_sure_and_possible(tmp_path: Path) -> None:
    path = write(tmp_path, "0-0 1p2 2-1-P 3-3-S\n\n4?4\n")
    g = read_gold(path)
    assert len(g) == 3
    assert g[0].sure == {(0, 0), (3, 3)}
    assert g[0].possible == {(0, 0), (3, 3), (1, 2), (2, 1)}
    assert g[1] == gold(set())  # empty line = sentence without links
    assert g[2].sure == frozenset() and g[2].possible == {(4, 4)}


def test_zero_and_one_based_files_give_same_links(tmp_path: Path) -> None:
    zero = read_gold(write(tmp_path, "0-0 1p2 3-1\n2-0\n", "zero.txt"))
    one = read_gold(write(tmp_path, "1-1 2p3 4-2\n3-1\n", "one.txt"), one_based=True)
    assert zero == one


def test_read_gold_malformed_token_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "0-0 1-1\n0-0 1x1\n")
    with pytest.raises(NMTError, match=r"gold\.talp:2: malformed link '1x1'"):
        read_gold(path)


def test_read_gold_zero_index_with_one_based_suggests_flag(tmp_path: Path) -> None:
    path = write(tmp_path, "1-1\n0-1\n")
    with pytest.raises(NMTError, match=r"gold\.talp:2: .*--one-based"):
        read_gold(path, one_based=True)


def test_read_gold_missing_file(tmp_path: Path) -> None:
    with pytest.raises(NMTError, match="nope.txt"):
        read_gold(tmp_path / "nope.txt")


def test_gold_line_count_mismatch_names_both_counts(tmp_path: Path) -> None:
    path = write(tmp_path, "0-0\n1-1\n")
    with pytest.raises(NMTError, match=r"gold\.talp: gold file has 2 lines .* 3 sentences"):
        check_links_in_range(read_gold(path), [2, 2, 2], [2, 2, 2], path)


def test_gold_link_out_of_range(tmp_path: Path) -> None:
    path = write(tmp_path, "0-0\n0-0 5-1\n")
    with pytest.raises(NMTError, match=r"gold\.talp:2: link 5-1 .* 3 source and 2 target"):
        check_links_in_range(read_gold(path), [2, 3], [2, 2], path)
    # a link exactly one past the end hints at a 1-based file
    with pytest.raises(NMTError, match="--one-based"):
        check_links_in_range(read_gold(path), [2, 5], [2, 2], path)
    check_links_in_range(read_gold(path), [1, 6], [1, 2], path)  # in range: no error
    # the target side too: 5-1 is one past the end of a 1-word target
    with pytest.raises(NMTError, match=r"gold\.talp:2: link 5-1 .* 6 source and 1 target.*"
                                       "--one-based"):
        check_links_in_range(read_gold(path), [1, 6], [1, 1], path)


def test_gold_alignment_requires_sure_subset_of_possible() -> None:
    with pytest.raises(ValueError):
        GoldAlignment(frozenset({(0, 0)}), frozenset())


# ------------------------------------------------------------------------------------ AER


def test_aer_perfect_prediction_is_zero() -> None:
    g = [gold({(0, 0), (1, 1)}, {(1, 2)}), gold({(0, 1)})]
    r = alignment_error_rate([{(0, 0), (1, 1)}, {(0, 1)}], g)
    assert r["aer"] == 0.0 and r["precision"] == 1.0 and r["recall"] == 1.0


def test_aer_only_possible_links_predicted() -> None:
    # A = {(1,1)}, S = {(0,0)}, P = {(0,0),(1,1)}: |A∩S| = 0, |A∩P| = 1
    # precision = 1/1, recall = 0/1, AER = 1 - (0 + 1) / (1 + 1) = 0.5
    r = alignment_error_rate([{(1, 1)}], [gold({(0, 0)}, {(1, 1)})])
    assert r["precision"] == 1.0 and r["recall"] == 0.0
    assert r["aer"] == pytest.approx(0.5)


def test_aer_worked_example_sums_counts_over_corpus() -> None:
    # sentence 1: S = {0-0, 1-1}, P = S ∪ {1-2}, A = {0-0, 1-2, 2-2}
    #   |A| = 3, |S| = 2, |A∩S| = 1 (0-0), |A∩P| = 2 (0-0, 1-2)  -> alone: AER = 1 - 3/5 = 0.4
    # sentence 2: S = P = {0-0}, A = {0-0} -> |A| = 1, |S| = 1, |A∩S| = |A∩P| = 1 (AER 0)
    # corpus: |A| = 4, |S| = 3, |A∩S| = 2, |A∩P| = 3
    #   precision = 3/4, recall = 2/3, AER = 1 - (2 + 3) / (4 + 3) = 2/7
    #   (the mean of sentence AERs would be 0.2, so this checks corpus-level summing)
    g = [gold({(0, 0), (1, 1)}, {(1, 2)}), gold({(0, 0)})]
    r = alignment_error_rate([{(0, 0), (1, 2), (2, 2)}, {(0, 0)}], g)
    assert r["precision"] == pytest.approx(3 / 4)
    assert r["recall"] == pytest.approx(2 / 3)
    assert r["aer"] == pytest.approx(2 / 7)
    assert (r["predicted"], r["sure"], r["possible"]) == (4, 3, 4)
    assert (r["predicted_and_sure"], r["predicted_and_possible"]) == (2, 3)
    one = alignment_error_rate([{(0, 0), (1, 2), (2, 2)}], g[:1])
    assert one["aer"] == pytest.approx(0.4)


def test_aer_empty_predictions() -> None:
    r = alignment_error_rate([set(), set()], [gold({(0, 0)}), gold(set())])
    assert r["precision"] == 0.0 and r["recall"] == 0.0 and r["aer"] == 1.0
    nothing = alignment_error_rate([set()], [gold(set())])
    assert nothing["aer"] == 0.0 and nothing["precision"] == 0.0


def test_aer_length_mismatch() -> None:
    with pytest.raises(NMTError, match="1 predicted alignments but 2 gold"):
        alignment_error_rate([set()], [gold(set()), gold(set())])


# ---------------------------------------------------------------------- subwords to words


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (["▁Das", "▁Mäd", "chen", "▁ist", "▁größer", "."], [0, 1, 1, 2, 3, 3]),
        (["chen", "▁ist"], [0, 1]),  # the first piece always starts word 0
        (["▁", "Ä", "pfel", "▁fallen"], [0, 0, 0, 1]),  # lone ▁ joins the next word
        (["▁Der", "▁", "▁Baum"], [0, 1, 1]),
        (["▁a", "▁"], [0, 0]),  # a trailing lone ▁ has no next word
        ([], []),
    ],
)
def test_pieces_to_words(pieces: list[str], expected: list[int]) -> None:
    assert pieces_to_words(pieces) == expected


def test_join_pieces_skips_dropped_tokens() -> None:
    pieces = ["▁Das", "▁Mäd", "chen", "</s>"]
    assert join_pieces(pieces, [0, 1, 1, -1]) == ["Das", "Mädchen"]


def test_reduce_to_words_averages_rows_sums_columns_drops_eos() -> None:
    # target pieces ▁The ▁gir l </s>; source pieces ▁Das ▁Mäd chen </s>
    a = np.array([
        [0.7, 0.1, 0.1, 0.1],
        [0.1, 0.4, 0.3, 0.2],
        [0.0, 0.2, 0.6, 0.2],
        [0.0, 0.0, 0.0, 1.0],
    ])
    w = reduce_to_words(a, [0, 1, 1, -1], [0, 1, 1, -1])
    # word "The": row 0 without EOS = [0.7, 0.2] / 0.9
    # word "girl": mean of rows 1-2 = [0.05, 0.3, 0.45, 0.2] -> [0.05, 0.75] / 0.8
    expected = np.array([[7 / 9, 2 / 9], [0.0625, 0.9375]])
    np.testing.assert_allclose(w, expected)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)


def test_reduce_to_words_keeps_zero_rows_and_rejects_bad_maps() -> None:
    a = np.array([[0.0, 0.0, 1.0], [0.5, 0.5, 0.0]])
    w = reduce_to_words(a, [0, 1], [0, 0, -1])  # row 0 only attended to EOS
    np.testing.assert_allclose(w, [[0.0], [1.0]])
    with pytest.raises(ValueError, match="source word map"):
        reduce_to_words(a, [0, 1], [0, 1])
    with pytest.raises(ValueError, match="none skipped"):
        reduce_to_words(a, [0, 2], [0, 0, -1])
    # a side whose tokens are all non-words (-1), or that has no tokens, has no words
    assert reduce_to_words(a, [0, 1], [-1, -1, -1]).shape == (2, 0)
    assert reduce_to_words(a, [-1, -1], [0, 0, -1]).shape == (0, 1)
    assert reduce_to_words(np.zeros((0, 3)), [], [0, 1, -1]).shape == (0, 2)


# ---------------------------------------------------------------------------- hard links


def test_links_from_matrix_argmax_and_threshold() -> None:
    a = np.array([[0.1, 0.9], [0.0, 0.0], [0.6, 0.4]])
    assert links_from_matrix(a) == {(1, 0), (0, 2)}  # zero row 1 gets no link
    assert links_from_matrix(a, "threshold", 0.5) == {(1, 0), (0, 2)}
    assert links_from_matrix(a, "threshold", 0.4) == {(1, 0), (0, 2), (1, 2)}
    assert links_from_matrix(a, "threshold", 0.0) == {(0, 0), (1, 0), (0, 2), (1, 2)}
    with pytest.raises(NMTError, match="unknown alignment method 'max'"):
        links_from_matrix(a, "max")


def test_pharaoh_round_trip() -> None:
    links = {(10, 3), (2, 1), (0, 0)}
    text = format_pharaoh(links)
    assert text == "0-0 2-1 10-3"
    assert parse_pharaoh(text) == links
    assert parse_pharaoh("") == set()
    with pytest.raises(NMTError, match="'0:1'"):
        parse_pharaoh("0-0 0:1")


# --------------------------------------------------------------------------- diagnostics


def test_attention_entropy_and_mass_on() -> None:
    a = np.array([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert attention_entropy(a) == pytest.approx(math.log(4) / 2)  # zero row skipped
    assert attention_entropy(np.zeros((0, 0))) == 0.0
    b = np.array([[0.5, 0.5], [0.9, 0.1]])
    assert mass_on(b, [-1]) == pytest.approx(0.3)
    assert mass_on(b, [0, 1]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        mass_on(b, [2])
    tall = np.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]])  # 3 rows, 2 columns
    assert mass_on(tall, [-2]) == pytest.approx(1.6 / 3)
    with pytest.raises(ValueError, match=r"columns \[-3\] out of range .* 2 columns"):
        mass_on(tall, [-3])  # bounded by the columns, not the rows


def test_diagonal_links() -> None:
    # S = 3, T = 5: source = round(j * 2 / 4) with halves rounded up -> 0, 1, 1, 2, 2
    assert diagonal_links(3, 5) == {(0, 0), (1, 1), (1, 2), (2, 3), (2, 4)}
    assert diagonal_links(4, 4) == {(k, k) for k in range(4)}
    assert diagonal_links(4, 1) == {(0, 0)}
    assert diagonal_links(0, 3) == set()


# -------------------------------------------------------------------------------- export


def make_records() -> list[AlignmentRecord]:
    rng = np.random.default_rng(0)
    w1 = rng.random((2, 3, 4, 5)).astype(np.float32)
    return [
        AlignmentRecord(
            index=7, src_tokens=["▁Das", "▁Mäd", "chen", "▁lacht", "</s>"],
            tgt_tokens=["▁The", "▁girl", "▁laughs", "</s>"], weights=w1,
            src_words=["Das", "Mädchen", "lacht"], tgt_words=["The", "girl", "laughs"],
            word_weights=np.eye(3), links=[(0, 0), (1, 1), (2, 2)],
            meta={"run": "transformer-base", "layer": None, "bleu": 27.5, "tags": ["a", "ö"]},
        ),
        AlignmentRecord(
            index=8, src_tokens=["▁žluť"], tgt_tokens=["▁yellow", "</s>"],
            weights=np.ones((1, 1, 2, 1)), src_words=["žluť"], tgt_words=["yellow"],
            word_weights=np.ones((1, 1)),
        ),
    ]


def assert_same(a: AlignmentRecord, b: AlignmentRecord) -> None:
    for name in ("index", "src_tokens", "tgt_tokens", "src_words", "tgt_words", "links", "meta"):
        assert getattr(a, name) == getattr(b, name), name
    for name in ("weights", "word_weights"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype == np.float32
        np.testing.assert_array_equal(x, y)


def test_save_load_round_trip_without_pickle(tmp_path: Path) -> None:
    records = make_records()
    path = tmp_path / "out" / "align.npz"
    save_alignments(path, records)
    loaded = load_alignments(path)
    assert len(loaded) == 2
    for a, b in zip(records, loaded):
        assert_same(a, b)
    with np.load(path, allow_pickle=False) as data:  # every array loads without pickle
        assert all(data[k].dtype != object for k in data.files)
    index = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    first = index["records"][0]
    assert first["index"] == 7 and first["links"] == "0-0 1-1 2-2"
    assert first["weights_shape"] == [2, 3, 4, 5] and first["entropy"] == 0.0
    assert first["src_words"][1] == "Mädchen"


def test_save_load_empty_and_errors(tmp_path: Path) -> None:
    save_alignments(tmp_path / "empty.npz", [])
    assert load_alignments(tmp_path / "empty.npz") == []
    with pytest.raises(NMTError, match=r"align\.json: .*\.npz"):
        save_alignments(tmp_path / "align.json", make_records())
    with pytest.raises(NMTError, match="missing.npz"):
        load_alignments(tmp_path / "missing.npz")
    np.savez_compressed(tmp_path / "other.npz", x=np.zeros(2))
    with pytest.raises(NMTError, match="not an nmt alignment export"):
        load_alignments(tmp_path / "other.npz")
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(NMTError, match="junk.npz"):
        load_alignments(tmp_path / "junk.npz")


def test_record_shape_checked() -> None:
    with pytest.raises(ValueError, match="weights"):
        AlignmentRecord(index=0, src_tokens=["a"], tgt_tokens=["b"], weights=np.ones((1, 1, 2, 1)),
                        src_words=["a"], tgt_words=["b"], word_weights=np.ones((1, 1)))
