"""Readings of attention as alignments, on hand-built tensors with known answers:
naive (row t predicts target piece t) against shifted (Chen et al. 2020: piece t is
read at the step whose input is piece t, row t + 1), the default (every layer and head
averaged), and the word-level matrix of one reading."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nmt.align.extract import default_shifted, forced_weights, make_record, reread
from nmt.align.records import AlignmentRecord
from nmt.align.words import reading, word_matrix
from nmt.core.errors import NMTError
from nmt.core.tokens import BOS, EOS_PIECE
from nmt.report.align import AlignOptions
from tests.conftest import tiny_model


def coded(L: int, H: int, rows: int, S: int) -> np.ndarray:
    """w[l, h, r, s] = 1000 l + 100 h + 10 r + s: every cell says where it came from."""
    layer, h, r, s = np.meshgrid(*(np.arange(n) for n in (L, H, rows, S)), indexing="ij")
    return (1000 * layer + 100 * h + 10 * r + s).astype(np.float64)


def test_transformer_default_is_the_mean_of_every_layer_and_head_naive():
    w = coded(4, 2, 4, 2)  # 4 layers, 2 heads, T + 1 = 4 rows (3 pieces + EOS), S = 2
    # mean over layers 0..3 = 1500, over heads 0 and 1 = 50; naive: rows 0..2
    expected = np.array([[1550 + 10 * r + s for s in range(2)] for r in (0, 1, 2)])
    np.testing.assert_array_equal(reading(w), expected)
    np.testing.assert_array_equal(reading(w, shifted=False), expected)
    for layer in range(4):  # no single layer is the default
        assert not np.array_equal(reading(w, shifted=False, layer=layer), expected)


def test_shifted_reading_takes_rows_1_to_t():
    w = coded(3, 2, 4, 2)
    expected = np.array([[1050 + 10 * r + s for s in range(2)] for r in (1, 2, 3)])
    np.testing.assert_array_equal(reading(w, shifted=True), expected)


def test_naive_reading_takes_rows_0_to_t_minus_1():
    w = coded(3, 2, 4, 2)
    expected = np.array([[1050 + 10 * r + s for s in range(2)] for r in (0, 1, 2)])
    np.testing.assert_array_equal(reading(w, shifted=False), expected)
    assert not np.array_equal(reading(w, shifted=False), reading(w, shifted=True))


@pytest.mark.parametrize(("layer", "base"), [(0, 50), (2, 2050), (-1, 2050), (-3, 50)])
def test_a_chosen_layer(layer, base):
    w = coded(3, 2, 4, 2)
    expected = np.array([[base + 10 * r + s for s in range(2)] for r in (1, 2, 3)])
    np.testing.assert_array_equal(reading(w, shifted=True, layer=layer), expected)


def test_a_layer_out_of_range_names_the_valid_ones():
    with pytest.raises(NMTError, match=r"--layer 3: .* 3 decoder layers \(0\.\.2\)"):
        reading(coded(3, 2, 4, 2), layer=3)


def test_single_map_families_read_naively_without_the_eos_row():
    w = coded(1, 1, 4, 2)  # RNN families: L = H = 1, row t predicts piece t
    np.testing.assert_array_equal(reading(w), w[0, 0, :3])
    np.testing.assert_array_equal(reading(w, shifted=True), w[0, 0, 1:])
    one_layer = coded(1, 2, 4, 2)  # a 1-layer Transformer: layer 0, heads averaged
    np.testing.assert_array_equal(reading(one_layer), one_layer[0].mean(0)[:-1])
    np.testing.assert_array_equal(reading(one_layer, shifted=True), one_layer[0].mean(0)[1:])


ROWS = np.array([
    [1.0, 0.0, 0.0, 0.0],  # row 0 (input BOS): only the naive reading uses it
    [0.1, 0.1, 0.6, 0.2],  # row 1 (input ▁a)
    [0.5, 0.3, 0.1, 0.1],  # row 2 (input ▁b)
    [0.2, 0.2, 0.2, 0.4],  # row 3 (input c)
])


def test_word_matrix_of_the_shifted_reading_known_answer():
    """Target pieces ▁a ▁b c, source pieces ▁x y ▁z + EOS; one layer, one head would be
    read as one map, so two heads that agree: the shifted rows 1..3 are used."""
    w = np.stack([ROWS, ROWS])[None]  # (L=1, H=2, T+1=4, S=4)
    words = word_matrix(w, ["▁x", "y", "▁z"], ["▁a", "▁b", "c"], shifted=True)
    # word a = row 1: [0.1 + 0.1, 0.6] / 0.8; word bc = mean of rows 2, 3: [0.35, 0.25,
    # 0.15] -> [0.6, 0.15] / 0.75 (EOS column dropped, rows renormalised)
    np.testing.assert_allclose(words, [[0.25, 0.75], [0.8, 0.2]])
    naive = word_matrix(w, ["▁x", "y", "▁z"], ["▁a", "▁b", "c"], shifted=False)
    # naive: word a = row 0; word bc = mean of rows 1, 2 = [0.3, 0.2, 0.35] -> [0.5, 0.35]
    np.testing.assert_allclose(naive, [[1.0, 0.0], [0.5 / 0.85, 0.35 / 0.85]])


def test_align_options_default_to_the_automatic_reading_and_layer():
    opts = AlignOptions(runs=[])
    assert opts.layer is None and opts.reading == "auto" and opts.shifted is None
    assert AlignOptions(runs=[], reading="naive").shifted is False


def test_each_family_reads_its_own_default_way():
    assert default_shifted(tiny_model("transformer"), "attention", None) is False  # measured: naive
    assert default_shifted(tiny_model("bahdanau"), "attention", None) is False
    assert default_shifted(tiny_model("bahdanau"), "attention", True) is True
    assert default_shifted(tiny_model("transformer"), "saliency", None) is False


def test_forced_weights_are_each_pairs_attention_alone():
    """Batched, sorted and padded extraction gives every pair its own (L, H, T+1, S)."""
    model = tiny_model("transformer")
    src = [[5, 6, 7, 3], [8, 3], [9, 10, 11, 12, 13, 3]]
    tgt = [[14, 15], [16, 17, 18], [19]]
    for s, t, w in zip(src, tgt, forced_weights(model, src, tgt, batch_size=2)):
        _, attn, _ = model(torch.tensor([s]), torch.tensor([[BOS] + t]), need_attn=True)
        assert w.shape == (2, 4, len(t) + 1, len(s))
        np.testing.assert_allclose(w, attn[0].detach().numpy(), atol=1e-5)


class Pieces:
    """A vocabulary stand-in: ids to SentencePiece pieces."""

    TABLE = {5: "▁x", 6: "y", 7: "▁z", 3: "</s>", 14: "▁a", 15: "▁b", 16: "c"}

    def src_pieces(self, ids: list[int]) -> list[str]:
        return [self.TABLE[i] for i in ids]

    tgt_pieces = src_pieces


def test_make_record_words_weights_and_links():
    w = ROWS[None, None]  # an RNN's one map, read naively: rows 0..2
    rec = make_record(4, Pieces(), [5, 6, 7, 3], [14, 15, 16], w, shifted=False)
    assert rec.index == 4
    assert rec.src_tokens == ["▁x", "y", "▁z", EOS_PIECE]
    assert rec.tgt_tokens == ["▁a", "▁b", "c", EOS_PIECE]
    assert (rec.src_words, rec.tgt_words) == (["xy", "z"], ["a", "bc"])
    np.testing.assert_allclose(rec.word_weights, [[1.0, 0.0], [0.5 / 0.85, 0.35 / 0.85]],
                               rtol=1e-6)
    assert rec.links == [(0, 0), (0, 1)]  # (source word, target word) by argmax
    shifted = make_record(4, Pieces(), [5, 6, 7, 3], [14, 15, 16], w, shifted=True)
    assert shifted.links == [(0, 1), (1, 0)]  # a -> z (0.75), bc -> xy (0.8)


def test_reread_recomputes_a_saved_record_with_the_reading_asked_now():
    rng = np.random.default_rng(0)
    w = rng.random((2, 2, 4, 4)) ** 4  # 2 layers, 2 heads, 3 pieces + EOS each side
    w /= w.sum(-1, keepdims=True)
    src, tgt = ["\u2581a", "\u2581b", "\u2581c"], ["\u2581x", "\u2581y", "\u2581z"]
    old = word_matrix(w, src, tgt, False, 0)  # saved under a layer-0 reading
    rec = AlignmentRecord(index=0, src_tokens=src + [EOS_PIECE], tgt_tokens=tgt + [EOS_PIECE],
                          weights=w, src_words=["a", "b", "c"], tgt_words=["x", "y", "z"],
                          word_weights=old, links=[(0, 0)])
    new = reread(rec)
    mean = w.mean((0, 1))[:-1, :-1]  # naive rows, EOS column dropped, one piece per word
    np.testing.assert_allclose(new.word_weights, mean / mean.sum(-1, keepdims=True))
    assert not np.allclose(new.word_weights, old)
    assert new.links == sorted((int(new.word_weights[j].argmax()), j) for j in range(3))
    np.testing.assert_allclose(reread(rec, layer=0).word_weights, old)
    np.testing.assert_allclose(rec.word_weights, old, rtol=1e-6)  # the saved record is
    assert rec.links == [(0, 0)]  # left as it was
